package mail_test

import (
	"strings"
	"testing"
	"unicode"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/mail"
)

func sampleEmail(status jobboard.ApplicationStatus) jobboard.StatusEmail {
	return jobboard.StatusEmail{
		EventID:       "6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f",
		To:            "ada@example.com",
		CandidateName: "Ada Lovelace",
		JobTitle:      "Analytical Engineer",
		CompanyName:   "Babbage & Co",
		ApplicationID: 42,
		OldStatus:     jobboard.StatusSubmitted,
		NewStatus:     status,
	}
}

func TestRenderEveryStatus(t *testing.T) {
	t.Parallel()
	statuses := append([]jobboard.ApplicationStatus{"on_hold"}, jobboard.ApplicationStatuses...)
	subjects := map[string]jobboard.ApplicationStatus{}
	for _, status := range statuses {
		t.Run(string(status), func(t *testing.T) {
			e := sampleEmail(status)
			subject, text, html, err := mail.Render(e)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			for part, s := range map[string]string{"subject": subject, "text": text} {
				for _, want := range []string{e.JobTitle, e.CompanyName} {
					if !strings.Contains(s, want) {
						t.Errorf("%s %q does not name %q", part, s, want)
					}
				}
			}
			for _, want := range []string{"Hello Ada Lovelace,", "Status: " + string(status), "Application #42"} {
				if !strings.Contains(text, want) {
					t.Errorf("text does not contain %q:\n%s", want, text)
				}
			}
			for _, want := range []string{"Hello Ada Lovelace,", "Analytical Engineer", "Babbage &amp; Co", "<strong>" + string(status) + "</strong>", "<title>"} {
				if !strings.Contains(html, want) {
					t.Errorf("html does not contain %q:\n%s", want, html)
				}
			}
			if strings.Contains(html, "Babbage & Co") {
				t.Error("html has an unescaped ampersand")
			}
			if strings.Contains(html, "<no value>") || strings.Contains(text, "<no value>") {
				t.Error("a template refers to a missing value")
			}
		})
		subject, _, _, _ := mail.Render(sampleEmail(status))
		subjects[subject] = status
	}
	// Each status with a template of its own says something different.
	if len(subjects) != len(statuses) {
		t.Errorf("%d distinct subjects for %d statuses: %v", len(subjects), len(statuses), subjects)
	}
}

func TestRenderSubjectsSayWhatHappened(t *testing.T) {
	t.Parallel()
	for status, word := range map[jobboard.ApplicationStatus]string{
		jobboard.StatusReviewing: "reviewing",
		jobboard.StatusInterview: "Interview",
		jobboard.StatusOffer:     "offer",
		jobboard.StatusHired:     "Welcome",
		jobboard.StatusWithdrawn: "withdrew",
		"on_hold":                "on_hold",
	} {
		subject, _, _, err := mail.Render(sampleEmail(status))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(subject, word) {
			t.Errorf("%s: subject %q does not contain %q", status, subject, word)
		}
	}
}

func TestRenderEscapesHTMLOnlyInHTML(t *testing.T) {
	t.Parallel()
	e := sampleEmail(jobboard.StatusInterview)
	e.CompanyName = `<script>alert("x")</script>`
	e.CandidateName = `<b>Eve</b>`
	subject, text, html, err := mail.Render(e)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(html, "<script>") || strings.Contains(html, "<b>Eve") {
		t.Errorf("html contains raw markup from a name:\n%s", html)
	}
	if !strings.Contains(html, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") || !strings.Contains(html, "&lt;b&gt;Eve&lt;/b&gt;") {
		t.Errorf("html does not show the names escaped:\n%s", html)
	}
	if !strings.Contains(text, e.CompanyName) || !strings.Contains(text, e.CandidateName) || !strings.Contains(subject, e.CompanyName) {
		t.Errorf("text or subject does not show the names as written:\n%s\n%s", subject, text)
	}
}

func TestRenderKeepsNamesOnOneLine(t *testing.T) {
	t.Parallel()
	e := sampleEmail(jobboard.StatusOffer)
	e.JobTitle = "Engineer\r\nBcc: victim@example.com"
	e.CompanyName = "Acme\x00\u2028Inc\t\x1b[31m"
	e.CandidateName = "Mallory\nX-Header: 1"
	subject, text, html, err := mail.Render(e)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsFunc(subject, func(r rune) bool { return unicode.IsControl(r) || r == '\u2028' }) {
		t.Errorf("subject contains a control character: %q", subject)
	}
	if want := "Engineer Bcc: victim@example.com"; !strings.Contains(subject, want) {
		t.Errorf("subject %q does not contain the cleaned title %q", subject, want)
	}
	if want := "Acme Inc [31m"; !strings.Contains(subject, want) {
		t.Errorf("subject %q does not contain the cleaned company %q", subject, want)
	}
	for _, bad := range []string{"\r", "\nBcc:", "\nX-Header", "\x00", "\x1b"} {
		if strings.Contains(text, bad) || strings.Contains(html, bad) {
			t.Errorf("body keeps %q from a name", bad)
		}
	}
}

func TestRenderWithoutCandidateName(t *testing.T) {
	t.Parallel()
	e := sampleEmail(jobboard.StatusRejected)
	e.CandidateName = " \n "
	_, text, html, err := mail.Render(e)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(text, "Hello,\n") || !strings.Contains(html, "<p>Hello,</p>") {
		t.Errorf("greeting without a name is wrong:\n%s\n%s", text, html)
	}
}

// BenchmarkRender is the cost of rendering one email (subject, text and
// HTML), against a baseline that builds similar strings by concatenation.
func BenchmarkRender(b *testing.B) {
	e := sampleEmail(jobboard.StatusInterview)
	b.Run("templates", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, _, err := mail.Render(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline-concat", func(b *testing.B) {
		b.ReportAllocs()
		var sink int
		for b.Loop() {
			subject := "Interview: " + e.JobTitle + " at " + e.CompanyName
			text := "Hello " + e.CandidateName + ",\n\n" + e.CompanyName + " would like to interview you for " + e.JobTitle + ".\n"
			html := "<!DOCTYPE html><html><body><p>Hello " + e.CandidateName + ",</p><p><strong>" + e.CompanyName + "</strong> would like to interview you for <strong>" + e.JobTitle + "</strong>.</p></body></html>"
			sink += len(subject) + len(text) + len(html)
		}
		_ = sink
	})
}

// The verification email: the link is its one variable part, in both
// bodies (escaped in the HTML), and a link that is not an absolute http(s)
// URL on one line is refused.
func TestRenderVerification(t *testing.T) {
	t.Parallel()
	e := jobboard.VerificationEmail{EventID: "ev-1", To: "ada@example.com",
		Link: "https://app.example/verify-email?lang=en&token=abc_DEF-123"}
	subject, text, html, err := mail.RenderVerification(e)
	if err != nil {
		t.Fatal(err)
	}
	if subject != "Confirm your email address for jobboard" {
		t.Errorf("subject %q", subject)
	}
	if !strings.Contains(text, "\n"+e.Link+"\n") || !strings.Contains(text, "within 24 hours") {
		t.Errorf("text does not carry the link on a line of its own, or the 24 hours:\n%s", text)
	}
	if !strings.Contains(html, `href="https://app.example/verify-email?lang=en&amp;token=abc_DEF-123"`) {
		t.Errorf("html does not link to %s:\n%s", e.Link, html)
	}
	// Nothing else varies: another link, the same text around it.
	other := e
	other.Link, other.To = "https://app.example/verify-email?lang=en&token=zzz", "someone@else.example"
	_, text2, _, err := mail.RenderVerification(other)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ReplaceAll(text2, other.Link, e.Link) != text || strings.Contains(text, e.To) {
		t.Errorf("the text varies with more than the link:\n%s\n---\n%s", text, text2)
	}
	for _, bad := range []string{"", "/verify?token=x", "javascript:alert(1)", "https://app.example/v?token=a\nSubject: x", "https://app.example/v token"} {
		if _, _, _, err := mail.RenderVerification(jobboard.VerificationEmail{EventID: "ev-2", Link: bad}); err == nil {
			t.Errorf("link %q accepted", bad)
		}
	}
}

// The password reset email: the link is its one variable part, in both
// bodies (escaped in the HTML); it says how long the link works; a link
// that is not an absolute http(s) URL on one line is refused.
func TestRenderPasswordReset(t *testing.T) {
	t.Parallel()
	e := jobboard.PasswordResetEmail{EventID: "ev-1", To: "ada@example.com",
		Link: "https://app.example/reset-password?lang=en&token=abc_DEF-123"}
	subject, text, html, err := mail.RenderPasswordReset(e)
	if err != nil {
		t.Fatal(err)
	}
	if subject != "Reset your jobboard password" {
		t.Errorf("subject %q", subject)
	}
	if !strings.Contains(text, "\n"+e.Link+"\n") || !strings.Contains(text, "60 minutes") {
		t.Errorf("text does not carry the link on a line of its own, or the 60 minutes:\n%s", text)
	}
	if !strings.Contains(html, `href="https://app.example/reset-password?lang=en&amp;token=abc_DEF-123"`) ||
		!strings.Contains(html, "<title>Reset your jobboard password</title>") {
		t.Errorf("html does not link to %s, or has not the subject as its title:\n%s", e.Link, html)
	}
	other := e
	other.Link, other.To = "https://app.example/reset-password?lang=en&token=zzz", "someone@else.example"
	_, text2, _, err := mail.RenderPasswordReset(other)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ReplaceAll(text2, other.Link, e.Link) != text || strings.Contains(text, e.To) {
		t.Errorf("the text varies with more than the link:\n%s\n---\n%s", text, text2)
	}
	for _, bad := range []string{"", "/reset?token=x", "javascript:alert(1)", "https://app.example/r?token=a\nSubject: x", "https://app.example/r token"} {
		if _, _, _, err := mail.RenderPasswordReset(jobboard.PasswordResetEmail{EventID: "ev-2", Link: bad}); err == nil {
			t.Errorf("link %q accepted", bad)
		}
	}
}
