// Package secrettest is a stand-in for AWS Secrets Manager in tests: an
// HTTP server that speaks its wire protocol (AWS JSON 1.1) for
// GetSecretValue, with the AWSCURRENT and AWSPREVIOUS staging labels, so
// that tests run the real SDK client end to end. There is no local
// Secrets Manager among the npm stand-ins.
package secrettest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/jobboard/jobboard/internal/secret"
)

// Server is a Secrets Manager stand-in, closed when the test ends.
type Server struct {
	srv *httptest.Server

	mu       sync.Mutex
	current  map[string]version
	previous map[string]version
	asked    []string
	seq      int
}

type version struct {
	value   string
	id      string
	created time.Time
}

// New starts a Server.
func New(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{current: map[string]version{}, previous: map[string]version{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	tb.Cleanup(s.srv.Close)
	return s
}

// Put makes value the AWSCURRENT version of the secret id, created at
// created, and the version it replaces AWSPREVIOUS: what PutSecretValue
// and the last step of a rotation do.
func (s *Server) Put(id, value string, created time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.current[id]; ok {
		s.previous[id] = old
	}
	s.seq++
	s.current[id] = version{value: value, id: fmt.Sprintf("v%d", s.seq), created: created}
}

// Asked lists the GetSecretValue calls so far, as "id" or "id:STAGE" for a
// stage other than AWSCURRENT.
func (s *Server) Asked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.asked...)
}

// NewClient returns a newClient function (see package secret) for a real
// SDK client that talks to s.
func (s *Server) NewClient() func() (secret.Getter, error) {
	return func() (secret.Getter, error) {
		return secretsmanager.New(secretsmanager.Options{
			Region:       "us-east-1",
			BaseEndpoint: aws.String(s.srv.URL),
			Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
			HTTPClient:   s.srv.Client(),
		}), nil
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" ||
		!strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		http.Error(w, "unexpected request", http.StatusBadRequest)
		return
	}
	var in struct {
		SecretID     string `json:"SecretId"`
		VersionStage string `json:"VersionStage"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	versions, asked := s.current, in.SecretID
	switch in.VersionStage {
	case "", "AWSCURRENT":
	case "AWSPREVIOUS":
		versions, asked = s.previous, asked+":AWSPREVIOUS"
	default:
		versions, asked = nil, asked+":"+in.VersionStage
	}
	s.asked = append(s.asked, asked)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	v, ok := versions[in.SecretID]
	if !ok {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{
			"__type":  "ResourceNotFoundException",
			"message": "Secrets Manager can't find the specified secret value.",
		})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"ARN": in.SecretID, "Name": in.SecretID, "VersionId": v.id, "SecretString": v.value,
		"CreatedDate": float64(v.created.UnixMilli()) / 1000,
	})
}
