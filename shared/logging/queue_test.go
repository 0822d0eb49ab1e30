package logging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// gatedWriter records each write, and holds writes while its gate is
// shut, the way a slow pipe to a log collector would.
type gatedWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
	gate   sync.RWMutex
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	w.gate.RLock()
	defer w.gate.RUnlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return w.buf.Write(p)
}

func (w *gatedWriter) snapshot() (string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String(), w.writes
}

// Lines that come while the writer is busy leave together, in order, and
// all of them are out after Flush.
func TestQueueBatchesLinesInOrder(t *testing.T) {
	t.Parallel()
	w := &gatedWriter{}
	q := NewQueue(w)
	defer q.Close()
	w.gate.Lock() // the writer is stuck on a slow collector
	var want strings.Builder
	for i := range 1000 {
		line := fmt.Sprintf("line %d\n", i)
		want.WriteString(line)
		if _, err := q.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	w.gate.Unlock()
	q.Flush()
	got, writes := w.snapshot()
	if got != want.String() {
		t.Fatalf("the log reads %d bytes, want the 1000 lines in order", len(got))
	}
	// The first line may have gone alone before the gate shut; the rest
	// waited together.
	if writes > 3 {
		t.Fatalf("1000 lines took %d writes; want them batched", writes)
	}
}

// A warning, and every line before it, is written before the call logging
// it returns: a process that dies next has said why.
func TestQueuedLoggerFlushesWarnings(t *testing.T) {
	t.Parallel()
	w := &gatedWriter{}
	q := NewQueue(w)
	defer q.Close()
	log := Options{Level: slog.LevelDebug, Format: FormatJSON}.NewQueued(q).With("component", "test")
	for i := range 10 {
		log.Info("request", "n", i)
	}
	log.Error("dying", "why", "disk full")
	got, _ := w.snapshot()
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 11 {
		t.Fatalf("after the error, %d lines are out, want 11: %q", len(lines), got)
	}
	var last map[string]any
	if err := json.Unmarshal([]byte(lines[10]), &last); err != nil || last["msg"] != "dying" || last["component"] != "test" {
		t.Fatalf("last line %q (%v)", lines[10], err)
	}
}

// Writes from many goroutines each arrive whole, none lost; after Close a
// line is written by its caller.
func TestQueueConcurrentWritesAndClose(t *testing.T) {
	t.Parallel()
	w := &gatedWriter{}
	q := NewQueue(w)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				_, _ = fmt.Fprintf(q, "g%d-%03d %s\n", g, i, strings.Repeat("x", 100))
			}
		})
	}
	wg.Wait()
	q.Close()
	got, _ := w.snapshot()
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 1600 {
		t.Fatalf("%d lines, want 1600", len(lines))
	}
	for _, l := range lines {
		if len(l) != len("g0-000 ")+100 {
			t.Fatalf("a torn line: %q", l)
		}
	}
	_, _ = q.Write([]byte("after close\n"))
	if got, _ := w.snapshot(); !strings.HasSuffix(got, "after close\n") {
		t.Fatal("a line written after Close was not written at once")
	}
}

// A queue that cannot write holds its callers at maxQueued rather than
// growing.
func TestQueueIsBounded(t *testing.T) {
	t.Parallel()
	w := &gatedWriter{}
	q := NewQueue(w)
	defer q.Close()
	w.gate.Lock()
	line := []byte(strings.Repeat("y", 1023) + "\n")
	wrote := make(chan int)
	go func() {
		n := 0
		for range 4 * maxQueued / len(line) {
			_, _ = q.Write(line)
			n++
		}
		wrote <- n
	}()
	// The writer goroutine is stuck, so the queue must fill up and block:
	// wait until it holds maxQueued and check nothing more got in.
	for {
		q.mu.Lock()
		full := len(q.pending) >= maxQueued
		q.mu.Unlock()
		if full {
			break
		}
		select {
		case n := <-wrote:
			t.Fatalf("all %d lines were queued while nothing could be written", n)
		default:
			runtime.Gosched()
		}
	}
	q.mu.Lock()
	held := len(q.pending)
	q.mu.Unlock()
	if held > maxQueued+len(line) {
		t.Fatalf("queue holds %d bytes, bound %d", held, maxQueued)
	}
	w.gate.Unlock()
	if n := <-wrote; n != 4*maxQueued/len(line) {
		t.Fatalf("wrote %d", n)
	}
}
