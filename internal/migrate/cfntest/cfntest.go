// Package cfntest stands in for CloudFormation's side of a custom resource
// request in tests: it makes the request as CloudFormation sends it, and
// serves its ResponseURL, the pre-signed S3 URL that receives the answer,
// recording every request to it. There is no local S3 among the stand-ins,
// and the answer is a plain PUT.
package cfntest

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/cfn"
)

// The request's fixed parts.
const (
	StackID           = "arn:aws:cloudformation:us-east-1:123456789012:stack/jobboard/2f1c8d50-b1a4-11f0-9c2e-0a1b2c3d4e5f"
	RequestID         = "5d478078-13e9-baf0-464a-7ef285ecc786"
	LogicalResourceID = "SchemaMigration"
	// ServiceToken is the migration function's alias, as the template
	// gives it.
	ServiceToken = "arn:aws:lambda:us-east-1:123456789012:function:jobboard-MigrateFunction-AbC:live"
)

// MaxAnswerBytes is the longest answer CloudFormation reads
// (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-responses.html).
const MaxAnswerBytes = 4096

// presignedPath is a pre-signed URL's path and query as CloudFormation
// makes them: the stack, the logical id and the request id, escaped, and
// the signature in the query. Any change to it on the way (a re-escaped
// path, a dropped query) invalidates the signature.
const presignedPath = "/arn%3Aaws%3Acloudformation%3Aus-east-1%3A123456789012%3Astack/jobboard/2f1c8d50%7CSchemaMigration%7C5d478078" +
	"?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20261203T120000Z&X-Amz-Expires=7200&X-Amz-SignedHeaders=host&X-Amz-Signature=0a1b2c"

// Server is the ResponseURL stand-in, closed when the test ends. It
// answers 200, as S3 does to a PUT, unless told otherwise.
type Server struct {
	srv *httptest.Server

	mu      sync.Mutex
	answers []Answer
	status  int
}

// Answer is one request the URL got, and its body read as CloudFormation
// reads it.
type Answer struct {
	Method, RequestURI, ContentType string
	Body                            []byte
	Response                        cfn.Response
}

// New starts a Server.
func New(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{status: http.StatusOK}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		a := Answer{Method: r.Method, RequestURI: r.RequestURI, ContentType: r.Header.Get("Content-Type"), Body: body}
		if err != nil || json.Unmarshal(body, &a.Response) != nil {
			tb.Errorf("answer %q (%v): not JSON", body, err)
		}
		s.mu.Lock()
		s.answers = append(s.answers, a)
		status := s.status
		s.mu.Unlock()
		w.WriteHeader(status)
	}))
	tb.Cleanup(s.srv.Close)
	return s
}

// SetStatus makes the server answer status from now on (403: an expired
// URL).
func (s *Server) SetStatus(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = status
}

// Answers returns what the server got, in order.
func (s *Server) Answers() []Answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Answer(nil), s.answers...)
}

// Request is a custom resource request of requestType for SchemaMigration
// as CloudFormation sends it, answered at this server; physicalID is the
// resource's (empty for a Create).
func (s *Server) Request(tb testing.TB, requestType, physicalID string) []byte {
	tb.Helper()
	return marshal(tb, s.event(requestType, physicalID))
}

// Update is an Update request for SchemaMigration as Request makes it,
// whose properties change from old to props (each on top of Request's).
func (s *Server) Update(tb testing.TB, physicalID string, old, props map[string]any) []byte {
	tb.Helper()
	ev := s.event(string(cfn.RequestUpdate), physicalID)
	maps.Copy(ev.OldResourceProperties, old)
	maps.Copy(ev.ResourceProperties, props)
	return marshal(tb, ev)
}

func marshal(tb testing.TB, ev cfn.Event) []byte {
	tb.Helper()
	b, err := json.Marshal(ev)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func (s *Server) event(requestType, physicalID string) cfn.Event {
	ev := cfn.Event{
		RequestType:        cfn.RequestType(requestType),
		RequestID:          RequestID,
		ResponseURL:        s.srv.URL + presignedPath,
		ResourceType:       "Custom::SchemaMigration",
		PhysicalResourceID: physicalID,
		LogicalResourceID:  LogicalResourceID,
		StackID:            StackID,
		ResourceProperties: map[string]any{
			"ServiceToken":           ServiceToken,
			"ServiceTimeout":         "900",
			"MigrateFunctionVersion": "4",
			"DatabaseSecretArn":      "arn:aws:secretsmanager:us-east-1:123456789012:secret:jobboard-db-AbCdEf",
		},
	}
	if requestType == string(cfn.RequestUpdate) {
		ev.OldResourceProperties = map[string]any{"ServiceToken": ServiceToken, "MigrateFunctionVersion": "3",
			"DatabaseSecretArn": ev.ResourceProperties["DatabaseSecretArn"]}
	}
	return ev
}

// Only returns the one answer the server got, failing tb unless there was
// exactly one, and unless it is what CloudFormation can read: a PUT to the
// URL as given, without a content type (the URL is signed without one, and
// S3 refuses a PUT that sends one), of at most MaxAnswerBytes, for the
// request.
func (s *Server) Only(tb testing.TB) Answer {
	tb.Helper()
	answers := s.Answers()
	if len(answers) != 1 {
		tb.Fatalf("the ResponseURL got %d requests; want 1: %+v", len(answers), answers)
	}
	a := answers[0]
	r := a.Response
	if a.Method != http.MethodPut || a.RequestURI != presignedPath || a.ContentType != "" || len(a.Body) > MaxAnswerBytes ||
		r.RequestID != RequestID || r.LogicalResourceID != LogicalResourceID || r.StackID != StackID || r.PhysicalResourceID == "" {
		tb.Errorf("answer %s %s (Content-Type %q, %d bytes): %s; want a PUT to %s without a content type, at most %d bytes, for request %s with a physical id",
			a.Method, a.RequestURI, a.ContentType, len(a.Body), a.Body, presignedPath, MaxAnswerBytes, RequestID)
	}
	return a
}
