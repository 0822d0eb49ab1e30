package host

import (
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/uncaged/workflow/engine/atomicfile"
	"github.com/uncaged/workflow/engine/executor"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// A thread's liveness is the host's to decide, so removing one goes
// through it: the host that runs a thread, or holds it paused, is the only
// one that can say so, stop it, and keep a resume from starting it while
// its lines go. With no host, the root's host lock keeps one from starting
// meanwhile.

// ErrLive is matched by a removal refused because the thread is running,
// pausing or paused.
var ErrLive = errors.New("a running or paused thread is not removed")

// RemoveRequest asks the host to remove a thread's index and history
// lines.
type RemoveRequest struct {
	// BundleHash is the bundle whose indexes hold the thread.
	BundleHash string `json:"bundleHash"`
	// Force kills a running or paused thread first, and waits until it
	// has stopped.
	Force bool `json:"force"`
}

// stopWait bounds how long a forced removal waits for a killed thread to
// stop; nothing is removed when it does not.
const stopWait = 30 * time.Second

// RemoveLines removes thread rec's index and history lines
// (threads.RemoveLines) once nothing runs it, and keeps it from starting
// until they are gone. A thread the root's host runs, pauses or holds
// paused is refused with its status (ErrLive), unless force: then the
// host kills it and waits until it stopped. One the original engine's
// worker runs (RunningElsewhere) is refused even with force
// (ErrRunningElsewhere and ErrLive): it cannot be stopped from here, and
// the worker would write its lines back. With a host, the host does all
// this under its own decision about the thread, which resume and kill
// wait for; without one, the root's host lock is held, so no host starts
// and resumes the thread meanwhile.
func RemoveLines(l storage.Layout, rec threads.Record, force bool) error {
	req := RemoveRequest{BundleHash: rec.BundleHash, Force: force}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := Dial(l)
		if err == nil {
			defer c.Close()
			err := c.do(http.MethodPost, "/v1/threads/"+rec.ThreadID+"/remove", req, nil)
			if errors.Is(err, errNoRoute) {
				return fmt.Errorf("the engine host running on this root is older than `thread rm`, so it cannot say whether the thread runs; run `uncaged-workflow engine restart` and try again")
			}
			return err
		}
		if errors.Is(err, ErrRefused) {
			return err
		}
		lock, err := atomicfile.TryLock(LockFile(l))
		if errors.Is(err, atomicfile.ErrLocked) {
			// A host holds the root but does not answer yet: it is
			// starting or stopping. Ask it again.
			if time.Now().After(deadline) {
				return fmt.Errorf("an engine host holds this storage root but does not answer (see %s); nothing was removed", LogFile(l))
			}
			time.Sleep(25 * time.Millisecond)
			continue
		}
		if err != nil {
			return err
		}
		defer func() {
			// Only held, never written: closing drops the lock.
			_ = lock.Close()
		}()
		return removeLines(l, rec.BundleHash, rec.ThreadID)
	}
}

// removeLines removes the lines of a thread no host of this engine runs,
// unless the original engine's worker runs it.
func removeLines(l storage.Layout, bundle, id string) error {
	if pid := RunningElsewhere(l, bundle, id); pid != 0 {
		return elsewhereError(id, pid, "cannot remove", "stop it with the original's `thread kill "+id+"` first")
	}
	_, err := threads.RemoveLines(l.BundleDir(bundle), id)
	return err
}

// testHookRemoveWaits, set by tests, is called when a removal waits for
// another request's decision about the thread.
var testHookRemoveWaits func()

// Remove removes thread id's lines (see RemoveLines) holding the host's
// decision about the thread, so that a resume or kill waits until they
// are gone and then finds no thread to start.
func (h *Host) Remove(id string, req RemoveRequest) error {
	if b := req.BundleHash; b == "" || b == "." || b == ".." || filepath.Base(b) != b {
		return fmt.Errorf("invalid bundle %q: a directory name under bundles/", b)
	}
	for {
		h.mu.Lock()
		hd, c := h.running[id], h.admitting[id]
		switch {
		case c != nil: // a resume or kill is deciding: see what it decided
			h.mu.Unlock()
			if testHookRemoveWaits != nil {
				testHookRemoveWaits()
			}
			<-c.done
			continue
		case hd != nil:
			status := hd.gate.Status()
			h.mu.Unlock()
			if !req.Force {
				return fmt.Errorf("%w: thread %s is %s; kill it first (`thread kill %s`), or remove it with --force, which kills it", ErrLive, id, status, id)
			}
			hd.cancel(executor.KilledBy("`thread rm --force`, to remove it"))
			select {
			case <-hd.done:
			case <-time.After(stopWait):
				return fmt.Errorf("thread %s did not stop within %s of being killed; nothing was removed", id, stopWait)
			}
			continue // it may have been resumed since: look again
		}
		release := h.claimLocked(id, removing)
		h.mu.Unlock()
		defer release()
		if err := removeLines(h.opts.Layout, req.BundleHash, id); err != nil {
			return err
		}
		h.publish(Change{Kind: ChangeRemoved, ThreadID: id, BundleHash: req.BundleHash})
		return nil
	}
}

// serveRemove answers POST /v1/threads/{id}/remove.
func (h *Host) serveRemove(w http.ResponseWriter, r *http.Request) {
	var req RemoveRequest
	if !readJSON(w, r, &req) {
		return
	}
	// Any id a person can name: threads this engine did not start (the
	// original's, hand-made ones) are removed too.
	id := r.PathValue("id")
	if err := threads.CheckRef(id); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{err.Error()})
		return
	}
	if err := h.Remove(id, req); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}
