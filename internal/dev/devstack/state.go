package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// State is what a running stack tells the tools that work with it (`make
// invoke`, `make poison`): where everything is, the environment it gives the
// functions (so that a function run on its own sees the same database,
// queues and JWT key), and the demo accounts. Run writes it to
// Config.StateFile once the stack is ready and removes it when the stack
// stops. The file holds the stack's JWT key: it is written for the owner
// only, in an ignored folder.
type State struct {
	APIURL      string `json:"api_url"`
	SQSEndpoint string `json:"sqs_endpoint"`
	SESEndpoint string `json:"ses_endpoint"`
	QueueURL    string `json:"queue_url"`
	DLQURL      string `json:"dlq_url"`
	// Env is the functions' environment, as NAME → value.
	Env map[string]string `json:"env"`
	// Demo accounts; the password is the public demo password.
	EmployerEmail  string `json:"employer_email"`
	CandidateEmail string `json:"candidate_email"`
	Password       string `json:"password"`
	// PID is the process that runs the stack.
	PID int `json:"pid"`
}

// ErrNotRunning means no `make dev` stack answers: there is no state file,
// or the API it names does not answer.
var ErrNotRunning = errors.New("no `make dev` stack is running: start `make dev` first (in another terminal)")

// writeState writes st to path for the owner only, replacing the file in
// one step so that a reader never sees half of it.
func writeState(path string, st State) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write stack state: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".stack-*.json")
	if err != nil {
		return fmt.Errorf("write stack state: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write stack state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write stack state: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write stack state: %w", err)
	}
	return nil
}

// ReadState reads the state file at path and checks that its stack answers
// (GET /readyz on its API, within a few seconds). Errors: ErrNotRunning
// (wrapped, with the reason) when the file is missing or the stack does not
// answer; a file that is not a state file.
func ReadState(ctx context.Context, path string) (State, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, fmt.Errorf("%w (no %s)", ErrNotRunning, path)
	}
	if err != nil {
		return State{}, fmt.Errorf("read stack state: %w", err)
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return State{}, fmt.Errorf("%s is not the state of a `make dev` stack: %w", path, err)
	}
	if st.APIURL == "" || st.Env == nil {
		return State{}, fmt.Errorf("%s is not the state of a `make dev` stack: no API or environment", path)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, st.APIURL+"/readyz", nil)
	if err != nil {
		return State{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return State{}, fmt.Errorf("%w (%s names the API %s, which does not answer: %w)", ErrNotRunning, path, st.APIURL, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return State{}, fmt.Errorf("%w (the API %s answers /readyz with %d)", ErrNotRunning, st.APIURL, resp.StatusCode)
	}
	return st, nil
}
