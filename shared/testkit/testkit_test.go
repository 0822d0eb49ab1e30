package testkit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"
)

func TestWaitUntilReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	calls := 0
	WaitUntil(t, "the third call", func() bool { calls++; return calls == 3 })
	if calls != 3 {
		t.Errorf("cond called %d times, want 3", calls)
	}
}

// fatalRecorder is a testing.TB whose Fatalf only records the message, so
// a test can read what a failing wait would have said.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) { r.msg = fmt.Sprintf(format, args...) }

// TestAWaitThatGivesUpSaysWhatWasMissing: a wait that never sees its
// condition names what it waited for and what the last check found
// missing (not the first, nor a generic "not yet"), with how long and how
// many checks; one that sees it returns quietly, whichever check that is.
func TestAWaitThatGivesUpSaysWhatWasMissing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		// holdsAt is the check that finds the condition (0: none does).
		holdsAt int
		// missing is what the n-th failing check says (nil: WaitUntil's
		// plain "not yet").
		missing func(n int) error
		want    string
	}{
		{"the last of changing reasons", 0, func(n int) error { return fmt.Errorf("thread still running, %d steps", n) },
			`^gave up waiting for the thing after \d+ms \((\d+) checks\): thread still running, (\d+) steps$`},
		{"one reason throughout", 0, func(int) error { return errors.New("no tokens in the index") },
			`^gave up waiting for the thing after \d+ms \(\d+ checks\): no tokens in the index$`},
		{"a plain condition", 0, nil, `^gave up waiting for the thing after \d+ms \(\d+ checks\)$`},
		{"holds at once", 1, nil, ""},
		{"holds at the fifth check", 5, func(n int) error { return fmt.Errorf("step %d", n) }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			checks := 0
			check := func() error {
				checks++
				if checks == c.holdsAt {
					return nil
				}
				if c.missing == nil {
					return errNotYet
				}
				return c.missing(checks)
			}
			// A wait that is to give up does so soon; one that is to
			// succeed has all the time it needs, however slow the machine.
			bound := time.Minute
			if c.holdsAt == 0 {
				bound = 30 * time.Millisecond
			}
			rec := &fatalRecorder{TB: t}
			if err := poll(bound, check); err != nil {
				rec.Fatalf("gave up waiting for %s %v", "the thing", err)
			}
			if c.want == "" {
				if rec.msg != "" || checks != c.holdsAt {
					t.Fatalf("failed after %d checks with %q; want success at check %d", checks, rec.msg, c.holdsAt)
				}
				return
			}
			m := regexp.MustCompile(c.want).FindStringSubmatch(rec.msg)
			if m == nil {
				t.Fatalf("message %q does not match %s", rec.msg, c.want)
			}
			// The reason quoted is the last check's, and the count is right.
			if len(m) == 3 && (m[1] != m[2] || m[1] != fmt.Sprint(checks)) {
				t.Fatalf("message %q: want the last of %d checks quoted", rec.msg, checks)
			}
		})
	}
	// WaitFor reports through t.Fatalf, and only when it gives up.
	rec := &fatalRecorder{TB: t}
	calls := 0
	WaitFor(rec, "the record", func() error {
		if calls++; calls == 3 {
			return nil
		}
		return errors.New("missing")
	})
	if rec.msg != "" || calls != 3 {
		t.Fatalf("WaitFor on a condition that held at the third check: %d checks, %q", calls, rec.msg)
	}
}

func TestProcessGone(t *testing.T) {
	t.Parallel()
	if ProcessGone(os.Getpid()) {
		t.Error("this test's own process is reported gone")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if ProcessGone(pid) {
		t.Error("a running child is reported gone")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Not yet reaped: a zombie, which counts as gone.
	WaitUntil(t, "the killed child to stop", func() bool { return ProcessGone(pid) })
	_ = cmd.Wait() // "signal: killed", as intended
	if !ProcessGone(pid) {
		t.Error("a reaped child is reported running")
	}
}
