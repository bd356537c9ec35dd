// Package syncio holds the writers that several goroutines share: the log
// lines of a handler whose records run concurrently, the progress lines of
// the chaos harness. One Write is never interleaved with another.
package syncio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// Writer serialises the writes of several goroutines to one io.Writer.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer over w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes p to the underlying writer, alone.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// Buffer is a bytes.Buffer that several goroutines may write to while
// another reads it, such as a logger's output read by a test. The zero
// value is an empty buffer ready to use.
type Buffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{} // closed by the next Write (see Contains)
}

// Write appends p. It never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.written != nil {
		close(b.written)
		b.written = nil
	}
	return b.buf.Write(p)
}

// Contains waits until what was written contains s, or ctx ends: a
// process's output can reach the buffer after the answer that it caused
// (the Lambda emulator relays a runtime's stderr on its own), so a test
// waits for a line instead of reading the buffer once.
func (b *Buffer) Contains(ctx context.Context, s string) bool {
	for {
		b.mu.Lock()
		if bytes.Contains(b.buf.Bytes(), []byte(s)) {
			b.mu.Unlock()
			return true
		}
		if b.written == nil {
			b.written = make(chan struct{})
		}
		written := b.written
		b.mu.Unlock()
		select {
		case <-written:
		case <-ctx.Done():
			return false
		}
	}
}

// Bytes returns a copy of what was written so far.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// JSONLines decodes what was written so far as one JSON object a line
// (slog's JSON handler, Embedded Metric Format lines); empty lines are
// passed over. Errors: a line that is not a JSON object (the error quotes
// it).
func (b *Buffer) JSONLines() ([]map[string]any, error) {
	var lines []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.Bytes()))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return lines, fmt.Errorf("log line is not JSON: %w: %s", err, sc.Text())
		}
		lines = append(lines, m)
	}
	return lines, sc.Err()
}
