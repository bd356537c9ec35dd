package mail

import (
	"strings"
	"testing"
)

// The template format is placeholders and nothing else; anything the
// renderer cannot honour is a parse error, not a silently wrong email.
func TestParseTemplateRefusesWhatItCannotRender(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, src string
		html      bool
		want      string
	}{
		{"unknown field", "Hi {{.Nickname}}", false, "placeholders"},
		{"logic", "{{if .JobTitle}}x{{end}}", false, "placeholders"},
		{"a call", `{{template "message" .}}`, false, "placeholders"},
		{"unclosed", "Hi {{.JobTitle", false, "without }}"},
		{"field in an attribute", `<a title="{{.JobTitle}}">x</a>`, true, "inside a tag"},
		{"field as a tag name", `<{{.JobTitle}}>`, true, "inside a tag"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseTemplate("t", tt.src, statusFields, tt.html)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parseTemplate(%q) = %v; want an error saying %q", tt.src, err, tt.want)
			}
		})
	}
}

func TestParseTemplateSplitsTextAndPlaceholders(t *testing.T) {
	t.Parallel()
	tpl, err := parseTemplate("t", "<p>{{.CompanyName}} hires: <b>{{ .JobTitle }}</b></p>", statusFields, true)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	tpl.render(&b, map[string]string{"CompanyName": "Acme", "JobTitle": "Go"})
	if got, want := b.String(), "<p>Acme hires: <b>Go</b></p>"; got != want {
		t.Errorf("render = %q; want %q", got, want)
	}
}

// Every embedded template parses, and every status file has both parts.
func TestEmbeddedTemplatesParse(t *testing.T) {
	t.Parallel()
	sets, err := templates()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sets[genericTemplate]; !ok {
		t.Errorf("no generic template %q", genericTemplate)
	}
	if _, err := layout(); err != nil {
		t.Fatal(err)
	}
}
