package function

import (
	"context"
	"errors"

	"github.com/aws/aws-lambda-go/lambda"
)

// Wiring is a function, built by its main's wire from the settings: what it
// runs inside Lambda and outside, and what it releases. Every main has the
// same shape: settings read once (every error joined), then wire, then
// Run.
type Wiring struct {
	// Handler is what the Lambda runtime invokes (see lambda.Start).
	Handler any
	// Local runs the function outside Lambda (a local server, a poller, a
	// timer, or once) until it is done or ctx ends.
	Local func(ctx context.Context) error
	// Close releases what wire opened (the database pool); nil: nothing.
	Close func()
}

// Run runs the function: inside Lambda (s.Lambda) it hands Handler to the
// Lambda runtime with ctx as the base of every invocation's context, which
// does not return; elsewhere it runs Local. Close runs after either.
func (w *Wiring) Run(ctx context.Context, s Settings) error {
	if w.Close != nil {
		defer w.Close()
	}
	if s.Lambda {
		lambda.StartWithOptions(w.Handler, lambda.WithContext(ctx))
		return nil
	}
	if w.Local == nil {
		return errors.New("this function runs only inside Lambda")
	}
	return w.Local(ctx)
}
