package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// Webhooks: a company's members manage its endpoints, read their delivery
// log, replay a delivery and send a test event. Whoever is not a member
// gets 404, as for the company's other private resources; the store checks
// membership in the statement that reads or writes (jobboard.WebhookStore).

// webhookTarget is what a webhook route names: the signed-in actor, the
// company and, for the routes of one endpoint, the endpoint.
type webhookTarget struct {
	actor             jobboard.Actor
	company, endpoint int64
}

// webhookRoute reads the actor and the route's ids, once the server has
// webhooks. Errors: 503 without them, 401, *requestError.
func (s *server) webhookRoute(r *http.Request, withEndpoint bool) (webhookTarget, error) {
	var t webhookTarget
	if s.Webhooks == nil || s.WebhookSealer == nil {
		return t, errWebhooksOff
	}
	var err error
	if t.actor, err = s.actor(r); err != nil {
		return t, err
	}
	if t.company, err = pathID(r, "id"); err != nil {
		return t, err
	}
	if withEndpoint {
		t.endpoint, err = pathID(r, "wid")
	}
	return t, err
}

// createWebhook registers an endpoint and answers its signing secret, this
// once. POST /v1/companies/{id}/webhooks → 201 endpoint with secret; 400;
// 401; 404; 409 too-many-webhook-endpoints; 422.
func (s *server) createWebhook(w http.ResponseWriter, r *http.Request, st jobboard.Writes) error {
	t, err := s.webhookRoute(r, false)
	if err != nil {
		return err
	}
	in, err := decodeValid[jobboard.NewWebhookEndpoint](w, r)
	if err != nil {
		return err
	}
	if err := s.WebhookURLs.Check(in.URL); err != nil {
		return err
	}
	secret := jobboard.NewWebhookSecret()
	sealed, err := s.WebhookSealer.Seal([]byte(secret), jobboard.WebhookSecretContext(t.company))
	if err != nil {
		return fmt.Errorf("seal webhook secret: %w", err)
	}
	e, err := st.CreateWebhookEndpoint(r.Context(), t.actor, t.company, in, sealed)
	if err != nil {
		return fmt.Errorf("create webhook endpoint: %w", err)
	}
	w.Header().Set("Location", webhookPath(e))
	return writeJSON(w, http.StatusCreated, jobboard.WebhookSecretReveal{WebhookEndpoint: e, Secret: secret})
}

func webhookPath(e jobboard.WebhookEndpoint) string {
	return "/v1/companies/" + strconv.FormatInt(e.CompanyID, 10) + "/webhooks/" + strconv.FormatInt(e.ID, 10)
}

// webhookList is the JSON of a company's endpoints.
type webhookList struct {
	Items []jobboard.WebhookEndpoint `json:"items"`
}

// listWebhooks lists the company's endpoints, oldest first.
// GET /v1/companies/{id}/webhooks → 200 {items}; 400; 401; 404.
func (s *server) listWebhooks(w http.ResponseWriter, r *http.Request) error {
	t, err := s.webhookRoute(r, false)
	if err != nil {
		return err
	}
	es, err := s.Webhooks.WebhookEndpoints(r.Context(), t.actor, t.company)
	if err != nil {
		return fmt.Errorf("webhook endpoints: %w", err)
	}
	if es == nil {
		es = []jobboard.WebhookEndpoint{}
	}
	return writeJSON(w, http.StatusOK, webhookList{Items: es})
}

// getWebhook returns one endpoint.
// GET /v1/companies/{id}/webhooks/{wid} → 200 endpoint; 400; 401; 404.
func (s *server) getWebhook(w http.ResponseWriter, r *http.Request) error {
	t, err := s.webhookRoute(r, true)
	if err != nil {
		return err
	}
	e, err := s.Webhooks.WebhookEndpoint(r.Context(), t.actor, t.company, t.endpoint)
	if err != nil {
		return fmt.Errorf("webhook endpoint %d: %w", t.endpoint, err)
	}
	return writeJSON(w, http.StatusOK, e)
}

// updateWebhook changes an endpoint's URL, description, event types or
// whether it is enabled. PATCH /v1/companies/{id}/webhooks/{wid} → 200
// endpoint; 400; 401; 404; 422.
func (s *server) updateWebhook(w http.ResponseWriter, r *http.Request, st jobboard.Writes) error {
	t, err := s.webhookRoute(r, true)
	if err != nil {
		return err
	}
	p, err := decodeValid[jobboard.WebhookEndpointPatch](w, r)
	if err != nil {
		return err
	}
	if p.URL != nil {
		if err := s.WebhookURLs.Check(*p.URL); err != nil {
			return err
		}
	}
	e, err := st.UpdateWebhookEndpoint(r.Context(), t.actor, t.company, t.endpoint, p)
	if err != nil {
		return fmt.Errorf("update webhook endpoint %d: %w", t.endpoint, err)
	}
	return writeJSON(w, http.StatusOK, e)
}

// deleteWebhook deletes an endpoint with its delivery log.
// DELETE /v1/companies/{id}/webhooks/{wid} → 204; 400; 401; 404.
func (s *server) deleteWebhook(w http.ResponseWriter, r *http.Request, st jobboard.Writes) error {
	t, err := s.webhookRoute(r, true)
	if err != nil {
		return err
	}
	if err := st.DeleteWebhookEndpoint(r.Context(), t.actor, t.company, t.endpoint); err != nil {
		return fmt.Errorf("delete webhook endpoint %d: %w", t.endpoint, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// secretRotation is the body of POST …/rotate-secret.
type secretRotation struct {
	// OverlapSeconds is how long the replaced secret keeps signing beside
	// the new one; absent: jobboard.DefaultSecretOverlap.
	OverlapSeconds *int64 `json:"overlap_seconds"`
}

// rotateWebhookSecret gives the endpoint a new signing secret, answered
// this once; the old one signs too for the overlap.
// POST /v1/companies/{id}/webhooks/{wid}/rotate-secret → 200 endpoint with
// secret; 400; 401; 404; 422.
func (s *server) rotateWebhookSecret(w http.ResponseWriter, r *http.Request, st jobboard.Writes) error {
	t, err := s.webhookRoute(r, true)
	if err != nil {
		return err
	}
	var in secretRotation
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	overlap := jobboard.DefaultSecretOverlap
	if in.OverlapSeconds != nil {
		if overlap, err = jobboard.ParseSecretOverlap(*in.OverlapSeconds); err != nil {
			return &jobboard.ValidationError{Fields: []jobboard.FieldError{{Field: "overlap_seconds", Detail: err.Error()}}}
		}
	}
	secret := jobboard.NewWebhookSecret()
	sealed, err := s.WebhookSealer.Seal([]byte(secret), jobboard.WebhookSecretContext(t.company))
	if err != nil {
		return fmt.Errorf("seal webhook secret: %w", err)
	}
	e, err := st.RotateWebhookSecret(r.Context(), t.actor, t.company, t.endpoint, sealed, overlap)
	if err != nil {
		return fmt.Errorf("rotate secret of webhook endpoint %d: %w", t.endpoint, err)
	}
	return writeJSON(w, http.StatusOK, jobboard.WebhookSecretReveal{WebhookEndpoint: e, Secret: secret})
}

// webhookDeliveries lists an endpoint's delivery log, newest first.
// GET /v1/companies/{id}/webhooks/{wid}/deliveries?limit&cursor&state → 200
// page; 400; 401; 404.
func (s *server) webhookDeliveries(w http.ResponseWriter, r *http.Request) error {
	t, err := s.webhookRoute(r, true)
	if err != nil {
		return err
	}
	f, err := parseDeliveryQuery(r)
	if err != nil {
		return err
	}
	p, err := s.Webhooks.WebhookDeliveries(r.Context(), t.actor, t.company, t.endpoint, f)
	if err != nil {
		return fmt.Errorf("deliveries of webhook endpoint %d: %w", t.endpoint, err)
	}
	return writeJSON(w, http.StatusOK, newPage(p))
}

// parseDeliveryQuery reads the query of the delivery log. Errors:
// *requestError.
func parseDeliveryQuery(r *http.Request) (jobboard.WebhookDeliveryFilter, error) {
	q := newQuery(r, "limit", "cursor", "state")
	f := jobboard.WebhookDeliveryFilter{Limit: q.limit(), After: q.cursor()}
	if v, ok := q.get("state"); ok {
		if !slices.Contains(jobboard.WebhookDeliveryStates, v) {
			q.fail("state", fmt.Sprintf("must be one of %v", jobboard.WebhookDeliveryStates))
		}
		f.State = v
	}
	return f, q.done()
}

// replayWebhookDelivery sends a delivery again, under the same webhook-id,
// within the dispatch bounds (Config.WebhookDispatches).
// POST /v1/companies/{id}/webhooks/{wid}/deliveries/{did}/replay → 202
// delivery; 400; 401; 404; 409 webhook-endpoint-disabled; 429
// too-many-webhook-dispatches.
func (s *server) replayWebhookDelivery(w http.ResponseWriter, r *http.Request, st jobboard.Writes) error {
	t, err := s.webhookRoute(r, true)
	if err != nil {
		return err
	}
	deliveryID, err := pathID(r, "did")
	if err != nil {
		return err
	}
	d, err := st.ReplayWebhookDelivery(r.Context(), t.actor, t.company, t.endpoint, deliveryID, s.WebhookDispatches)
	if err != nil {
		return fmt.Errorf("replay webhook delivery %d: %w", deliveryID, err)
	}
	return writeJSON(w, http.StatusAccepted, d)
}

// pingWebhook sends the endpoint a webhook.ping event, within the dispatch
// bounds (Config.WebhookDispatches); while a ping of the endpoint is
// pending, the answer is that one.
// POST /v1/companies/{id}/webhooks/{wid}/ping → 202 delivery; 400; 401;
// 404; 409 webhook-endpoint-disabled; 429 too-many-webhook-dispatches.
func (s *server) pingWebhook(w http.ResponseWriter, r *http.Request, st jobboard.Writes) error {
	t, err := s.webhookRoute(r, true)
	if err != nil {
		return err
	}
	d, err := st.PingWebhookEndpoint(r.Context(), t.actor, t.company, t.endpoint, s.WebhookDispatches)
	if err != nil {
		return fmt.Errorf("ping webhook endpoint %d: %w", t.endpoint, err)
	}
	return writeJSON(w, http.StatusAccepted, d)
}

// The answers that carry a signing secret (create, rotate-secret) are kept
// for an Idempotency-Key like any other, but with the secret sealed
// (secretAnswerContext), so that the idempotency store never holds one in
// clear; a replay opens it. The member is swapped in place, byte for byte
// (swapSecret), so that a replay is the answer the first request got.
const secretAnswerContext = "jobboard idempotent answer with a webhook secret"

// sealedSecretMember replaces "secret" in a stored answer.
const sealedSecretMember = "secret_sealed"

// sealSecretAnswer seals the "secret" member of an answer to store.
func (s *server) sealSecretAnswer(body []byte) ([]byte, error) {
	return s.swapSecret(body, "secret", sealedSecretMember, func(v []byte) ([]byte, error) {
		sealed, err := s.WebhookSealer.Seal(v, secretAnswerContext)
		return []byte(base64.StdEncoding.EncodeToString(sealed)), err
	})
}

// openSecretAnswer opens what sealSecretAnswer stored.
func (s *server) openSecretAnswer(body []byte) ([]byte, error) {
	return s.swapSecret(body, sealedSecretMember, "secret", func(v []byte) ([]byte, error) {
		sealed, err := base64.StdEncoding.DecodeString(string(v))
		if err != nil {
			return nil, err
		}
		return s.WebhookSealer.Open(sealed, secretAnswerContext)
	})
}

// swapSecret replaces the string member from of a JSON object by the
// member to, whose value is f of the string, where it stands: the rest of
// the body is left byte for byte, so that what sealSecretAnswer stores,
// opened, is the answer it was given. The member, as the encoder wrote
// it ("from":"value"), must occur once: inside a JSON string every quote
// is escaped, so it cannot occur in another member's value. Errors: a
// body that is not such an object, f's.
func (s *server) swapSecret(body []byte, from, to string, f func([]byte) ([]byte, error)) ([]byte, error) {
	if s.WebhookSealer == nil {
		return nil, errors.New("an answer with a webhook secret, but no sealer")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, fmt.Errorf("answer with a webhook secret: %w", err)
	}
	var v string
	if err := json.Unmarshal(obj[from], &v); err != nil || v == "" {
		return nil, fmt.Errorf("answer with a webhook secret: no %s", from)
	}
	member := func(name string, value string) ([]byte, error) {
		n, err := json.Marshal(name)
		if err != nil {
			return nil, err
		}
		val, err := json.Marshal(value)
		return append(append(n, ':'), val...), err
	}
	old, err := member(from, v)
	if err != nil {
		return nil, err
	}
	if n := bytes.Count(body, old); n != 1 {
		return nil, fmt.Errorf("answer with a webhook secret: %s found %d times as written", from, n)
	}
	out, err := f([]byte(v))
	if err != nil {
		return nil, fmt.Errorf("answer with a webhook secret: %w", err)
	}
	swapped, err := member(to, string(out))
	if err != nil {
		return nil, err
	}
	return bytes.Replace(body, old, swapped, 1), nil
}
