package settings

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/jobboard/jobboard/internal/httpapi"
)

// envPasswordHashes overrides how many argon2id computations may run at
// once (see httpapi.Config.PasswordHashes).
const envPasswordHashes = "PASSWORD_HASH_CONCURRENCY"

// envMemorySize is set by Lambda: the function's memory, in MB.
const envMemorySize = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"

// passwordHashes reads PASSWORD_HASH_CONCURRENCY, a positive integer; unset,
// it is httpapi.PasswordHashConcurrency of the cores Go may use and the
// memory the process may take (memoryLimit, of AWS_LAMBDA_FUNCTION_MEMORY_SIZE).
func passwordHashes(getenv func(string) string) (int, error) {
	v, memorySize := getenv(envPasswordHashes), getenv(envMemorySize)
	if v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("%s = %q: want a positive integer", envPasswordHashes, v)
		}
		return n, nil
	}
	return httpapi.PasswordHashConcurrency(runtime.GOMAXPROCS(0), memoryLimit(memorySize, os.ReadFile), httpapi.DefaultPasswordParams), nil
}

// memoryLimit is the memory the process may take, in bytes, or 0 when
// unknown: in Lambda the function's memory size (lambdaMB, the value of
// AWS_LAMBDA_FUNCTION_MEMORY_SIZE, in MB); else the lowest of GOMEMLIMIT,
// the cgroup's memory.max (a container's limit) and the machine's
// MemTotal.
func memoryLimit(lambdaMB string, readFile func(string) ([]byte, error)) int64 {
	if mb, err := strconv.ParseInt(lambdaMB, 10, 64); err == nil && mb > 0 {
		return mb << 20
	}
	limit := int64(math.MaxInt64)
	if l := debug.SetMemoryLimit(-1); l > 0 {
		limit = l
	}
	if b, err := readFile("/sys/fs/cgroup/memory.max"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 { // "max": none
			limit = min(limit, n)
		}
	}
	if b, err := readFile("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "MemTotal:" && f[2] == "kB" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil && kb > 0 {
					limit = min(limit, kb<<10)
				}
			}
		}
	}
	if limit == math.MaxInt64 {
		return 0
	}
	return limit
}
