package httpapi_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/httpapi/openapitest"
)

// codeKinds returns the problem kinds the code declares: the string
// constants of problem.go whose names start with "kind", every kind a
// handler or problemKinds can answer with.
func codeKinds(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "problem.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "kind") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("%s is not a string literal", name.Name)
				}
				k, _ := strconv.Unquote(lit.Value)
				kinds = append(kinds, k)
			}
		}
	}
	return kinds
}

// The OpenAPI document lists, as the enum of Problem.type, exactly the
// problem kinds of the code: a client can tell every problem it may meet,
// and the contract tests refuse a problem of a kind not listed.
func TestOpenAPIListsEveryProblemType(t *testing.T) {
	t.Parallel()
	doc, _ := openapitest.Spec(t)
	var documented []string
	for _, v := range doc.Components.Schemas["Problem"].Value.Properties["type"].Value.Enum {
		s, _ := v.(string)
		kind, ok := strings.CutPrefix(s, httpapi.ProblemBase)
		if !ok {
			t.Errorf("Problem.type lists %q, not under %s", s, httpapi.ProblemBase)
		}
		documented = append(documented, kind)
	}
	code := codeKinds(t)
	if len(code) < 30 {
		t.Fatalf("found only %d kinds in problem.go: %v", len(code), code)
	}
	slices.Sort(documented)
	slices.Sort(code)
	for _, k := range code {
		if _, found := slices.BinarySearch(documented, k); !found {
			t.Errorf("problem kind %q is not listed in the OpenAPI document's Problem.type", k)
		}
	}
	for _, k := range documented {
		if _, found := slices.BinarySearch(code, k); !found {
			t.Errorf("the OpenAPI document lists problem kind %q, which the code does not declare", k)
		}
	}
}
