package host

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// A storage root may be shared with the original TypeScript engine, both
// running at once. The original runs a bundle's threads in one worker
// process, which it records in workers/<bundle>.json ({"pid":N,"port":N},
// the port its control socket listens on), and marks each thread while
// the worker runs it with an empty logs/<bundle>/<id>.running.
//
// Here, a thread with that marker whose bundle's worker is a live process
// is running elsewhere: every status says running, and this engine's
// host refuses to resume (which would run its steps a second time), kill
// or remove it. A marker without a live worker was left by a process that
// is gone and means nothing.
//
// The other way round, while this engine's host runs a thread it writes
// the same marker and removes it when the thread stops, so the original's
// thread list and ps see the thread running. It writes no worker record:
// the original would send its control commands to the record's port,
// and reuse or replace the record as its own worker's. With the marker
// alone the original lists the thread as running, and its kill, pause and
// resume answer that no worker control file exists (or, when a worker of
// its own runs other threads of the bundle, that the worker does not know
// the thread), touching nothing. A marker left by a host that died is
// cleared by the next host that opens the root (clearStaleMarkers).

// ErrRunningElsewhere is matched by a request refused because the
// original engine's worker runs the thread.
var ErrRunningElsewhere = errors.New("the original engine is running this thread")

// elsewhereError says that the original's worker pid runs thread id, and
// what to do instead of doing here.
func elsewhereError(id string, pid int, refused, instead string) error {
	return &runningElsewhereError{fmt.Sprintf("%s thread %s: the original engine's worker (pid %d) is running it on this storage root; %s",
		refused, id, pid, instead)}
}

// runningElsewhereError matches ErrRunningElsewhere, and ErrLive: a thread
// that runs is not removed, wherever it runs.
type runningElsewhereError struct{ msg string }

func (e *runningElsewhereError) Error() string { return e.msg }

func (e *runningElsewhereError) Is(target error) bool {
	return target == ErrRunningElsewhere || target == ErrLive
}

// RunningElsewhere returns the pid of the original engine's worker that
// runs thread id of bundle, or 0 when none does. It does when the thread's
// running marker exists and workers/<bundle>.json names a live process
// that can be the original's worker: not this process nor this root's
// engine host, and, where the process's command line can be read, one
// that names the bundle (the original starts its worker with the bundle's
// path and hash as arguments), so that a pid the system gave to another
// program since is not taken for it. Only files are read: any process may
// call it, with or without a host.
func RunningElsewhere(l storage.Layout, bundle, id string) int {
	if _, err := os.Lstat(l.RunningMarker(bundle, id)); err != nil {
		return 0
	}
	pid := workerPID(l, bundle)
	if pid <= 0 || pid == os.Getpid() || !isOriginalWorker(l, pid, bundle) {
		return 0
	}
	return pid
}

// workerPID reads the pid of a bundle's worker record; 0 when there is no
// record or it is not one.
func workerPID(l storage.Layout, bundle string) int {
	b, err := os.ReadFile(l.WorkerFile(bundle))
	if err != nil {
		return 0
	}
	var rec struct {
		PID json.Number `json:"pid"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return 0
	}
	pid, err := strconv.Atoi(rec.PID.String())
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// notedHostPID is the pid the root's engine host, or the last one, noted
// in its lock file; 0 when there is none.
func notedHostPID(l storage.Layout) int {
	b, err := os.ReadFile(LockFile(l))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// ProcessExists says whether a process with this pid exists: signal 0
// reaches it, or it is another user's (EPERM).
func ProcessExists(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// isOriginalWorker says whether pid is a live process that may be the
// original's worker of bundle in root l.
func isOriginalWorker(l storage.Layout, pid int, bundle string) bool {
	if !ProcessExists(pid) {
		return false
	}
	if runtime.GOOS != "linux" {
		// No portable way to read another process's arguments: only the
		// root's own host is told apart.
		return pid != notedHostPID(l)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false // it has just exited
	case err != nil:
		return true // hidden (a hidepid mount): liveness is all there is
	}
	if len(cmdline) == 0 {
		// Empty: a zombie, which is no worker any more, or a process in the
		// middle of its exec (its new arguments not yet in place: the
		// moment a worker has just been started), which may be one.
		return !isZombie(pid)
	}
	for _, arg := range bytes.Split(cmdline, []byte{0}) {
		if bytes.Contains(arg, []byte(bundle)) {
			return true
		}
	}
	return false
}

// isZombie says whether pid has exited and waits for its parent to
// collect it (state Z in /proc/<pid>/stat).
func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, fs.ErrNotExist) // gone meanwhile
	}
	// The state follows the command name, which is in parentheses and
	// may itself hold ") ".
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// elsewhere says what the original engine's files mean for an unfinished
// thread this host does not run: ExecutingElsewhere when its worker runs
// it, else NotExecuting.
func elsewhere(l storage.Layout, rec threads.Record) threads.Liveness {
	if rec.Source == threads.SourceActive && RunningElsewhere(l, rec.BundleHash, rec.ThreadID) != 0 {
		return threads.ExecutingElsewhere
	}
	return threads.NotExecuting
}

// markRunning writes the running marker of a thread this host starts to
// run, so that the original engine sees it running. A marker that cannot
// be written only costs the original's view, so it is logged.
func markRunning(l storage.Layout, bundle, id string, log *slog.Logger) {
	p := l.RunningMarker(bundle, id)
	err := os.WriteFile(p, nil, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(l.LogsDir(bundle), 0o755); err == nil {
			err = os.WriteFile(p, nil, 0o644)
		}
	}
	if err != nil {
		log.Warn("engine host: cannot mark the thread running for the original engine", "thread", id, "path", p, "err", err)
	}
}

// unmarkRunning removes the marker markRunning wrote, once the thread has
// stopped.
func unmarkRunning(l storage.Layout, bundle, id string, log *slog.Logger) {
	p := l.RunningMarker(bundle, id)
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Warn("engine host: cannot remove the thread's running marker; the original engine will list it as running", "thread", id, "path", p, "err", err)
	}
}

// clearStaleMarkers removes the running markers of unfinished threads that
// no worker of the original runs: a host of this engine that died left
// them (the host that opens the root runs nothing yet), or an original
// worker that died did. The original would list those threads as running
// for ever; this engine already reads such a marker as nothing. Done when
// a host opens the root; what cannot be read is left as it is.
func clearStaleMarkers(l storage.Layout, log *slog.Logger) {
	bundles, err := threads.BundleHashes(l)
	if err != nil {
		return
	}
	for _, b := range bundles {
		idx, _, err := threads.ReadIndexTolerant(l.BundleDir(b))
		if err != nil {
			continue
		}
		for id := range idx {
			if threads.CheckRef(id) != nil {
				continue // not a name a marker can have
			}
			if _, err := os.Lstat(l.RunningMarker(b, id)); err != nil || RunningElsewhere(l, b, id) != 0 {
				continue
			}
			unmarkRunning(l, b, id, log)
		}
	}
}
