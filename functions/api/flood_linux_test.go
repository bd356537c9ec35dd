package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// procStatusKiB reads a "Name:   N kB" line of /proc/PID/status.
func procStatusKiB(pid int, name string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == name+":" && f[2] == "kB" {
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", name, pid)
}

// fromLoopback is an HTTP client whose connections come from the loopback
// address ip (Linux answers all of 127.0.0.0/8): to the API served locally,
// a client of its own.
func fromLoopback(ip string) *http.Client {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
}

// A crowd of registrations and logins at once, against the API process as
// it is built and run (plain HTTP, the production argon2id cost of 19 MiB
// a hash), from 400 clients: the process holds its resident memory under
// its bound (the memory it had before, plus what its hashing slots can
// hold with the collector's headroom, plus the crowd's connections),
// where unbounded hashing took 3.9 GB for 200 registrations. Every answer
// is a success or a 503 busy with Retry-After: the requests that found no
// slot in time are refused, not queued without end, and none fails.
// Nothing here is timed: the peak comes from the kernel's high-water mark
// (VmHWM), and which requests get a slot is left to the machine.
func TestHashingFloodStaysUnderMemoryBound(t *testing.T) {
	t.Parallel()
	const (
		slots   = 2
		clients = 400
		mib     = 1 << 20
	)
	bin := filepath.Join(t.TempDir(), "api")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+pgtest.NewURL(t), "PORT=0", "JWT_SECRET="+strings.Repeat("f", 32),
		"PASSWORD_HASH_CONCURRENCY="+strconv.Itoa(slots))
	out := &lineWatcher{addrs: make(chan string, 1)}
	cmd.Stdout, cmd.Stderr = out, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var base string
	select {
	case base = <-out.addrs:
	case <-time.After(time.Minute):
		t.Fatalf("not listening after a minute:\n%s", out)
	}
	pid := cmd.Process.Pid

	post := func(c *http.Client, path, body string) (int, http.Header) {
		resp, err := c.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Errorf("POST %s: %v", path, err)
			return 0, nil
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header
	}
	registration := func(i int) string {
		return fmt.Sprintf(`{"email":"crowd%d@example.com","password":"correct horse battery","name":"C","role":"candidate"}`, i)
	}
	// Warm up: one registration and one login, so that the baseline holds
	// a hash's worth of heap and the connection pool.
	local := fromLoopback("127.0.0.1")
	if status, _ := post(local, "/v1/auth/register", registration(0)); status != http.StatusCreated {
		t.Fatalf("warm-up registration: %d", status)
	}
	if status, _ := post(local, "/v1/auth/login", `{"email":"crowd0@example.com","password":"correct horse battery"}`); status != http.StatusOK {
		t.Fatalf("warm-up login: %d", status)
	}
	baseline, err := procStatusKiB(pid, "VmRSS")
	if err != nil {
		t.Fatal(err)
	}

	type answer struct {
		path       string
		status     int
		retryAfter string
	}
	answers := make(chan answer, clients)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			c := fromLoopback(fmt.Sprintf("127.0.%d.%d", 1+i/250, 2+i%250))
			path, body := "/v1/auth/register", registration(i+1)
			if i%2 == 1 {
				path, body = "/v1/auth/login", `{"email":"crowd0@example.com","password":"correct horse battery"}`
			}
			<-start
			status, h := post(c, path, body)
			answers <- answer{path, status, h.Get("Retry-After")}
		})
	}
	// Sample the resident memory while the crowd is served, for the log;
	// the assertion uses the kernel's exact peak.
	sampled := make(chan int64, 1)
	done := make(chan struct{})
	go func() {
		var peak int64
		for {
			if rss, err := procStatusKiB(pid, "VmRSS"); err == nil && rss > peak {
				peak = rss
			}
			select {
			case <-done:
				sampled <- peak
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	close(start)
	wg.Wait()
	close(done)
	close(answers)
	peakSampled := <-sampled
	hwm, err := procStatusKiB(pid, "VmHWM")
	if err != nil {
		t.Fatal(err)
	}

	counts := map[string]int{}
	for a := range answers {
		counts[fmt.Sprintf("%s %d", a.path, a.status)]++
		switch {
		case a.status == http.StatusServiceUnavailable && a.retryAfter == "":
			t.Errorf("%s: 503 without Retry-After", a.path)
		case a.status == http.StatusServiceUnavailable:
		case a.path == "/v1/auth/register" && a.status == http.StatusCreated:
		case a.path == "/v1/auth/login" && a.status == http.StatusOK:
		default:
			t.Errorf("%s answered %d in the crowd", a.path, a.status)
		}
	}
	if counts["/v1/auth/register 201"] == 0 || counts["/v1/auth/login 200"] == 0 {
		t.Errorf("the crowd got no hashing done: %v", counts)
	}
	// The bound: what the process had, plus its slots' hashes with the
	// collector's headroom, plus the crowd's 400 connections and
	// goroutines (a few tens of KiB each), plus room for the collector's
	// timing.
	perHash := int64(httpapi.DefaultPasswordParams.MemoryKiB) << 10
	bound := baseline<<10 + slots*2*perHash + 64*mib
	t.Logf("%d clients: %v; resident memory %d MiB before, peak %d MiB (sampled %d MiB), bound %d MiB; unbounded, %d hashes of 19 MiB would hold %d MiB",
		clients, counts, baseline>>10, hwm>>10, peakSampled>>10, bound/mib, clients, clients*perHash/mib)
	if hwm<<10 > bound {
		t.Errorf("peak resident memory %d MiB exceeds the bound of %d MiB", hwm>>10, bound/mib)
	}
	// The process is still serving.
	if status, _ := post(local, "/v1/auth/login", `{"email":"crowd0@example.com","password":"correct horse battery"}`); status != http.StatusOK {
		t.Fatalf("login after the crowd: %d", status)
	}
}
