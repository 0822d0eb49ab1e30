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
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// waitBound only turns a condition that never holds into a failure that
// names it, instead of the test binary's timeout panic; it is no timing
// assertion, so it is generous.
const waitBound = 30 * time.Second

// WaitUntil polls cond until it holds, first often and then less so, and
// fails the test naming what never happened.
func WaitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	pause := 5 * time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
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
