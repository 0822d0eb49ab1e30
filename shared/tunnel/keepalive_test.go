package tunnel

import (
	"context"
	"errors"
	"testing"
	"time"
)

// keepAlive pings only after an interval in which nothing was heard, and
// gives up after two failed pings in a row. Ticks, message counts and ping
// answers are all handed over on channels, so nothing here depends on
// timing.
func TestKeepAlivePingsOnlyWhenNothingWasHeard(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ticks := make(chan time.Time)
	heard := make(chan uint64)
	pings := make(chan chan error)
	failed := make(chan struct{})
	go keepAlive(ctx, ticks,
		func() uint64 { return <-heard },
		func() error {
			answer := make(chan error)
			pings <- answer
			return <-answer
		},
		func() { close(failed) })
	heard <- 0 // the count when the loop starts

	// step ticks once, with count as the messages heard so far, and
	// reports whether keepAlive pinged (answered with err). Without a
	// ping it is back waiting for a tick, which the next step's tick is.
	tickSent := false
	step := func(count uint64, err error) bool {
		t.Helper()
		if !tickSent {
			ticks <- time.Time{}
		}
		tickSent = false
		heard <- count
		select {
		case answer := <-pings:
			answer <- err
			return true
		case ticks <- time.Time{}:
			tickSent = true
			return false
		}
	}
	noPong := errors.New("no pong")
	for i, s := range []struct {
		count uint64
		err   error
		ping  bool
	}{
		{1, nil, false},   // a message: alive, no ping
		{1, nil, true},    // silence: ping, answered
		{1, noPong, true}, // silence: ping, unanswered (one miss)
		{2, noPong, false},
		{2, noPong, true}, // one miss since the last message
	} {
		if got := step(s.count, s.err); got != s.ping {
			t.Fatalf("step %d (count %d): pinged %v, want %v", i, s.count, got, s.ping)
		}
	}
	select {
	case <-failed:
		t.Fatal("gave up after one missed ping since the last message")
	default:
	}
	if !step(2, noPong) {
		t.Fatal("no ping after an interval of silence")
	}
	<-failed // two misses in a row
}
