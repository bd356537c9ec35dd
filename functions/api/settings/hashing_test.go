package settings

import (
	"io/fs"
	"runtime"
	"testing"

	"github.com/jobboard/jobboard/internal/httpapi"
)

// withDB is m with a DATABASE_URL (unless it has one), as the settings
// want one.
func withDB(m map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := m[k]; ok || k != "DATABASE_URL" {
			return v
		}
		return "postgres://127.0.0.1:1/none"
	}
}

// PASSWORD_HASH_CONCURRENCY sets the hashing slots; unset, they follow the
// cores and the memory the process may take.
func TestPasswordHashesSetting(t *testing.T) {
	t.Parallel()
	cfg, err := Load(withDB(map[string]string{"PASSWORD_HASH_CONCURRENCY": "3"}))
	if err != nil || cfg.PasswordHashes != 3 {
		t.Fatalf("PASSWORD_HASH_CONCURRENCY=3: %d, %v", cfg.PasswordHashes, err)
	}
	cfg, err = Load(withDB(map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128"}))
	if err != nil || cfg.PasswordHashes != 1 {
		t.Fatalf("a 128 MB Lambda: %d slots, %v; want 1", cfg.PasswordHashes, err)
	}
	cfg, err = Load(withDB(map[string]string{}))
	want := httpapi.PasswordHashConcurrency(runtime.GOMAXPROCS(0), memoryLimit("", readNothing), httpapi.DefaultPasswordParams)
	if err != nil || cfg.PasswordHashes < 1 || cfg.PasswordHashes > want {
		t.Fatalf("default: %d slots, %v; want 1 to %d", cfg.PasswordHashes, err, want)
	}
}

func readNothing(string) ([]byte, error) { return nil, fs.ErrNotExist }

// The memory limit is Lambda's memory size there, else the lowest of the
// cgroup's memory.max and the machine's MemTotal.
func TestMemoryLimit(t *testing.T) {
	t.Parallel()
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(name string) ([]byte, error) {
			if v, ok := m[name]; ok {
				return []byte(v), nil
			}
			return nil, fs.ErrNotExist
		}
	}
	meminfo := "MemTotal:       24576000 kB\nMemFree:         1000 kB\n"
	for _, tt := range []struct {
		name  string
		env   map[string]string
		files map[string]string
		want  int64
	}{
		{"Lambda", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"}, map[string]string{"/proc/meminfo": meminfo}, 512 << 20},
		{"machine", nil, map[string]string{"/proc/meminfo": meminfo}, 24576000 << 10},
		{"container", nil, map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "1073741824\n"}, 1 << 30},
		{"container without a limit", nil, map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "max\n"}, 24576000 << 10},
		{"unknown", nil, nil, 0},
	} {
		if got := memoryLimit(tt.env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"], files(tt.files)); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
}
