package host

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/executor"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/shared/testkit"
)

// startProcess starts a process that lives until the test ends (or it is
// stopped) and returns it.
func startProcess(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// startOriginalWorker starts a process whose arguments are those the
// original engine starts its worker of bundle with (node <worker script>
// <bundle path> <storage root> <hash>), a shell sleeping in its stead.
func startOriginalWorker(t *testing.T, l storage.Layout, bundle string) *exec.Cmd {
	return startProcess(t, "sh", "-c", "sleep 600; exit 0", "/opt/uncaged/dist/worker.js", l.BundleFile(bundle), l.Root, bundle)
}

// writeOriginalFiles lays out what the original writes while its worker
// runs thread id: the empty marker, and the worker record, byte for byte
// ({"pid":N,"port":N} and a newline, as JSON.stringify writes it).
func writeOriginalFiles(t *testing.T, l storage.Layout, bundle, id, worker string) {
	t.Helper()
	if id != "" {
		if err := os.MkdirAll(l.LogsDir(bundle), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(l.RunningMarker(bundle, id), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if worker != "" {
		if err := os.MkdirAll(filepath.Dir(l.WorkerFile(bundle)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(l.WorkerFile(bundle), []byte(worker), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// begun lists a thread of workflow name with one step done, as a worker
// of the original's would have left it, without running it here.
func (f *fixture) begun(name string) threads.Record {
	f.t.Helper()
	hash := strings.ToUpper(name + "0000000000000")[:13]
	th := executor.Thread{ID: fmt.Sprintf("06E%023d", time.Now().UnixNano()%1e18), BundleHash: hash, WorkflowName: name, Prompt: "p"}
	if err := f.host.exec.Begin(&th); err != nil {
		f.t.Fatal(err)
	}
	rec, err := threads.Resolve(f.l, th.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	return rec
}

// originalListStatus is the status the original's thread list gives an
// unfinished active thread (its rule, from its thread scan): a marker and
// a readable worker record with a live pid, or a marker and no readable
// record, is "running"; a marker and a dead pid is "failed".
func originalListStatus(l storage.Layout, bundle, id string) string {
	if _, err := os.Stat(l.RunningMarker(bundle, id)); err != nil {
		if workerPID(l, bundle) == 0 {
			return "failed"
		}
		return "active"
	}
	pid := workerPID(l, bundle)
	if pid == 0 {
		return "running"
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return "failed"
	}
	return "running"
}

// A thread the original engine's worker runs on a shared root is running
// here too: listed so, and a resume, kill, pause or removal is refused
// naming the worker, so that no step runs twice. Once the worker is gone,
// the marker it left means nothing: the thread is interrupted, and resumes.
func TestOriginalsRunningThread(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0, map[string]goFlow{"linear": {roles: []string{"a", "b"}}})
	store := cas.Open(f.l.CASDir())
	rec := f.begun("linear")
	id, bundle := rec.ThreadID, rec.BundleHash
	worker := startOriginalWorker(t, f.l, bundle)
	pid := worker.Process.Pid
	writeOriginalFiles(t, f.l, bundle, id, fmt.Sprintf(`{"pid":%d,"port":%d}`+"\n", pid, 45678))

	if got, _ := Sight(nil).Status(store, rec); got != threads.StatusRunning {
		t.Fatalf("status of the original's running thread = %s, want running", got)
	}
	named := fmt.Sprintf("the original engine's worker (pid %d) is running it", pid)
	for _, tc := range []struct {
		verb string
		do   func() error
	}{
		{"resume", func() error { return f.client.Resume(id) }},
		{"kill", func() error { return f.client.Kill(id) }},
		{"pause", func() error { return f.client.Pause(id) }},
		{"rm", func() error { return RemoveLines(f.l, rec, false) }},
		{"rm --force", func() error { return RemoveLines(f.l, rec, true) }},
	} {
		err := tc.do()
		if err == nil || !strings.Contains(err.Error(), named) {
			t.Fatalf("%s of the original's running thread = %v, want a refusal naming its worker", tc.verb, err)
		}
		now, rerr := threads.Resolve(f.l, id)
		if rerr != nil || now.Head != rec.Head || now.Source != threads.SourceActive {
			t.Fatalf("after a refused %s the thread is %+v, %v", tc.verb, now, rerr)
		}
		if list, _ := f.client.List(); len(list) != 0 {
			t.Fatalf("after a refused %s this host runs %+v", tc.verb, list)
		}
	}
	// Without a host the removal is refused the same way.
	f.stopHost()
	if err := RemoveLines(f.l, rec, true); !errors.Is(err, ErrRunningElsewhere) || !errors.Is(err, ErrLive) {
		t.Fatalf("removal without a host = %v", err)
	}
	// A host that opens the root leaves the live worker's marker alone.
	f.startHost(0)
	if _, err := os.Stat(f.l.RunningMarker(bundle, id)); err != nil {
		t.Fatalf("the live worker's marker went: %v", err)
	}

	// The worker dies: its marker and record stay, and mean nothing.
	_ = worker.Process.Kill()
	_ = worker.Wait()
	if got, _ := Sight(nil).Status(store, rec); got != threads.StatusInterrupted {
		t.Fatalf("status once the worker died = %s, want interrupted", got)
	}
	if err := f.client.Resume(id); err != nil {
		t.Fatal(err)
	}
	if got := f.chainRoles(f.finished(id).Head); got != "a,b,__end__" {
		t.Fatalf("resumed chain = %s", got)
	}
	if _, err := os.Stat(f.l.RunningMarker(bundle, id)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the thread finished here and its marker is still there: %v", err)
	}
}

// What the original's files say about a thread, case by case: only a
// marker with a live process that is the bundle's worker is running
// elsewhere.
func TestRunningElsewhereNeedsTheMarkerAndALiveWorker(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0, map[string]goFlow{"linear": {roles: []string{"a"}}})
	dead := startProcess(t, "sleep", "600")
	deadPID := dead.Process.Pid
	_ = dead.Process.Kill()
	_ = dead.Wait()
	other := startProcess(t, "sleep", "600") // alive, but no worker of the bundle: a reused pid
	for _, tc := range []struct {
		name   string
		marker bool
		worker func(l storage.Layout, bundle string) string // the record's bytes
		want   threads.Status
	}{
		{"marker and a live worker", true, func(l storage.Layout, b string) string {
			return fmt.Sprintf(`{"pid":%d,"port":1}`+"\n", startOriginalWorker(t, l, b).Process.Pid)
		}, threads.StatusRunning},
		{"a live worker but no marker (it runs other threads)", false, func(l storage.Layout, b string) string {
			return fmt.Sprintf(`{"pid":%d,"port":1}`+"\n", startOriginalWorker(t, l, b).Process.Pid)
		}, threads.StatusInterrupted},
		{"marker and no worker record (left by a host that died)", true, nil, threads.StatusInterrupted},
		{"marker and a dead worker", true, func(storage.Layout, string) string {
			return fmt.Sprintf(`{"pid":%d,"port":1}`+"\n", deadPID)
		}, threads.StatusInterrupted},
		{"marker and a live process that is not the worker", true, func(storage.Layout, string) string {
			return fmt.Sprintf(`{"pid":%d,"port":1}`+"\n", other.Process.Pid)
		}, threads.StatusInterrupted},
		{"marker and this very process", true, func(storage.Layout, string) string {
			return fmt.Sprintf(`{"pid":%d,"port":1}`+"\n", os.Getpid())
		}, threads.StatusInterrupted},
		{"marker and a record that is not one", true, func(storage.Layout, string) string { return `{"pid":"x"` }, threads.StatusInterrupted},
		{"marker and a pid of zero", true, func(storage.Layout, string) string { return `{"pid":0,"port":0}` + "\n" }, threads.StatusInterrupted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := f.begun("linear")
			l := storage.Layout{Root: t.TempDir()}
			// Each case gets a root of its own for the original's files,
			// sharing the fixture's CAS through the record it reads.
			if err := os.Symlink(f.l.CASDir(), l.CASDir()); err != nil {
				t.Fatal(err)
			}
			worker := ""
			if tc.worker != nil {
				worker = tc.worker(l, rec.BundleHash)
			}
			id := ""
			if tc.marker {
				id = rec.ThreadID
			}
			writeOriginalFiles(t, l, rec.BundleHash, id, worker)
			got, damage := Sight(nil).Status(cas.Open(l.CASDir()), rec)
			if damage != nil || got != tc.want {
				t.Fatalf("status = %s (%v), want %s", got, damage, tc.want)
			}
		})
	}
}

// While this engine runs a thread it writes the original's marker, and
// no worker record, so the original's thread list says running; the
// marker goes when the thread stops, however it stops. A marker a host
// that died left is cleared by the next host.
func TestOurRunningThreadIsRunningForTheOriginal(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var waiting atomic.Int32
	f := newFixture(t, 0, map[string]goFlow{"linear": {roles: []string{"a", "wait"}, release: release, waiting: &waiting}})
	bundle := strings.ToUpper("linear0000000")
	for _, end := range []string{"finished", "killed", "host stopped"} {
		id, err := f.client.Run(RunRequest{Workflow: "linear"})
		if err != nil {
			t.Fatal(err)
		}
		f.waitFor("the role to run", func() bool { return waiting.Load() > 0 })
		waiting.Store(0)
		marker := f.l.RunningMarker(bundle, id)
		if fi, err := os.Stat(marker); err != nil || fi.Size() != 0 {
			t.Fatalf("%s: marker while running = %v, %v; want an empty file", end, fi, err)
		}
		if _, err := os.Stat(f.l.WorkerFile(bundle)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: a worker record was written: %v", end, err)
		}
		if got := originalListStatus(f.l, bundle, id); got != "running" {
			t.Fatalf("%s: the original's list would say %s", end, got)
		}
		switch end {
		case "finished":
			release <- struct{}{}
			f.finished(id)
		case "killed":
			if err := f.client.Kill(id); err != nil {
				t.Fatal(err)
			}
			f.finished(id)
		case "host stopped":
			f.stopHost()
		}
		if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: the marker is still there: %v", end, err)
		}
		if end == "host stopped" {
			// A host that dies cannot remove it: the next one does.
			if err := os.WriteFile(marker, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			f.startHost(0)
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a new host left the marker of a host that died: %v", err)
			}
		}
	}
}

// Which pid is the original's worker of a bundle: a live process whose
// arguments name the bundle, or one just started whose arguments cannot
// be read yet; not an exited one waiting to be collected (a zombie, whose
// command line is empty too), another program, or a pid that is gone.
func TestWhichProcessIsTheOriginalsWorker(t *testing.T) {
	t.Parallel()
	l := storage.Layout{Root: t.TempDir()}
	const bundle = "b1a2"
	worker := startOriginalWorker(t, l, bundle).Process.Pid
	other := startProcess(t, "sh", "-c", "sleep 600; exit 0", "not-the-worker").Process.Pid
	exited := startProcess(t, "sh", "-c", "exit 0").Process.Pid // not collected until cleanup
	testkit.WaitUntil(t, "the exited process to be a zombie", func() bool { return isZombie(exited) })
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		pid  int
		want bool
	}{
		{"the worker", worker, true},
		{"another program", other, false},
		{"a zombie", exited, false},
		{"a pid that is gone", gone.Process.Pid, false},
		{"no pid", 0, false},
	} {
		if got := isOriginalWorker(l, tc.pid, bundle); got != tc.want {
			t.Errorf("%s (pid %d): isOriginalWorker = %v, want %v", tc.name, tc.pid, got, tc.want)
		}
	}
	if isZombie(worker) || isZombie(other) {
		t.Error("a live process taken for a zombie")
	}
}
