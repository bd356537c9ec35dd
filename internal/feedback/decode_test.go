package feedback_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/jobboard/jobboard/internal/feedback"
	"github.com/jobboard/jobboard/internal/jobboard"
)

func readSample(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestDecodeSamples(t *testing.T) {
	for _, tc := range []struct {
		file       string
		kind       jobboard.FeedbackKind
		id         string
		eventID    string
		recipients []string
	}{
		{"bounce-permanent.json", jobboard.FeedbackBounced, "Bounce:0100019b-message-0001:0100019b-bounce-feedback-0001",
			"6f1c2d7e-0000-4000-8000-000000000001", []string{"candidate@example.org"}},
		{"sns-envelope-bounce.json", jobboard.FeedbackBounced, "Bounce:0100019b-message-0001:0100019b-bounce-feedback-0001",
			"6f1c2d7e-0000-4000-8000-000000000001", []string{"candidate@example.org"}},
		{"bounce-transient.json", jobboard.FeedbackSoftBounced, "Bounce:0100019b-message-0002:0100019b-bounce-feedback-0002",
			"6f1c2d7e-0000-4000-8000-000000000002", []string{"full@example.org"}},
		{"complaint.json", jobboard.FeedbackComplained, "Complaint:0100019b-message-0003:0100019b-complaint-feedback-0003",
			"6f1c2d7e-0000-4000-8000-000000000003", []string{"annoyed@example.org"}},
		{"delivery.json", jobboard.FeedbackDelivered, "Delivery:0100019b-message-0004",
			"6f1c2d7e-0000-4000-8000-000000000004", []string{"happy@example.org"}},
		{"send.json", jobboard.FeedbackSent, "Send:0100019b-message-0005",
			"6f1c2d7e-0000-4000-8000-000000000005", []string{"happy@example.org"}},
		{"open-ignored.json", jobboard.FeedbackIgnored, "Open:0100019b-message-0006", "", nil},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := feedback.Decode(readSample(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if f.Kind != tc.kind || f.ID != tc.id || f.EventID != tc.eventID || !slices.Equal(f.Recipients, tc.recipients) {
				t.Errorf("Decode = %+v\nwant kind %s, id %s, event %s, recipients %v", f, tc.kind, tc.id, tc.eventID, tc.recipients)
			}
			if f.At.IsZero() {
				t.Error("no time")
			}
		})
	}
}

func TestDecodeRefusesMalformed(t *testing.T) {
	for name, body := range map[string]string{
		"not json":              `{`,
		"no type":               `{"mail":{"messageId":"m"}}`,
		"no message id":         `{"eventType":"Delivery","mail":{},"delivery":{"recipients":["a@example.org"]}}`,
		"bounce without bounce": `{"eventType":"Bounce","mail":{"messageId":"m"}}`,
		"bounce, no recipients": `{"eventType":"Bounce","mail":{"messageId":"m"},"bounce":{"bounceType":"Permanent","bouncedRecipients":[]}}`,
		"complaint, not an address": `{"eventType":"Complaint","mail":{"messageId":"m"},` +
			`"complaint":{"complainedRecipients":[{"emailAddress":"nobody"}]}}`,
		"envelope of garbage": `{"Type":"Notification","Message":"nope"}`,
	} {
		t.Run(name, func(t *testing.T) {
			if f, err := feedback.Decode([]byte(body)); !errors.Is(err, feedback.ErrMalformed) {
				t.Errorf("Decode = %+v, %v; want ErrMalformed", f, err)
			}
		})
	}
}

// FuzzDecodeFeedback: a feedback queue message is an SES event that names
// its email and, when it acts, its recipients as addresses; or malformed
// (it goes to the DLQ); never a panic. The seed corpus is testdata/*.json,
// SES's documented record shapes.
func FuzzDecodeFeedback(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed corpus: %v", err)
	}
	for _, name := range files {
		f.Add(readSample(f, filepath.Base(name)))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fb, err := feedback.Decode(body)
		if err != nil {
			if !errors.Is(err, feedback.ErrMalformed) {
				t.Fatalf("Decode: %v, not ErrMalformed", err)
			}
			return
		}
		if fb.ID == "" || fb.MessageID == "" {
			t.Fatalf("decoded without its keys: %+v", fb)
		}
		switch fb.Kind {
		case jobboard.FeedbackBounced, jobboard.FeedbackSoftBounced, jobboard.FeedbackComplained:
			if len(fb.Recipients) == 0 {
				t.Fatalf("%s without recipients", fb.Kind)
			}
		case jobboard.FeedbackSent, jobboard.FeedbackDelivered, jobboard.FeedbackIgnored:
		default:
			t.Fatalf("unknown kind %q", fb.Kind)
		}
		for _, r := range fb.Recipients {
			if r != jobboard.NormalizeEmail(r) || len(r) > 320 {
				t.Fatalf("recipient %q not normalised", r)
			}
		}
	})
}
