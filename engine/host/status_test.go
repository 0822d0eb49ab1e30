package host

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/uncaged/workflow/engine/threads"
)

// A thread whose line names a head that is gone from the CAS is neither
// called finished nor resumed: resume and pause refuse, saying why, and
// nothing runs again — a resume would otherwise start the thread over on
// top of a head it cannot read.
func TestAThreadWhoseHeadIsGoneIsNeitherResumedNorCalledFinished(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var starts atomic.Int32
	f := newFixture(t, 0, map[string]goFlow{
		"linear": {roles: []string{"a", "wait", "b"}, release: release, starts: &starts},
		"short":  {roles: []string{"a"}, starts: &starts},
	})
	interrupted, err := f.client.Run(RunRequest{Workflow: "linear"})
	if err != nil {
		t.Fatal(err)
	}
	f.waitFor("first step", func() bool {
		r, _ := threads.Resolve(f.l, interrupted)
		return r.Head != r.Start
	})
	done, err := f.client.Run(RunRequest{Workflow: "short"})
	if err != nil {
		t.Fatal(err)
	}
	f.finished(done)
	f.stopHost()
	close(release)
	for _, id := range []string{interrupted, done} {
		rec, err := threads.Resolve(f.l, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(f.l.CASDir(), rec.Head+".txt")); err != nil {
			t.Fatal(err)
		}
	}
	f.startHost(0)
	for _, id := range []string{interrupted, done} {
		for verb, act := range map[string]func(string) error{"resume": f.client.Resume, "pause": f.client.Pause} {
			err := act(id)
			if err == nil || !strings.Contains(err.Error(), "is not in the CAS, so its status cannot be known") {
				t.Errorf("%s of %s: %v; want the missing head named", verb, id, err)
			}
		}
	}
	if n := starts.Load(); n != 2 {
		t.Fatalf("%d runs started, want the first 2 only", n)
	}
}
