package wake

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/workflow"
	"github.com/uncaged/workflow/shared/testkit"
)

// woken reports whether w holds a token, taking it.
func woken(w *Waker) bool {
	select {
	case <-w.C:
		return true
	default:
		return false
	}
}

// TestDeliverWakesWhomAChangeConcerns: a change to a thread wakes that
// thread's subscribers and those of every thread; a debug-log line wakes
// only those of them that asked for log lines; lost changes wake
// everyone.
func TestDeliverWakesWhomAChangeConcerns(t *testing.T) {
	t.Parallel()
	kinds := []host.ChangeKind{host.ChangeStarted, host.ChangeStep, host.ChangeStatus, host.ChangeLog, host.ChangeEnded, host.ChangeRemoved, host.ChangeLost}
	for _, kind := range kinds {
		h := NewHub(nil, NoHost, time.Hour, nil)
		subs := map[string]*Waker{
			"a":          h.Subscribe("a", false),
			"a+logs":     h.Subscribe("a", true),
			"b+logs":     h.Subscribe("b", true),
			"every":      h.Subscribe("", false),
			"every+logs": h.Subscribe("", true),
		}
		h.deliver(host.Change{Kind: kind, ThreadID: "a"})
		want := map[string]bool{"a": true, "a+logs": true, "b+logs": false, "every": true, "every+logs": true}
		switch kind {
		case host.ChangeLog:
			want["a"], want["every"] = false, false
		case host.ChangeLost:
			want["b+logs"] = true
		}
		for name, w := range subs {
			if got := woken(w); got != want[name] {
				t.Errorf("%s: subscriber %s woken %v, want %v", kind, name, got, want[name])
			}
			why := w.Woken()
			if want[name] && kind == host.ChangeLog && why != ByLog {
				t.Errorf("%s: subscriber %s told %b, want ByLog", kind, name, why)
			}
			if want[name] && kind != host.ChangeLog && why != ByOther {
				t.Errorf("%s: subscriber %s told %b, want ByOther", kind, name, why)
			}
			w.Close()
		}
	}
}

// TestHubFollowsTheHost: with no host, a hub on a Dialer is NoHost; a
// host that starts is found (Live), waking every subscriber, since what
// changed before the stream began told no one; the host stopping wakes
// them again and the hub looks for the next one. The last subscriber
// leaving stops the hub.
func TestHubFollowsTheHost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	l := storage.Layout{Root: dir}
	h := NewHub(Dialer{Layout: l}, Unknown, 10*time.Millisecond, nil)
	w := h.Subscribe("", false)
	testkit.WaitUntil(t, "the hub to find no host", func() bool { return h.Mode() == NoHost })
	woken(w)

	eng, err := host.Open(host.Options{Layout: l, Load: func(string) (workflow.Workflow, error) { return nil, errors.New("none") }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- eng.Serve(ctx) }()
	testkit.WaitUntil(t, "the hub to open the host's change stream", func() bool { return h.Mode() == Live })
	testkit.WaitUntil(t, "the subscriber to be woken as the stream began", func() bool { return woken(w) })

	cancel()
	if err := <-served; err != nil {
		t.Fatalf("host: %v", err)
	}
	testkit.WaitUntil(t, "the subscriber to be woken as the stream ended", func() bool { return woken(w) })
	testkit.WaitUntil(t, "the hub to find no host again", func() bool { return h.Mode() == NoHost })

	w.Close()
	h.mu.Lock()
	stopped, mode := h.stop == nil, h.mode
	h.mu.Unlock()
	if !stopped || mode != Unknown {
		t.Fatalf("after the last subscriber left: stopped %v, mode %v", stopped, mode)
	}
}
