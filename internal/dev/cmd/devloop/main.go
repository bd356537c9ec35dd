// Command devloop works with the stack that `make dev` runs, through the
// state file it writes (-state, default build/dev/stack.json):
//
//	devloop invoke -rie RIE -bootstrap BIN FUNCTION EVENT
//	    (make invoke) runs one function's bootstrap under aws-lambda-rie, as
//	    `sam local invoke FUNCTION -e EVENT` would, with the stack's
//	    environment, the memory size and timeout that template.yaml gives
//	    FUNCTION, and EVENT's placeholders filled (see devstack.FillEvent):
//	    {{employer_token}} and {{candidate_token}} with tokens of the demo
//	    accounts, signed in through the stack's API, and {{occurred_at}}
//	    with the time the demo was seeded. It prints the answer on stdout
//	    and the emulator's and function's output on stderr.
//	devloop poison
//	    (make poison) sends a message that is not an event to the stack's
//	    queue and waits until it reaches the dead-letter queue.
//
// Without a running stack both say to start `make dev` first.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jobboard/jobboard/internal/dev/devstack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "devloop:", err)
		os.Exit(1)
	}
}

const usage = "usage: devloop invoke [-state FILE] [-template FILE] -rie RIE -bootstrap BIN FUNCTION EVENT\n" +
	"       devloop poison [-state FILE] [-timeout DURATION]"

// run is main without the process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) < 2 {
		return errors.New(usage)
	}
	fs := flag.NewFlagSet(args[0]+" "+args[1], flag.ContinueOnError)
	fs.SetOutput(stderr)
	state := fs.String("state", devstack.DefaultStateFile, "the state file of the running `make dev`")
	switch args[1] {
	case "invoke":
		template := fs.String("template", "template.yaml", "the SAM template that declares the function")
		rie := fs.String("rie", "", "the aws-lambda-rie binary")
		bootstrap := fs.String("bootstrap", "", "the function's binary")
		if err := fs.Parse(args[2:]); err != nil {
			return err
		}
		if fs.NArg() != 2 || *rie == "" || *bootstrap == "" {
			return errors.New(usage)
		}
		return invoke(ctx, *state, *template, *rie, *bootstrap, fs.Arg(0), fs.Arg(1), stdout, stderr)
	case "poison":
		timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for the dead-letter queue")
		if err := fs.Parse(args[2:]); err != nil {
			return err
		}
		st, err := devstack.ReadState(ctx, *state)
		if err != nil {
			return err
		}
		_, err = devstack.Poison(ctx, st, *timeout, stdout)
		return err
	default:
		return fmt.Errorf("unknown command %q\n%s", args[1], usage)
	}
}

func invoke(ctx context.Context, statePath, templatePath, rie, bootstrap, function, eventPath string, stdout, stderr io.Writer) error {
	st, err := devstack.ReadState(ctx, statePath)
	if err != nil {
		return err
	}
	settings, err := devstack.FunctionFromTemplate(templatePath, function)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(eventPath)
	if err != nil {
		return fmt.Errorf("read event: %w", err)
	}
	event, err := devstack.FillEvent(ctx, st, raw)
	if err != nil {
		return fmt.Errorf("%s: %w", eventPath, err)
	}
	fmt.Fprintf(stderr, "invoke %s (%d MB, %d s timeout) with %s against the stack at %s\n",
		function, settings.MemorySize, settings.Timeout, eventPath, st.APIURL)
	answer, err := devstack.Invocation{
		RIE:       rie,
		Bootstrap: bootstrap,
		Function:  function,
		Settings:  settings,
		Env:       st.Env,
		Log:       stderr,
	}.Run(ctx, event)
	if answer != nil {
		fmt.Fprintf(stdout, "%s\n", answer)
	}
	if failed := batchItemFailures(answer); failed > 0 {
		fmt.Fprintf(stderr, failedRecordsNote, failed)
	}
	return err
}

// failedRecordsNote explains the WARN that follows a failed record of a
// sample: the worker sets the record's backoff on a receipt handle the
// local queue never handed out.
const failedRecordsNote = `note: %d record(s) failed (batchItemFailures). The worker gives a failed
record its backoff with ChangeMessageVisibility on the record's receipt
handle; a sample's handles were never handed out by the local queue, so SQS
refuses them (the WARN "could not schedule the retries" with
ReceiptHandleIsInvalid above). On AWS the handle is the one Lambda
received, and the record comes back after its backoff; make poison shows
that path with a real message.
`

// batchItemFailures counts the failed records in a worker's answer (0 for
// any other answer).
func batchItemFailures(answer []byte) int {
	var resp struct {
		BatchItemFailures []json.RawMessage `json:"batchItemFailures"`
	}
	if json.Unmarshal(answer, &resp) != nil {
		return 0
	}
	return len(resp.BatchItemFailures)
}
