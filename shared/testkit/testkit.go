// Package testkit holds what tests in every part of the module share:
// waiting for a condition, a buffer a test reads while a process writes
// it, telling whether a process ended, and YAML alias bombs.
//
// It is test support, not API, and may change with any commit. It lives in
// shared/ rather than under an internal/ folder because engine, connector,
// gateway and e2e tests all import it, and Go lets only one part's tree see
// that part's internal/. Only _test.go files may import it; a test of this
// package checks that.
package testkit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// WaitBound is how long WaitUntil and WaitFor wait before they call a
// condition that never holds a hang and fail naming it, instead of the
// test binary's timeout panic; it is no timing assertion. Any other bound
// a test puts on waiting for something to happen (a select on a channel,
// a read's context) uses it too, so that none gives up sooner. It is
// generous because a loaded 2-core machine (make test beside two
// CPU-bound processes) stretches what takes a second alone — a thread's
// run, a browser's next frame, a change crossing the tunnel — well past
// the 5 to 30 s such bounds were; a hang still ends in a named failure.
const WaitBound = 2 * time.Minute

// errNotYet is what a WaitUntil condition says while it does not hold.
var errNotYet = errors.New("not yet")

// WaitUntil polls cond until it holds, first often and then less so, and
// fails the test naming what never happened. When the failure should say
// what was seen instead, use WaitFor.
func WaitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	WaitFor(t, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// WaitFor polls check until it returns nil, first often and then less so.
// check's error says, in words, which part of the condition does not hold
// yet ("thread 01K… still running"); when the wait gives up, the test
// fails with what it waited for, the last such error and how many checks
// were made — a few slow checks mean a starved machine, many a condition
// that never came.
func WaitFor(t testing.TB, what string, check func() error) {
	t.Helper()
	if err := poll(WaitBound, check); err != nil {
		t.Fatalf("gave up waiting for %s %v", what, err)
	}
}

// poll runs check until it returns nil (then poll returns nil) or bound
// has passed (then the error says how long, how many checks, and what the
// last one said).
func poll(bound time.Duration, check func() error) error {
	start := time.Now()
	pause := 5 * time.Millisecond
	for checks := 1; ; checks++ {
		err := check()
		if err == nil {
			return nil
		}
		if waited := time.Since(start); waited > bound {
			if errors.Is(err, errNotYet) {
				return fmt.Errorf("after %s (%d checks)", waited.Round(time.Millisecond), checks)
			}
			return fmt.Errorf("after %s (%d checks): %w", waited.Round(time.Millisecond), checks, err)
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// ProcessGone reports whether pid has exited. A zombie counts: it has
// stopped running and only waits for its parent (or init) to reap it.
func ProcessGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}
	// The state follows the parenthesised command name, which may itself
	// hold parentheses.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] == 'Z' || b[i+2] == 'X'
	}
	return false
}
