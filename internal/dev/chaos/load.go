package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/jobboard/jobboard/internal/dev/apiclient"
	"github.com/jobboard/jobboard/internal/jobboard"
)

// password of every account the load registers: a throwaway database.
const password = "chaos-password-1"

// api is a JSON client of the API processes: each request goes to one of
// them at random, so that a killed one costs only the requests it had.
type api struct {
	clients []*apiclient.Client
	mu      sync.Mutex
	rng     *rand.Rand
}

// newAPI returns a client of the APIs at urls, each request with a
// deadline of timeout, picking among them with rng.
func newAPI(urls []string, timeout time.Duration, rng *rand.Rand) *api {
	hc := &http.Client{Timeout: timeout}
	a := &api{rng: rng}
	for _, u := range urls {
		a.clients = append(a.clients, &apiclient.Client{BaseURL: u, HTTP: hc})
	}
	return a
}

func (a *api) pick() *apiclient.Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.clients[a.rng.IntN(len(a.clients))]
}

// do sends one request to one of the APIs (see apiclient.Client.Do).
// Errors: the request failed (wrapping a *url.Error), or an
// *apiclient.StatusError.
func (a *api) do(ctx context.Context, method, path, token string, in any, want int, out any) error {
	return a.pick().Do(ctx, method, path, token, in, want, out)
}

// application is one application the load walks through the workflow.
type application struct {
	id             int64
	employerToken  string
	candidateToken string
	status         jobboard.ApplicationStatus
}

// seedData registers the accounts, companies and jobs, and has every
// candidate apply to every job, through the API. It runs before any fault,
// so every error is real.
func seedData(ctx context.Context, a *api, cfg Config) ([]*application, error) {
	register := func(role string, i int) (string, error) {
		var out struct {
			Token string `json:"token"`
		}
		err := a.do(ctx, http.MethodPost, "/v1/auth/register", "", map[string]any{
			"email": fmt.Sprintf("%s-%d@chaos.example.com", role, i), "password": password,
			"name": fmt.Sprintf("%s %d", role, i), "role": role,
		}, http.StatusCreated, &out)
		return out.Token, err
	}
	type job struct {
		id    int64
		token string
	}
	var jobs []job
	for e := range cfg.Employers {
		token, err := register("employer", e)
		if err != nil {
			return nil, err
		}
		var company struct {
			ID int64 `json:"id"`
		}
		if err := a.do(ctx, http.MethodPost, "/v1/companies", token, map[string]any{
			"name": fmt.Sprintf("Chaos Corp %d", e),
		}, http.StatusCreated, &company); err != nil {
			return nil, err
		}
		for j := range cfg.JobsPerEmployer {
			var created struct {
				ID int64 `json:"id"`
			}
			if err := a.do(ctx, http.MethodPost, fmt.Sprintf("/v1/companies/%d/jobs", company.ID), token, map[string]any{
				"title": fmt.Sprintf("Engineer %d", j), "description": "Keeps the emails flowing.", "employment_type": "full_time",
			}, http.StatusCreated, &created); err != nil {
				return nil, err
			}
			jobs = append(jobs, job{id: created.ID, token: token})
		}
	}

	var (
		mu   sync.Mutex
		apps []*application
		errs []error
		wg   sync.WaitGroup
	)
	sem := make(chan struct{}, cfg.Walkers)
	for c := range cfg.Candidates {
		token, err := register("candidate", c)
		if err != nil {
			return nil, err
		}
		for _, j := range jobs {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				var out struct {
					ID int64 `json:"id"`
				}
				err := a.do(ctx, http.MethodPost, fmt.Sprintf("/v1/jobs/%d/applications", j.id), token,
					map[string]any{"cover_letter": "Pick me."}, http.StatusCreated, &out)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				apps = append(apps, &application{id: out.ID, employerToken: j.token, candidateToken: token, status: jobboard.StatusSubmitted})
			})
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, fmt.Errorf("seed applications: %d failed, first: %w", len(errs), errs[0])
	}
	return apps, nil
}

// loadStats is what the load generator saw. The database, not these
// counts, is the ground truth of what committed.
type loadStats struct {
	Requests  atomic.Int64 // PATCH requests sent
	Confirmed atomic.Int64 // answered 200 with the new status
	Uncertain atomic.Int64 // failed: the API died, or answered 5xx; the status was read back
	ReadBacks atomic.Int64 // GETs that found out what happened
	Refused   atomic.Int64 // answered 409 (the status had moved meanwhile)
}

// walk moves the applications through the workflow with cfg.Walkers
// concurrent walkers, at most cfg.Changes requests spread over
// cfg.LoadDuration, until done or ctx ends. After a failed request it reads
// the application's status back and carries on from there.
func walk(ctx context.Context, a *api, cfg Config, apps []*application, rngSeed uint64, stats *loadStats) {
	ctx, cancel := context.WithTimeout(ctx, cfg.LoadDuration*3/2)
	defer cancel()
	queue := make(chan *application, len(apps))
	for _, app := range apps {
		queue <- app
	}
	close(queue)
	tick := time.NewTicker(cfg.LoadDuration / time.Duration(cfg.Changes))
	defer tick.Stop()
	var budget atomic.Int64
	budget.Store(int64(cfg.Changes))

	var wg sync.WaitGroup
	for w := range cfg.Walkers {
		rng := rand.New(rand.NewPCG(rngSeed, uint64(w)))
		wg.Go(func() {
			for app := range queue {
				for !app.status.Terminal() {
					select {
					case <-ctx.Done():
						return
					case <-tick.C:
					}
					if budget.Add(-1) < 0 {
						return
					}
					step(ctx, a, app, next(app.status, rng), stats)
				}
			}
		})
	}
	wg.Wait()
}

// next picks an application's next status: mostly forward, sometimes a
// rejection by the employer or a withdrawal by the candidate.
func next(s jobboard.ApplicationStatus, rng *rand.Rand) jobboard.ApplicationStatus {
	switch r := rng.IntN(100); {
	case r < 6:
		return jobboard.StatusRejected
	case r < 10:
		return jobboard.StatusWithdrawn
	}
	return map[jobboard.ApplicationStatus]jobboard.ApplicationStatus{
		jobboard.StatusSubmitted: jobboard.StatusReviewing,
		jobboard.StatusReviewing: jobboard.StatusInterview,
		jobboard.StatusInterview: jobboard.StatusOffer,
		jobboard.StatusOffer:     jobboard.StatusHired,
	}[s]
}

// step asks for one status change and updates app.status from the answer,
// or from a read-back when there was none.
func step(ctx context.Context, a *api, app *application, to jobboard.ApplicationStatus, stats *loadStats) {
	token := app.employerToken
	if to == jobboard.StatusWithdrawn {
		token = app.candidateToken
	}
	stats.Requests.Add(1)
	var out struct {
		Status jobboard.ApplicationStatus `json:"status"`
	}
	path := "/v1/applications/" + strconv.FormatInt(app.id, 10)
	err := a.do(ctx, http.MethodPatch, path, token, map[string]any{"status": to}, http.StatusOK, &out)
	if err == nil {
		stats.Confirmed.Add(1)
		app.status = out.Status
		return
	}
	if se := (*apiclient.StatusError)(nil); errors.As(err, &se) && se.Got == http.StatusConflict {
		stats.Refused.Add(1)
	} else {
		stats.Uncertain.Add(1)
	}
	// Whatever happened, the database knows: read the status back (from
	// whichever API answers) and go on from there.
	for ctx.Err() == nil {
		if err := a.do(ctx, http.MethodGet, path, app.employerToken, nil, http.StatusOK, &out); err == nil {
			stats.ReadBacks.Add(1)
			app.status = out.Status
			return
		}
		_ = pause(ctx, 100*time.Millisecond)
	}
}

// poisonBodies are messages the worker can never process: they must end in
// the dead-letter queue, body unchanged.
var poisonBodies = []string{
	`not json at all`,
	`{"type":"application.status_changed","application_id":1,"new_status":"reviewing"}`,
	`{"type":"application.renamed","event_id":"poison-unknown-type","application_id":1}`,
	`["an","array"]`,
	`{"type":"application.status_changed","event_id":"poison-no-application","new_status":"reviewing"}`,
}

// sendPoison puts n malformed messages on the queue, straight to the
// stand-in.
func sendPoison(ctx context.Context, st *stack, n int) ([]string, error) {
	var bodies []string
	for i := range n {
		body := poisonBodies[i%len(poisonBodies)]
		if _, err := st.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(st.queueURL), MessageBody: aws.String(body)}); err != nil {
			return bodies, fmt.Errorf("send poison message: %w", err)
		}
		bodies = append(bodies, body)
	}
	return bodies, nil
}
