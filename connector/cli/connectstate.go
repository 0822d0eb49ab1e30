package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/uncaged/workflow/connector/link"
	"github.com/uncaged/workflow/engine/atomicfile"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/storage"
)

// ConnectState is what a running `connect` records in connect.json under
// the storage root, so `status` (another process) can tell a person what
// the link is doing.
type ConnectState struct {
	Name    string `json:"name"`
	Gateway string `json:"gateway"`
	// State is connecting, connected, retrying, failed (link's states) or
	// stopped.
	State string `json:"state"`
	// Detail is the last failure while connecting or retrying, or why
	// connect gave up (failed).
	Detail string `json:"detail,omitempty"`
	// ExitCode is the exit code connect gave up with (failed only).
	ExitCode int `json:"exitCode,omitempty"`
	// Since is when State began (ms since the epoch).
	Since int64 `json:"since"`
	PID   int   `json:"pid"`
}

// connectStopped is the state a connect leaves behind when it exits.
const connectStopped = "stopped"

func connectStateFile(l storage.Layout) string { return filepath.Join(l.Root, "connect.json") }

// connectLockFile is held (flock) by the connect that owns connect.json for
// as long as it runs. The kernel drops the lock with the process, so a
// reader can tell a live connect from a stale file without trusting a pid
// that may have been reused.
func connectLockFile(l storage.Layout) string { return filepath.Join(l.Root, "connect.lock") }

// connectRecorder writes connect.json for one connect process, which
// holds connect.lock while it runs.
type connectRecorder struct {
	l    storage.Layout
	lock *os.File // nil once closed

	mu    sync.Mutex
	state ConnectState
}

// recordConnect claims the root for this connect: connect.lock, and
// connect.json, written at once so that another connect can name this
// one. Only one connect may serve a root: a second one, of the same
// instance by definition, would replace the first at the gateway, and
// the first the second, without end. So when another connect holds the
// root this one is refused (*link.PermanentError of KindRootInUse) with a
// message naming it. A connect that died left no lock (the kernel drops
// it), whatever its connect.json says, and does not stand in the way.
func recordConnect(l storage.Layout, name, gateway string) (*connectRecorder, error) {
	f, err := atomicfile.TryLock(connectLockFile(l))
	if errors.Is(err, atomicfile.ErrLocked) {
		return nil, rootInUse(l)
	}
	if err != nil {
		return nil, err
	}
	r := &connectRecorder{l: l, lock: f, state: ConnectState{Name: name, Gateway: gateway, PID: os.Getpid()}}
	r.set(link.StateConnecting, "")
	return r, nil
}

// holderWait bounds how long a refused connect waits for the connect
// holding the root to write its record: it does so right after taking the
// lock, so this is only the moment between the two.
const holderWait = 2 * time.Second

// rootInUse is the refusal of a second connect on l, naming the first.
func rootInUse(l storage.Layout) error {
	msg := "another connect already serves this storage root (" + l.Root + ")"
	holder, known := connectHolder(l)
	stop := "stop that one first (fuser " + connectLockFile(l) + " names its pid)"
	if known {
		msg += fmt.Sprintf(": pid %d, %q to %s, %s since %s", holder.PID, holder.Name, holder.Gateway, holder.State, time.UnixMilli(holder.Since).Local().Format(time.RFC3339))
		stop = fmt.Sprintf("stop that one first (kill %d)", holder.PID)
		if runsAsService(holder.PID) {
			stop = "stop that one first (it runs as the systemd service: systemctl --user stop " + ServiceUnitName + ")"
		}
	}
	return &link.PermanentError{Kind: link.KindRootInUse, Message: msg +
		". Only one connect may serve a root (a second would keep replacing it at the gateway): to run this one instead, " +
		stop + "; to serve another name as well, give it a storage root of its own (--storage-root)"}
}

// connectHolder is the record of the live connect holding l's lock. A
// record left by a connect that died (its pid gone) is not it: the holder
// has yet to write its own, and is waited for up to holderWait.
func connectHolder(l storage.Layout) (ConnectState, bool) {
	deadline := time.Now().Add(holderWait)
	for {
		st, ok, err := readConnectStatus(l)
		if err == nil && ok && host.ProcessExists(st.PID) {
			return st.ConnectState, true
		}
		if !atomicfile.Held(connectLockFile(l)) || time.Now().After(deadline) {
			return ConnectState{}, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runsAsService reports whether pid runs in the unit `service install`
// writes (its cgroup says so; false where there is no /proc).
func runsAsService(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	return err == nil && strings.Contains(string(b), "/"+ServiceUnitName)
}

// set records a state change; link.Options.OnState calls it. A failed
// write is not worth stopping the link for: status is a convenience.
func (r *connectRecorder) set(state, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if state != link.StateFailed {
		r.state.ExitCode = 0
	}
	if r.lock == nil {
		return // closed: the root is another connect's to record
	}
	r.state.State, r.state.Detail, r.state.Since = state, detail, time.Now().UnixMilli()
	b, err := json.MarshalIndent(r.state, "", "  ")
	if err != nil {
		return
	}
	_ = atomicfile.Write(connectStateFile(r.l), append(b, '\n'), 0o644)
}

// fail records that connect gave up, why and with which exit code; close
// keeps that record rather than a plain stop.
func (r *connectRecorder) fail(detail string, code int) {
	r.mu.Lock()
	r.state.ExitCode = code
	r.mu.Unlock()
	r.set(link.StateFailed, detail)
}

// close records that the link stopped, unless it failed, and lets the
// next connect claim the file.
func (r *connectRecorder) close() {
	r.mu.Lock()
	closed, failed := r.lock == nil, r.state.State == link.StateFailed
	r.mu.Unlock()
	if closed {
		return
	}
	if !failed {
		r.set(connectStopped, "")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.lock.Close() // never written: closing only drops the flock
	r.lock = nil
}

// connectStatus is what status shows about connect: the last record and
// whether the process that wrote it still runs.
type connectStatus struct {
	ConnectState
	Running bool `json:"running"`
}

// readConnectStatus reads connect.json; ok is false when no connect has
// ever run on this root. A record whose writer is gone is reported as
// not running, whatever state it claims.
func readConnectStatus(l storage.Layout) (st connectStatus, ok bool, err error) {
	b, err := os.ReadFile(connectStateFile(l))
	if errors.Is(err, fs.ErrNotExist) {
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	if err := json.Unmarshal(b, &st.ConnectState); err != nil {
		return st, false, fmt.Errorf("%s: %w", connectStateFile(l), err)
	}
	st.Running = atomicfile.Held(connectLockFile(l))
	return st, true, nil
}
