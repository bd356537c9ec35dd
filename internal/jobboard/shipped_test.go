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
	"internal/httpapi signedInKey": "who signed the request, as the route table's sign-in check found the token and " +
		"the account (its session live), for the handler that acts for them",
	"internal/postgres attemptKey{}": "pgx's connect tracer passes one connection attempt's credentials from its start " +
		"to its end, to report a refused login; the context is pgx's own, of one attempt",
}

// Every context.WithValue of the shipped packages (those linked into a
// function) uses a key of contextKeys, and every key listed is used.
func TestContextKeysAreReviewed(t *testing.T) {
	found := map[string]bool{}
	for pkg, files := range shippedFiles(t) {
		for _, f := range files {
			for _, key := range withValueKeys(f) {
				found[pkg+" "+key] = true
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

// errorLogKey is the one key under which shipped code logs an error, so
// that one query finds them all.
const errorLogKey = "error"

// No shipped code logs an error under another key than errorLogKey: an
// slog attribute whose value is an error (slog.Any(key, err…)) or an
// error's text (slog.String(key, err….Error())) is keyed errorLogKey, or
// names which error it is besides the line's main one (…_error).
func TestErrorsAreLoggedUnderOneKey(t *testing.T) {
	seen := 0
	for pkg, files := range shippedFiles(t) {
		for _, f := range files {
			for _, key := range errorAttrKeys(f) {
				seen++
				if key != errorLogKey && !strings.HasSuffix(key, "_"+errorLogKey) {
					t.Errorf("%s logs an error under %q; the key is %q", pkg, key, errorLogKey)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("found no error attribute in the shipped code")
	}
}

// shippedFiles parses the Go files (tests excluded) of every package of the
// module linked into a function (go list -deps ../../functions/...), by
// package path relative to the module.
func shippedFiles(t *testing.T) map[string][]*ast.File {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}}", "../../functions/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	pkgs := map[string][]*ast.File{}
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
			pkgs[rel] = append(pkgs[rel], f)
		}
	}
	return pkgs
}

// errorAttrKeys returns the keys of f's slog attributes that hold an error
// or an error's text: slog.Any(key, x) and slog.String(key, x.Error()),
// where x is named err or ends in err or Err.
func errorAttrKeys(f *ast.File) []string {
	var keys []string
	eachCall(f, "log/slog", func(name string, args []ast.Expr) {
		if len(args) != 2 || (name != "Any" && name != "String") {
			return
		}
		key, ok := args[0].(*ast.BasicLit)
		if !ok || key.Kind != token.STRING {
			return
		}
		value := args[1]
		if name == "String" { // x.Error()
			c, ok := value.(*ast.CallExpr)
			if !ok || len(c.Args) != 0 {
				return
			}
			m, ok := c.Fun.(*ast.SelectorExpr)
			if !ok || m.Sel.Name != "Error" {
				return
			}
			value = m.X
		}
		if v, ok := value.(*ast.Ident); ok && (strings.HasSuffix(v.Name, "err") || strings.HasSuffix(v.Name, "Err")) {
			k, _ := strconv.Unquote(key.Value)
			keys = append(keys, k)
		}
	})
	return keys
}

// withValueKeys returns the key expressions of f's calls of
// context.WithValue, as written.
func withValueKeys(f *ast.File) []string {
	var keys []string
	eachCall(f, "context", func(name string, args []ast.Expr) {
		if name == "WithValue" && len(args) == 3 {
			keys = append(keys, types.ExprString(args[1]))
		}
	})
	return keys
}

// eachCall calls fn with the name and the arguments of every call in f of
// a function of the package with the import path path.
func eachCall(f *ast.File, path string, fn func(name string, args []ast.Expr)) {
	pkg := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			pkg = filepath.Base(path)
			if imp.Name != nil {
				pkg = imp.Name.Name
			}
		}
	}
	if pkg == "" {
		return
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == pkg {
					fn(sel.Sel.Name, call.Args)
				}
			}
		}
		return true
	})
}
