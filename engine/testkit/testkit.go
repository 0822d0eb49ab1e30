// Package testkit holds the few helpers that tests in several packages
// need alike: waiting for a condition and telling whether a process ended.
// Only test code imports it.
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
