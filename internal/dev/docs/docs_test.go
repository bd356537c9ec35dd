package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

const repoRoot = "../../.."

// readmeLineAim is the most lines the README may have: it is for users
// (what, the two commands, the first ten minutes, the guarantees, the API
// at a glance, deploying in short, layout, links); reference, runbooks
// and figures belong in docs/.
const readmeLineAim = 200

// documents returns README.md and every Markdown file under docs/, as
// paths relative to the repository root.
func documents(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range more {
		rel, err := filepath.Rel(repoRoot, f)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, rel)
	}
	return files
}

func TestReadmeStaysWithinItsAim(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("\n")); n > readmeLineAim {
		t.Errorf("README.md has %d lines; the aim is at most %d: move reference, runbooks and figures to docs/", n, readmeLineAim)
	}
	// The two commands a newcomer runs come first.
	lines := strings.Split(string(data), "\n")
	first := strings.Join(lines[:min(len(lines), 6)], "\n")
	dev, test := strings.Index(first, "\nmake dev "), strings.Index(first, "\nmake test ")
	if dev < 0 || test < dev {
		t.Errorf("README.md does not open with `make dev` and then `make test`:\n%s", first)
	}
}

// markdownLink is an inline link or image: [text](target) or
// [text](target "title").
var markdownLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// Every relative link in README.md and docs/ names a file or folder of the
// repository, and every #anchor a heading of the document it points to.
func TestRelativeLinksResolve(t *testing.T) {
	anchors := map[string][]string{} // document → its heading anchors
	anchorsOf := func(doc string) []string {
		if a, ok := anchors[doc]; ok {
			return a
		}
		a := headingAnchors(t, filepath.Join(repoRoot, doc))
		anchors[doc] = a
		return a
	}
	checked := 0
	for _, doc := range documents(t) {
		for _, l := range links(t, filepath.Join(repoRoot, doc)) {
			if isExternal(l.target) {
				continue
			}
			checked++
			where := fmt.Sprintf("%s:%d: %s", doc, l.line, l.target)
			path, anchor, _ := strings.Cut(l.target, "#")
			target := doc
			if path != "" {
				target = filepath.Clean(filepath.Join(filepath.Dir(doc), path))
				if strings.HasPrefix(target, "..") {
					t.Errorf("%s points outside the repository", where)
					continue
				}
				if _, err := os.Stat(filepath.Join(repoRoot, target)); err != nil {
					t.Errorf("%s: no such file or folder", where)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s: an anchor into a file that is not Markdown", where)
				continue
			}
			if !slices.Contains(anchorsOf(target), anchor) {
				t.Errorf("%s: %s has no heading with the anchor #%s (it has %v)", where, target, anchor, anchorsOf(target))
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no relative links at all: the link parser is broken")
	}
}

func isExternal(target string) bool {
	for _, scheme := range []string{"http://", "https://", "mailto:"} {
		if strings.HasPrefix(target, scheme) {
			return true
		}
	}
	return false
}

type link struct {
	line   int
	target string
}

// links returns the inline links of a Markdown file, outside fenced code
// blocks and code spans; a link's text may run over several lines.
func links(t *testing.T, path string) []link {
	t.Helper()
	var prose strings.Builder
	eachLine(t, path, func(_ int, line string, fenced bool) {
		if !fenced {
			prose.WriteString(withoutCodeSpans(line))
		}
		prose.WriteByte('\n')
	})
	text := prose.String()
	var out []link
	for _, m := range markdownLink.FindAllStringSubmatchIndex(text, -1) {
		out = append(out, link{line: strings.Count(text[:m[2]], "\n") + 1, target: text[m[2]:m[3]]})
	}
	return out
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown file: the heading's text in lower case, without punctuation,
// spaces turned into hyphens, and -1, -2, … after repeats.
func headingAnchors(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	seen := map[string]int{}
	eachLine(t, path, func(_ int, line string, fenced bool) {
		if fenced {
			return
		}
		trimmed := strings.TrimLeft(line, "#")
		if len(trimmed) == len(line) || len(line)-len(trimmed) > 6 || !strings.HasPrefix(trimmed, " ") {
			return
		}
		a := slug(trimmed)
		if n := seen[a]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", a, n))
		} else {
			out = append(out, a)
		}
		seen[a]++
	})
	return out
}

// inlineLinkText keeps the text of a link in a heading.
var inlineLinkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

func slug(heading string) string {
	heading = inlineLinkText.ReplaceAllString(strings.TrimSpace(heading), "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// eachLine calls fn with each line of a file (numbered from 1), saying
// whether it is inside a fenced code block (fences included).
func eachLine(t *testing.T, path string, fn func(n int, line string, fenced bool)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	fenced := false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		fence := strings.HasPrefix(strings.TrimSpace(line), "```")
		if fence {
			fenced = !fenced
		}
		fn(n, line, fenced || fence)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// codeSpan is an inline code span, whose brackets are not links.
var codeSpan = regexp.MustCompile("`[^`]*`")

func withoutCodeSpans(line string) string { return codeSpan.ReplaceAllString(line, "``") }

// The anchor rule, on headings of these documents.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"First ten minutes":                   "first-ten-minutes",
		"Retrying writes: `Idempotency-Key`":  "retrying-writes-idempotency-key",
		"Effectively once, not exactly once":  "effectively-once-not-exactly-once",
		"maxReceiveCount":                     "maxreceivecount",
		"CloudFront in front of API Gateway":  "cloudfront-in-front-of-api-gateway",
		"See [the design](design.md) first":   "see-the-design-first",
		"Sample events (`make invoke`), 2026": "sample-events-make-invoke-2026",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}
