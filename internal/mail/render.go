package mail

import (
	"embed"
	"fmt"
	htmltemplate "html/template"
	"net/url"
	"strings"
	"sync"
	texttemplate "text/template"
	"unicode"

	"github.com/jobboard/jobboard/internal/jobboard"
)

//go:embed templates
var templateFS embed.FS

// genericTemplate is the file name (without extension) of the templates for
// a status that has none of its own.
const genericTemplate = "status"

// templateSet is the parsed pair for one status.
type templateSet struct {
	text *texttemplate.Template // defines "subject" and "text"
	html *htmltemplate.Template // defines "html"
}

// templates parses every template once, on first use.
var templates = sync.OnceValues(func() (map[string]templateSet, error) {
	names := []string{genericTemplate}
	for _, s := range jobboard.ApplicationStatuses {
		if _, err := templateFS.Open("templates/" + string(s) + ".txt"); err == nil {
			names = append(names, string(s))
		}
	}
	sets := make(map[string]templateSet, len(names))
	for _, name := range names {
		text, err := texttemplate.New(name).Option("missingkey=error").
			ParseFS(templateFS, "templates/layout.txt", "templates/"+name+".txt")
		if err != nil {
			return nil, fmt.Errorf("parse text templates %s: %w", name, err)
		}
		html, err := htmltemplate.New(name).Option("missingkey=error").
			ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("parse html templates %s: %w", name, err)
		}
		sets[name] = templateSet{text: text, html: html}
	}
	return sets, nil
})

// emailData is what the templates see. Every string is already cleaned of
// control characters.
type emailData struct {
	CandidateName string
	JobTitle      string
	CompanyName   string
	OldStatus     string
	NewStatus     string
	ApplicationID int64
	Subject       string // set after the subject is rendered
}

// Render returns the subject, plain-text body and HTML body of a status
// email. Names are cleaned first: control characters (CR and LF included)
// become spaces and runs of white space collapse, so no header can be forged
// through a name; the HTML body escapes them. A status without a template of
// its own gets the generic one. Errors: a template failed to parse or run
// (a bug in the embedded templates, caught by the tests).
func Render(e jobboard.StatusEmail) (subject, text, html string, err error) {
	sets, err := templates()
	if err != nil {
		return "", "", "", fmt.Errorf("render email for event %s: %w", e.EventID, err)
	}
	set, ok := sets[string(e.NewStatus)]
	if !ok {
		set = sets[genericTemplate]
	}
	data := emailData{
		CandidateName: cleanLine(e.CandidateName),
		JobTitle:      cleanLine(e.JobTitle),
		CompanyName:   cleanLine(e.CompanyName),
		OldStatus:     cleanLine(string(e.OldStatus)),
		NewStatus:     cleanLine(string(e.NewStatus)),
		ApplicationID: e.ApplicationID,
	}
	var b strings.Builder
	b.Grow(1024)
	if err := set.text.ExecuteTemplate(&b, "subject", data); err != nil {
		return "", "", "", fmt.Errorf("render subject for event %s: %w", e.EventID, err)
	}
	// The templates put the names on one line; clean again in case a
	// template edit ever adds a line break to the subject.
	subject = cleanLine(b.String())
	data.Subject = subject

	b.Reset()
	if err := set.text.ExecuteTemplate(&b, "text", data); err != nil {
		return "", "", "", fmt.Errorf("render text for event %s: %w", e.EventID, err)
	}
	text = b.String()

	b.Reset()
	if err := set.html.ExecuteTemplate(&b, "html", data); err != nil {
		return "", "", "", fmt.Errorf("render html for event %s: %w", e.EventID, err)
	}
	return subject, text, b.String(), nil
}

// cleanLine returns s on one line: control and format characters (CR, LF,
// tab, NUL, bidi overrides, line and paragraph separators) become spaces,
// runs of white space collapse to one, and the ends are trimmed.
func cleanLine(s string) string {
	if s == "" {
		return s
	}
	if !strings.ContainsFunc(s, func(r rune) bool { return r != ' ' && isSeparator(r) }) &&
		!strings.Contains(s, "  ") && s[0] != ' ' && s[len(s)-1] != ' ' {
		return s // the common case: nothing to do, no allocation
	}
	return strings.Join(strings.FieldsFunc(s, isSeparator), " ")
}

// isSeparator reports whether cleanLine turns r into a space.
func isSeparator(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.IsSpace(r)
}

// verificationTemplateName is the file name (without extension) of the
// verification email's templates. They stand alone: the status layout
// greets the candidate by name, and this email carries no text that any
// user wrote.
const verificationTemplateName = "verification"

// verificationTemplates parses the verification email's templates once.
var verificationTemplates = sync.OnceValues(func() (templateSet, error) {
	text, err := texttemplate.New(verificationTemplateName).Option("missingkey=error").
		ParseFS(templateFS, "templates/"+verificationTemplateName+".txt")
	if err != nil {
		return templateSet{}, fmt.Errorf("parse text templates %s: %w", verificationTemplateName, err)
	}
	html, err := htmltemplate.New(verificationTemplateName).Option("missingkey=error").
		ParseFS(templateFS, "templates/"+verificationTemplateName+".html")
	if err != nil {
		return templateSet{}, fmt.Errorf("parse html templates %s: %w", verificationTemplateName, err)
	}
	return templateSet{text: text, html: html}, nil
})

// verificationData is what the verification templates see: the link and
// how long it works, nothing else.
type verificationData struct {
	Link    string
	Hours   int
	Subject string
}

// RenderVerification returns the subject, plain-text body and HTML body of
// the email with the link that verifies an address. The link is the only
// variable part. Errors: the link is not an absolute http(s) URL on one
// line; a template failed to parse or run.
func RenderVerification(e jobboard.VerificationEmail) (subject, text, html string, err error) {
	if err := checkLink(e.Link); err != nil {
		return "", "", "", fmt.Errorf("render verification email for event %s: %w", e.EventID, err)
	}
	set, err := verificationTemplates()
	if err != nil {
		return "", "", "", fmt.Errorf("render verification email for event %s: %w", e.EventID, err)
	}
	data := verificationData{Link: e.Link, Hours: int(jobboard.VerificationTokenTTL.Hours())}
	var b strings.Builder
	b.Grow(1024)
	if err := set.text.ExecuteTemplate(&b, "subject", data); err != nil {
		return "", "", "", fmt.Errorf("render subject for event %s: %w", e.EventID, err)
	}
	subject = cleanLine(b.String())
	data.Subject = subject
	b.Reset()
	if err := set.text.ExecuteTemplate(&b, "text", data); err != nil {
		return "", "", "", fmt.Errorf("render text for event %s: %w", e.EventID, err)
	}
	text = b.String()
	b.Reset()
	if err := set.html.ExecuteTemplate(&b, "html", data); err != nil {
		return "", "", "", fmt.Errorf("render html for event %s: %w", e.EventID, err)
	}
	return subject, text, b.String(), nil
}

// checkLink accepts an absolute http or https URL without white space or
// control characters, so that it stays one clickable line in the text body.
func checkLink(link string) error {
	if strings.ContainsFunc(link, isSeparator) {
		return fmt.Errorf("link %q contains white space or control characters", link)
	}
	u, err := url.Parse(link)
	if err != nil {
		return fmt.Errorf("link: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("link %q is not an absolute http(s) URL", link)
	}
	return nil
}
