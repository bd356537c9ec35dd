package schema_test

import (
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jobboard/jobboard/internal/postgres/schema"
)

// Migrations are additive: a deploy migrates before any traffic moves, and
// the old version keeps serving on the new schema during the canary, and
// again after a rollback (docs/deploying.md, "How a deploy goes"). A
// statement that drops, renames or rewrites what an older version's code
// uses breaks that version mid-deploy. Such a statement is refused unless
// the comment right before it says why it is safe, on a line starting
// "-- destructive:" (the old code never reads it, say).

// lastUncheckedMigration is the last migration written before this check:
// those were reviewed by hand (002 drops an index and a column's default,
// 006 deletes stale rows: TestTheAdditiveCheckFindsWhatItRefuses).
const lastUncheckedMigration = 10

// statement is one SQL statement of a migration: its text without comments
// or quoted bodies, and the comments right before it.
type statement struct {
	sql, comments string
}

// splitStatements splits a migration into statements at the semicolons
// outside comments, quotes and dollar-quoted bodies (a function's).
func splitStatements(src string) []statement {
	var out []statement
	var sql, comments strings.Builder
	for i := 0; i < len(src); {
		switch {
		case strings.HasPrefix(src[i:], "--"):
			end := strings.IndexByte(src[i:], '\n')
			if end < 0 {
				end = len(src) - i
			}
			if strings.TrimSpace(sql.String()) == "" {
				comments.WriteString(src[i:i+end] + "\n")
			}
			i += end
		case strings.HasPrefix(src[i:], "/*"):
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				end = len(src) - i - 4
			}
			i += end + 4
		case src[i] == '\'':
			end := strings.IndexByte(src[i+1:], '\'')
			if end < 0 {
				end = len(src) - i - 1
			}
			sql.WriteString("''")
			i += end + 2
		case src[i] == '$':
			tag := dollarTag.FindString(src[i:])
			if tag == "" {
				sql.WriteByte('$')
				i++
				continue
			}
			end := strings.Index(src[i+len(tag):], tag)
			if end < 0 {
				end = len(src) - i - 2*len(tag)
			}
			sql.WriteString("$$")
			i += end + 2*len(tag)
		case src[i] == ';':
			out = append(out, statement{normalise(sql.String()), comments.String()})
			sql.Reset()
			comments.Reset()
			i++
		default:
			sql.WriteByte(src[i])
			i++
		}
	}
	if s := normalise(sql.String()); s != "" {
		out = append(out, statement{s, comments.String()})
	}
	return out
}

var dollarTag = regexp.MustCompile(`^\$[A-Za-z_0-9]*\$`)

func normalise(s string) string { return strings.ToUpper(strings.Join(strings.Fields(s), " ")) }

// destructive says what a statement does to what older code uses, or "".
func destructive(sql string) string {
	switch {
	case strings.HasPrefix(sql, "DROP "):
		return "drops"
	case strings.HasPrefix(sql, "TRUNCATE "), strings.HasPrefix(sql, "DELETE "), strings.HasPrefix(sql, "UPDATE "):
		return "rewrites rows"
	case strings.HasPrefix(sql, "CREATE OR REPLACE "):
		return "replaces"
	case !strings.HasPrefix(sql, "ALTER "):
		return ""
	case strings.Contains(sql, " RENAME "):
		return "renames"
	case strings.Contains(sql, " DROP "):
		return "drops"
	case alterType.MatchString(sql):
		return "rewrites a column's type"
	case strings.Contains(sql, " SET NOT NULL"):
		return "refuses the NULLs older code may write"
	}
	return ""
}

var alterType = regexp.MustCompile(`ALTER COLUMN \S+ (SET DATA )?TYPE `)

var justification = regexp.MustCompile(`(?m)^\s*-- destructive: \S.{10,}`)

// unjustified lists the statements of a migration that drop, rename or
// rewrite without a "-- destructive:" comment before them.
func unjustified(src string) []string {
	var out []string
	for _, s := range splitStatements(src) {
		if what := destructive(s.sql); what != "" && !justification.MatchString(s.comments) {
			out = append(out, fmt.Sprintf("%s: %.120s", what, s.sql))
		}
	}
	return out
}

// migrationFiles returns the embedded migrations by sequence number.
func migrationFiles(t *testing.T) map[int]string {
	t.Helper()
	names, err := fs.Glob(schema.Migrations(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, name := range names {
		n, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
		if err != nil {
			t.Fatalf("migration %s has no sequence number", name)
		}
		b, err := fs.ReadFile(schema.Migrations(), name)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = string(b)
	}
	return out
}

func TestNewMigrationsAreAdditiveUnlessTheySayWhy(t *testing.T) {
	t.Parallel()
	for n, src := range migrationFiles(t) {
		if n <= lastUncheckedMigration {
			continue
		}
		for _, u := range unjustified(src) {
			t.Errorf("migration %03d %s what an older version may use, without a \"-- destructive:\" comment saying why that is safe", n, u)
		}
	}
}

// The check refuses what drops, renames or rewrites, and lets through what
// only adds, or says why: on statements of its own, and on the migrations
// written before it.
func TestTheAdditiveCheckFindsWhatItRefuses(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		sql  string
		want int
	}{
		{"CREATE TABLE t (id int);\nALTER TABLE t ADD COLUMN c text;\nCREATE INDEX t_c ON t (c);", 0},
		{"ALTER TABLE users DROP COLUMN name;", 1},
		{"ALTER TABLE users RENAME COLUMN name TO full_name;", 1},
		{"ALTER TABLE jobs ALTER COLUMN title TYPE varchar(80);", 1},
		{"ALTER TABLE jobs ALTER COLUMN title SET NOT NULL;", 1},
		{"DROP INDEX jobs_title_idx;", 1},
		{"DELETE FROM sessions; UPDATE users SET name = '';", 2},
		{"CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;", 1},
		{"-- destructive: the old code never reads it; the planner picks the new index.\nDROP INDEX jobs_title_idx;", 0},
		{"-- destructive:\nDROP INDEX jobs_title_idx;", 1},
		{"-- destructive: the old code never reads it.\nCREATE INDEX a ON t (c);\nDROP INDEX b;", 1},
		{"CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $body$ BEGIN DELETE FROM t; RETURN NULL; END $body$;", 0},
		{"COMMENT ON TABLE t IS 'DROP TABLE t; drops nothing';", 0},
		{"GRANT SELECT, UPDATE (state) ON t TO r;", 0},
	} {
		if got := unjustified(tt.sql); len(got) != tt.want {
			t.Errorf("%q: refused %v; want %d refusals", tt.sql, got, tt.want)
		}
	}
	files := migrationFiles(t)
	for n, want := range map[int]int{2: 2, 6: 2, 4: 0, 8: 0, 10: 0} {
		if got := unjustified(files[n]); len(got) != want {
			t.Errorf("migration %03d: refused %v; want %d refusals", n, got, want)
		}
	}
}
