package host

import (
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// A thread starts only if the host, closing, will wait for it: one whose
// start was asked for just before the host began closing, and that reaches
// the start once Close is under way, is refused, not started behind the
// wait for the running threads — for a run and for a fork.
func TestAThreadStartsOnlyIfTheClosingHostWaitsForIt(t *testing.T) {
	t.Parallel()
	for _, how := range []struct {
		name  string
		begin func(f *fixture, source string) error
	}{
		{"run", func(f *fixture, _ string) error {
			_, err := f.host.Run(RunRequest{Workflow: "steps", Prompt: "p"})
			return err
		}},
		{"fork", func(f *fixture, source string) error {
			_, err := f.host.Fork(source, ForkRequest{FromRole: "a"})
			return err
		}},
	} {
		t.Run(how.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 0, map[string]goFlow{"steps": {roles: []string{"a", "b"}}})
			source, err := f.host.Run(RunRequest{Workflow: "steps", Prompt: "p"})
			if err != nil {
				t.Fatal(err)
			}
			f.finished(source)
			if err := os.WriteFile(f.l.BundleFile("STEPS00000000"), nil, 0o644); err != nil { // what a fork checks is there
				t.Fatal(err)
			}
			// The start is held where the host loads the workflow: after it
			// was let in, before the thread is counted.
			loading, proceed := make(chan struct{}), make(chan struct{})
			var once sync.Once
			f.onLoad = func() { once.Do(func() { close(loading); <-proceed }) }
			begun := make(chan error, 1)
			go func() { begun <- how.begin(f, source) }()
			<-loading
			closed := make(chan struct{})
			go func() { defer close(closed); f.stopHost() }()
			testkit.WaitUntil(t, "the host to be closing", func() bool { return errors.Is(f.host.admit(), ErrStopping) })
			close(proceed)
			if err := <-begun; !errors.Is(err, ErrStopping) {
				t.Fatalf("a thread asked for as the host closed: %v, want %v", err, ErrStopping)
			}
			<-closed
			if left := f.host.List(); len(left) != 0 {
				t.Fatalf("the host closed with threads running: %+v", left)
			}
		})
	}
}
