package syncio_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jobboard/jobboard/internal/dev/syncio"
)

// Lines written by many goroutines at once come out whole, each decodable.
func TestBufferKeepsConcurrentLinesWhole(t *testing.T) {
	t.Parallel()
	var b syncio.Buffer
	var wg sync.WaitGroup
	const n = 50
	for i := range n {
		wg.Go(func() { fmt.Fprintf(&b, `{"n":%d,"pad":%q}`+"\n", i, strings.Repeat("x", 500)) })
	}
	wg.Wait()
	lines, err := b.JSONLines()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[float64]bool{}
	for _, l := range lines {
		seen[l["n"].(float64)] = true
	}
	if len(lines) != n || len(seen) != n {
		t.Errorf("%d lines, %d distinct; want %d of each", len(lines), len(seen), n)
	}
}

// A line that is not JSON is an error that quotes it.
func TestJSONLinesRefusesText(t *testing.T) {
	t.Parallel()
	var b syncio.Buffer
	_, _ = b.Write([]byte("{\"ok\":1}\n\nnot json\n"))
	lines, err := b.JSONLines()
	if err == nil || !strings.Contains(err.Error(), "not json") || len(lines) != 1 {
		t.Errorf("JSONLines = %v, %v; want the first line and an error quoting the second", lines, err)
	}
}

func TestWriterSerialises(t *testing.T) {
	t.Parallel()
	var sb strings.Builder // not safe for concurrent use on its own
	w := syncio.NewWriter(&sb)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { _, _ = w.Write([]byte("abc\n")) })
	}
	wg.Wait()
	if got := sb.String(); got != strings.Repeat("abc\n", 20) {
		t.Errorf("wrote %q; want 20 whole lines", got)
	}
}

// Contains returns once a later write brings the text, in pieces too, and
// false when its context ends first.
func TestContainsWaitsForTheText(t *testing.T) {
	t.Parallel()
	var b syncio.Buffer
	_, _ = b.Write([]byte("starting\n"))
	found := make(chan bool)
	go func() { found <- b.Contains(context.Background(), "refused inside") }()
	_, _ = b.Write([]byte("fatal: refused "))
	_, _ = b.Write([]byte("inside Lambda\n"))
	if !<-found {
		t.Fatal("Contains = false; want true once the text is written")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if b.Contains(ctx, "never written") {
		t.Error("Contains of text never written = true")
	}
}
