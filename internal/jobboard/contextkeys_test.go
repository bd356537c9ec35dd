package jobboard_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// contextKeys lists every key under which the shipped code puts a value
// into a context.Context (context.WithValue), each with why it may. A
// context carries what every layer may read about the request it serves;
// never an event to relay, a hook to run after a commit or a transaction:
// a write's unit of work hands those over and back (jobboard.WriteStore),
// where the caller sees them. A new key fails
// TestContextKeysAreReviewed until it is listed here, with its reason.
var contextKeys = map[string]string{
	"internal/httpapi requestIDKey": "the request's id, which its log lines and problem answers carry",
	"internal/postgres attemptKey{}": "pgx's connect tracer passes one connection attempt's credentials from its start " +
		"to its end, to report a refused login; the context is pgx's own, of one attempt",
}

// Every context.WithValue of the shipped packages (those linked into a
// function) uses a key of contextKeys, and every key listed is used.
func TestContextKeysAreReviewed(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}}", "../../functions/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	found := map[string]bool{}
	fset := token.NewFileSet()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, rest, _ := strings.Cut(line, "\t")
		dir, files, _ := strings.Cut(rest, "\t")
		rel, ours := strings.CutPrefix(pkg, module)
		if !ours {
			continue
		}
		for _, name := range strings.Fields(files) {
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, key := range withValueKeys(f) {
				found[rel+" "+key] = true
			}
		}
	}
	if !found["internal/httpapi requestIDKey"] {
		t.Fatalf("found no context key of internal/httpapi's: %v", found)
	}
	for key := range found {
		if _, ok := contextKeys[key]; !ok {
			t.Errorf("context.WithValue with the key %s: a context carries no event, hook or transaction; "+
				"if this value is not one, list the key in contextKeys with the reason it may travel in a context", key)
		}
	}
	for key := range contextKeys {
		if !found[key] {
			t.Errorf("contextKeys lists %s, which no shipped code uses: remove it", key)
		}
	}
}

// withValueKeys returns the key expressions of f's calls of
// context.WithValue, as written.
func withValueKeys(f *ast.File) []string {
	pkgName := ""
	for _, imp := range f.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); path == "context" {
			pkgName = "context"
			if imp.Name != nil {
				pkgName = imp.Name.Name
			}
		}
	}
	if pkgName == "" {
		return nil
	}
	var keys []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) != 3 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "WithValue" {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == pkgName {
			keys = append(keys, types.ExprString(call.Args[1]))
		}
		return true
	})
	return keys
}
