package mail

import (
	"embed"
	"errors"
	"fmt"
	"html"
	"io/fs"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// The templates are plain text with {{.Field}} placeholders and nothing
// else: no conditions, loops or calls. text/template and html/template
// would do, but they call methods by name through reflection, and a binary
// that can do that keeps every exported method of every type it links
// (the linker cannot tell which are dead): about 4.8 MB of the worker's
// 17 MB, most of it SDK methods nobody calls. Placeholders need none of
// that, and keep the templates easy to read and to check.
//
// templates/<status>.txt holds the subject on its first line, a blank
// line, then the message; templates/<status>.html the message as HTML;
// layout.txt and layout.html wrap a message into the whole body.

//go:embed templates
var templateFS embed.FS

// genericTemplate is the file name (without extension) of the templates for
// a status that has none of its own.
const genericTemplate = "status"

// The placeholders a status template may use, and those a layout may use
// on top of them.
var (
	statusFields = []string{"CandidateName", "JobTitle", "CompanyName", "OldStatus", "NewStatus", "ApplicationID"}
	layoutFields = append([]string{"Subject", "Greeting", "Message"}, statusFields...)
)

// templateSet is the parsed templates of one status.
type templateSet struct {
	subject, text, html template
}

// layouts are the parsed layouts, text and HTML.
type layouts struct {
	text, html template
}

// templates parses every template once, on first use.
var templates = sync.OnceValues(func() (map[string]templateSet, error) {
	sets := map[string]templateSet{}
	for _, name := range append([]string{genericTemplate}, statusNames()...) {
		txt, err := templateFS.ReadFile("templates/" + name + ".txt")
		if errors.Is(err, fs.ErrNotExist) && name != genericTemplate {
			continue
		}
		if err != nil {
			return nil, err
		}
		set, err := parseTemplateSet(name, txt, statusFields)
		if err != nil {
			return nil, err
		}
		sets[name] = set
	}
	return sets, nil
})

// renderWith renders the set with values: the subject on one line (added
// to values as Subject), the text, and the HTML with the values escaped.
func (set templateSet) renderWith(values map[string]string) (subject, text, markup string) {
	var b strings.Builder
	b.Grow(1024)
	set.subject.render(&b, values)
	subject = cleanLine(b.String())
	values["Subject"] = subject
	b.Reset()
	set.text.render(&b, values)
	text = b.String()
	b.Reset()
	set.html.render(&b, escapeAll(values))
	return subject, text, b.String()
}

// escapeAll returns values escaped for HTML text and attribute values.
func escapeAll(values map[string]string) map[string]string {
	escaped := make(map[string]string, len(values))
	for k, v := range values {
		escaped[k] = html.EscapeString(v)
	}
	return escaped
}

// parseTemplateSet parses the templates of one email: txt is
// templates/<name>.txt (the subject on its first line, a blank line, the
// message); templates/<name>.html is read here. Placeholders are those of
// fields; attrFields may also be the whole value of an HTML attribute.
// Errors: a file is missing or does not parse.
func parseTemplateSet(name string, txt []byte, fields []string, attrFields ...string) (templateSet, error) {
	var set templateSet
	subject, message, ok := strings.Cut(string(txt), "\n\n")
	if !ok || strings.Contains(subject, "\n") {
		return set, fmt.Errorf("templates/%s.txt: want the subject on the first line, then a blank line, then the message", name)
	}
	var err error
	if set.subject, err = parseTemplate(name+".txt", subject, fields, false); err != nil {
		return set, err
	}
	if set.text, err = parseTemplate(name+".txt", strings.TrimSuffix(message, "\n"), fields, false); err != nil {
		return set, err
	}
	markup, err := templateFS.ReadFile("templates/" + name + ".html")
	if err != nil {
		return set, err
	}
	set.html, err = parseTemplate(name+".html", strings.TrimSuffix(string(markup), "\n"), fields, true, attrFields...)
	return set, err
}

// layout parses the layouts once, on first use.
var layout = sync.OnceValues(func() (layouts, error) {
	var l layouts
	for _, f := range []struct {
		name string
		dst  *template
		html bool
	}{{"layout.txt", &l.text, false}, {"layout.html", &l.html, true}} {
		src, err := templateFS.ReadFile("templates/" + f.name)
		if err != nil {
			return l, err
		}
		if *f.dst, err = parseTemplate(f.name, string(src), layoutFields, f.html); err != nil {
			return l, err
		}
	}
	return l, nil
})

func statusNames() []string {
	names := make([]string, len(jobboard.ApplicationStatuses))
	for i, s := range jobboard.ApplicationStatuses {
		names[i] = string(s)
	}
	return names
}

// template is a parsed template: literal text and placeholders, in turn.
type template struct {
	parts []part
}

// part is literal text, or (field set) a placeholder.
type part struct {
	literal string
	field   string
}

// parseTemplate splits src into literal text and {{.Field}} placeholders.
// Errors: an action that is not a placeholder of one of fields, an
// unclosed {{, or, in HTML, a placeholder inside a tag (where escaping
// text would not be enough: names go only into text and the title) unless
// it is one of attrFields and the whole value of a double-quoted attribute
// (a link checked before it is rendered, then escaped).
func parseTemplate(name, src string, fields []string, isHTML bool, attrFields ...string) (template, error) {
	var t template
	rest := src
	for {
		before, after, found := strings.Cut(rest, "{{")
		if before != "" {
			t.parts = append(t.parts, part{literal: before})
		}
		if !found {
			return t, nil
		}
		action, tail, closed := strings.Cut(after, "}}")
		if !closed {
			return t, fmt.Errorf("templates/%s: {{ without }}", name)
		}
		field, isField := strings.CutPrefix(strings.TrimSpace(action), ".")
		if !isField || !slices.Contains(fields, field) {
			return t, fmt.Errorf("templates/%s: {{%s}}: want one of the placeholders %v", name, action, fields)
		}
		prefix := src[:len(src)-len(rest)+len(before)]
		wholeAttribute := slices.Contains(attrFields, field) && strings.HasSuffix(prefix, `="`) && strings.HasPrefix(tail, `"`)
		if isHTML && insideTag(prefix) && !wholeAttribute {
			return t, fmt.Errorf("templates/%s: {{%s}} is inside a tag; placeholders go in text only", name, action)
		}
		t.parts = append(t.parts, part{field: field})
		rest = tail
	}
}

// insideTag reports whether HTML that ends with prefix is inside a tag.
func insideTag(prefix string) bool {
	return strings.LastIndexByte(prefix, '<') > strings.LastIndexByte(prefix, '>')
}

// render writes t with each placeholder replaced by values[field].
func (t template) render(b *strings.Builder, values map[string]string) {
	for _, p := range t.parts {
		if p.field == "" {
			b.WriteString(p.literal)
		} else {
			b.WriteString(values[p.field])
		}
	}
}

// Render returns the subject, plain-text body and HTML body of a status
// email. Names are cleaned first: control characters (CR and LF included)
// become spaces and runs of white space collapse, so no header can be forged
// through a name; the HTML body escapes them. A status without a template of
// its own gets the generic one. Errors: a template failed to parse (a bug
// in the embedded templates, caught by the tests).
func Render(e jobboard.StatusEmail) (subject, text, htmlBody string, err error) {
	sets, err := templates()
	if err != nil {
		return "", "", "", fmt.Errorf("render email for event %s: %w", e.EventID, err)
	}
	lay, err := layout()
	if err != nil {
		return "", "", "", fmt.Errorf("render email for event %s: %w", e.EventID, err)
	}
	set, ok := sets[string(e.NewStatus)]
	if !ok {
		set = sets[genericTemplate]
	}
	values := map[string]string{
		"CandidateName": cleanLine(e.CandidateName),
		"JobTitle":      cleanLine(e.JobTitle),
		"CompanyName":   cleanLine(e.CompanyName),
		"OldStatus":     cleanLine(string(e.OldStatus)),
		"NewStatus":     cleanLine(string(e.NewStatus)),
		"ApplicationID": strconv.FormatInt(e.ApplicationID, 10),
	}
	values["Greeting"] = "Hello,"
	if values["CandidateName"] != "" {
		values["Greeting"] = "Hello " + values["CandidateName"] + ","
	}
	// The templates put the names on one line; renderWith cleans the
	// subject again in case a template edit ever adds a line break to it.
	subject, message, htmlMessage := set.renderWith(values)
	values["Message"] = message
	var b strings.Builder
	b.Grow(2048)
	lay.text.render(&b, values)
	text = b.String()
	// The same values, escaped for HTML; the message is HTML already.
	escaped := escapeAll(values)
	escaped["Message"] = htmlMessage
	b.Reset()
	lay.html.render(&b, escaped)
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

// The emails with a link (address verification, password reset) stand
// alone: the status layout greets the candidate by name, and these carry
// no text that any user wrote. Their templates are <name>.txt (the
// subject, a blank line, the message) and <name>.html (the whole HTML
// body; the link may be an href).

// verificationTemplates parses the verification email's templates once.
// Their placeholders are the link and how long it works, nothing a user
// wrote.
var verificationTemplates = linkTemplates("verification", "Hours")

// resetTemplates parses the password reset email's templates once.
var resetTemplates = linkTemplates("password_reset", "Minutes")

// linkTemplates returns a parser, run once, of the templates name.txt and
// name.html, whose placeholders are Link, Subject and the others given.
func linkTemplates(name string, fields ...string) func() (templateSet, error) {
	return sync.OnceValues(func() (templateSet, error) {
		txt, err := templateFS.ReadFile("templates/" + name + ".txt")
		if err != nil {
			return templateSet{}, err
		}
		return parseTemplateSet(name, txt, append([]string{"Link", "Subject"}, fields...), "Link")
	})
}

// renderLink renders the templates of an email whose one variable part is
// link (values holds the other placeholders, fixed texts). Errors: the
// link is not an absolute http(s) URL on one line; a template failed to
// parse.
func renderLink(templates func() (templateSet, error), link string, values map[string]string) (subject, text, htmlBody string, err error) {
	if err := checkLink(link); err != nil {
		return "", "", "", err
	}
	set, err := templates()
	if err != nil {
		return "", "", "", err
	}
	values["Link"] = link
	subject, text, htmlBody = set.renderWith(values)
	return subject, text, htmlBody, nil
}

// RenderVerification returns the subject, plain-text body and HTML body of
// the email with the link that verifies an address. The link is the only
// variable part. Errors: the link is not an absolute http(s) URL on one
// line; a template failed to parse.
func RenderVerification(e jobboard.VerificationEmail) (subject, text, htmlBody string, err error) {
	subject, text, htmlBody, err = renderLink(verificationTemplates, e.Link,
		map[string]string{"Hours": strconv.Itoa(int(jobboard.VerificationTokenTTL.Hours()))})
	if err != nil {
		return "", "", "", fmt.Errorf("render verification email for event %s: %w", e.EventID, err)
	}
	return subject, text, htmlBody, nil
}

// RenderPasswordReset returns the subject, plain-text body and HTML body of
// the email with the link that resets a password. The link is the only
// variable part: not the account's name, nothing any user wrote. Errors:
// as RenderVerification's.
func RenderPasswordReset(e jobboard.PasswordResetEmail) (subject, text, htmlBody string, err error) {
	subject, text, htmlBody, err = renderLink(resetTemplates, e.Link,
		map[string]string{"Minutes": strconv.Itoa(int(jobboard.PasswordResetTokenTTL.Minutes()))})
	if err != nil {
		return "", "", "", fmt.Errorf("render password reset email for event %s: %w", e.EventID, err)
	}
	return subject, text, htmlBody, nil
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
