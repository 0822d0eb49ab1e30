package executor

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/shared/testkit"
)

// gateLog collects a gate's records as "tag: content".
type gateLog struct {
	mu  sync.Mutex
	out []string
}

func (l *gateLog) write(tag, content string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.out = append(l.out, tag+": "+content)
}

func (l *gateLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.out
	l.out = nil
	return out
}

// The gate's states and records, step by step: a pause is pending until
// the run reaches the gate, a resume before then cancels it, and the time
// held is what the resumed record says.
func TestPauseGateStatesAndRecords(t *testing.T) {
	t.Parallel()
	var log gateLog
	now := time.UnixMilli(1_000_000)
	g := &PauseGate{Log: log.write, Now: func() time.Time { return now }}
	expect := func(status threads.Status, records ...string) {
		t.Helper()
		if got := g.Status(); got != status {
			t.Fatalf("status = %s, want %s", got, status)
		}
		if got := log.take(); strings.Join(got, "|") != strings.Join(records, "|") {
			t.Fatalf("records = %q, want %q", got, records)
		}
	}
	expect(threads.StatusRunning)
	if err := g.Resume(); !errors.Is(err, ErrNotPaused) {
		t.Fatalf("resume of an open gate: %v", err)
	}

	// Asked while the role runs, then cancelled before it took effect.
	g.roleBegins("reviewer")
	if err := g.Pause(); err != nil {
		t.Fatal(err)
	}
	expect(threads.StatusPausing, "pausing: pause requested; role reviewer finishes its step first")
	if err := g.Pause(); !errors.Is(err, ErrAlreadyPausing) {
		t.Fatalf("second pause while pausing: %v", err)
	}
	if err := g.Resume(); err != nil {
		t.Fatal(err)
	}
	expect(threads.StatusRunning, "resumed: resumed after 0s paused: the pause was cancelled before it took effect")
	if err := g.Wait(context.Background(), 4); err != nil {
		t.Fatalf("an open gate held the run: %v", err)
	}
	expect(threads.StatusRunning)

	// Asked between steps (no role announced), held at the gate, resumed.
	if err := g.Pause(); err != nil {
		t.Fatal(err)
	}
	expect(threads.StatusPausing, "pausing: pause requested; the step in flight finishes first")
	waited := make(chan error)
	go func() { waited <- g.Wait(context.Background(), 5) }()
	testkit.WaitUntil(t, "the run to be held", func() bool { return g.Status() == threads.StatusPaused })
	expect(threads.StatusPaused, "paused: paused after step 5")
	if err := g.Pause(); !errors.Is(err, ErrAlreadyPaused) {
		t.Fatalf("pause while paused: %v", err)
	}
	g.mu.Lock()
	now = now.Add(12*time.Second + 340*time.Millisecond)
	g.mu.Unlock()
	if err := g.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	expect(threads.StatusRunning, "resumed: resumed after 12.3s paused")

	// Held and killed: the run leaves the gate with the kill.
	if err := g.Pause(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() { waited <- g.Wait(ctx, 6) }()
	testkit.WaitUntil(t, "the run to be held", func() bool { return g.Status() == threads.StatusPaused })
	cancel(ErrKilled)
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("a killed run left the gate with %v", err)
	}
}

func TestPausedForRounds(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0:                                     "0s",
		40 * time.Millisecond:                 "0s",
		260 * time.Millisecond:                "300ms",
		12*time.Second + 340*time.Millisecond: "12.3s",
		59*time.Second + 940*time.Millisecond: "59.9s",
		2*time.Minute + 5*time.Second + 600*time.Millisecond: "2m6s",
	} {
		if got := pausedFor(d).String(); got != want {
			t.Errorf("pausedFor(%s) = %s, want %s", d, got, want)
		}
	}
}
