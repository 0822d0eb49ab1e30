package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/uncaged/workflow/connector/link"
	"github.com/uncaged/workflow/engine/atomicfile"
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

// connectRecorder writes connect.json for one connect process.
type connectRecorder struct {
	l    storage.Layout
	lock *os.File // nil: another connect owns the file; record nothing

	mu    sync.Mutex
	state ConnectState
}

// recordConnect claims connect.json for this process. When another connect
// already runs on the same root, its record stays and this one records
// nothing: one file describes one link, and a second link is rare.
func recordConnect(l storage.Layout, name, gateway string) (*connectRecorder, error) {
	r := &connectRecorder{l: l, state: ConnectState{Name: name, Gateway: gateway, PID: os.Getpid()}}
	f, err := atomicfile.TryLock(connectLockFile(l))
	if errors.Is(err, atomicfile.ErrLocked) {
		return r, nil
	}
	if err != nil {
		return nil, err
	}
	r.lock = f
	return r, nil
}

// set records a state change; link.Options.OnState calls it. A failed
// write is not worth stopping the link for: status is a convenience.
func (r *connectRecorder) set(state, detail string) {
	if r.lock == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if state != link.StateFailed {
		r.state.ExitCode = 0
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
	if r.lock == nil {
		return
	}
	r.mu.Lock()
	failed := r.state.State == link.StateFailed
	r.mu.Unlock()
	if !failed {
		r.set(connectStopped, "")
	}
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
