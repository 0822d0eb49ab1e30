package host

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/uncaged/workflow/engine/executor"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/workflow"
)

// Pause, resume and kill may race each other, and the thread's own end.
// Each decides under Host.mu, from the state the thread is in at that
// moment — running (paused or not, being killed or not), being started by
// a resume or ended by a kill (a claim), or neither — so that exactly one
// of two requests wins, and the one that loses says what it lost to: the
// resume or kill in progress, the running thread, the pause in force, the
// thread's end. Nothing is decided from what a request saw before.

// verb is what a claim is doing to a thread, as a message says it.
type verb string

const (
	resuming verb = "resumed"
	killing  verb = "killed"
	removing verb = "removed"
)

// claim is a request deciding about a thread no host runs: a resume
// starting it, or a kill ending it without running it. done is closed
// once the thread is registered (start) or ended.
type claim struct {
	by   verb
	done chan struct{}
}

// claimLocked records that the caller decides about id; the caller holds
// h.mu and must call release once the thread is registered or ended.
func (h *Host) claimLocked(id string, by verb) (release func()) {
	c := &claim{by: by, done: make(chan struct{})}
	h.admitting[id] = c
	return func() {
		h.mu.Lock()
		delete(h.admitting, id)
		h.mu.Unlock()
		close(c.done)
	}
}

// lostTo is the error of a request that another, in progress, got ahead of.
func lostTo(id string, by verb) error {
	return fmt.Errorf("thread %s is already being %s by another request", id, by)
}

// maxRequester bounds the name of who killed a thread, which goes into
// its summary.
const maxRequester = 200

// Kill ends a thread with return code 130; its summary says where it was
// and who killed it (req.By). A running thread is interrupted (its role's
// context is cancelled; JS is interrupted, child processes killed) and
// Kill waits for its __end__ to be written; an interrupted thread is
// closed the same way without running anything. A resume starting the
// thread is waited for, and what it starts is killed. A thread the
// original engine's worker runs is refused (ErrRunningElsewhere).
func (h *Host) Kill(id string, req KillRequest) error {
	by := strings.Join(strings.Fields(req.By), " ")
	if r := []rune(by); len(r) > maxRequester {
		by = string(r[:maxRequester]) + "…"
	}
	for {
		h.mu.Lock()
		hd, c := h.running[id], h.admitting[id]
		switch {
		case hd != nil && hd.killed, c != nil && c.by == killing:
			h.mu.Unlock()
			return lostTo(id, killing)
		case hd != nil:
			hd.killed = true
			h.mu.Unlock()
			hd.cancel(executor.KilledBy(by))
			select {
			case <-hd.done:
			case <-time.After(10 * time.Second):
				return fmt.Errorf("thread %s did not stop within 10s", id)
			}
			return nil
		case c != nil: // a resume is starting it: kill what it starts
			h.mu.Unlock()
			<-c.done
			continue
		}
		release := h.claimLocked(id, killing)
		h.mu.Unlock()
		defer release()
		return h.killIdle(id, by)
	}
}

// killIdle ends a thread no host runs on behalf of by; the caller has
// claimed it.
func (h *Host) killIdle(id, by string) error {
	_, wf, t, err := h.resumable(id, "cannot kill", "kill it with the original's `thread kill "+id+"`")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(executor.KilledBy(by))
	_, err = h.exec.Run(ctx, wf, t, executor.Env{OnStep: h.stepPublisher(t.ID, t.BundleHash)})
	// Its __end__ is written and the thread moved to the history (or the
	// run failed, and nothing more will be written).
	h.publish(Change{Kind: ChangeEnded, ThreadID: t.ID, BundleHash: t.BundleHash})
	return err
}

// Pause holds a running thread once its current step is written: until
// then it is pausing (executor.PauseGate). A resume starting the thread is
// waited for, and what it starts is paused.
func (h *Host) Pause(id string) error {
	for {
		h.mu.Lock()
		hd, c := h.running[id], h.admitting[id]
		switch {
		case hd != nil && hd.killed, c != nil && c.by == killing:
			h.mu.Unlock()
			return lostTo(id, killing)
		case hd != nil:
			// executor.ErrAlreadyPaused or ErrAlreadyPausing: another
			// pause is in force or on its way.
			err := hd.gate.Pause()
			if err == nil {
				hd.resumed = false
			}
			h.mu.Unlock()
			return err
		case c != nil:
			h.mu.Unlock()
			<-c.done
			continue
		}
		h.mu.Unlock()
		return h.notRunning(id)
	}
}

// Resume lets a paused thread go on, cancels the pause of a pausing one,
// or restarts an interrupted one (whose host died) from its last
// completed step; either way with the caller's environment from then on.
// A thread the original engine's worker runs is refused: it would run
// twice.
func (h *Host) Resume(id string, req ResumeRequest) error {
	if err := h.admit(); err != nil {
		return err
	}
	env, err := h.threadEnv(req.Caller)
	if err != nil {
		return err
	}
	h.mu.Lock()
	hd, c := h.running[id], h.admitting[id]
	switch {
	case hd != nil && hd.killed:
		h.mu.Unlock()
		return lostTo(id, killing)
	case hd != nil && hd.gate.Status() == threads.StatusRunning:
		resumed := hd.resumed
		h.mu.Unlock()
		if resumed {
			return fmt.Errorf("thread %s is already running: another request resumed it", id)
		}
		return fmt.Errorf("%w: %s is running", executor.ErrNotPaused, id)
	case hd != nil:
		hd.env.Store(env)
		err := hd.gate.Resume() // paused or pausing, and no one else opens the gate without h.mu
		hd.resumed = err == nil
		h.mu.Unlock()
		return err
	case c != nil:
		h.mu.Unlock()
		return lostTo(id, c.by)
	}
	release := h.claimLocked(id, resuming)
	h.mu.Unlock()
	defer release()
	_, wf, t, err := h.resumable(id, "cannot resume", "resuming it here would run its steps a second time. Wait until it ends there, or stop it with the original's `thread kill "+id+"` and resume it then")
	if err != nil {
		return err
	}
	return h.start(wf, t, env, true, nil)
}

// resumable loads an unfinished thread that no host of this engine runs,
// to run or to kill it: one the original engine's worker runs is refused
// (ErrRunningElsewhere), the error saying "<refused> thread <id>" and
// what to do instead.
func (h *Host) resumable(id, refused, instead string) (threads.Record, workflow.Workflow, executor.Thread, error) {
	rec, err := threads.Resolve(h.opts.Layout, id)
	if err != nil {
		return rec, nil, executor.Thread{}, err
	}
	if err := h.ended(rec); err != nil {
		return rec, nil, executor.Thread{}, err
	}
	if pid := RunningElsewhere(h.opts.Layout, rec.BundleHash, rec.ThreadID); pid != 0 {
		return rec, nil, executor.Thread{}, elsewhereError(id, pid, refused, instead)
	}
	t, err := h.exec.ResumeThread(rec)
	if err != nil {
		return rec, nil, t, err
	}
	wf, err := h.opts.Load(rec.BundleHash)
	return rec, wf, t, err
}

// notRunning says why a thread this host does not run cannot be paused:
// it has ended, the original engine's worker runs it, or it was
// interrupted.
func (h *Host) notRunning(id string) error {
	rec, err := threads.Resolve(h.opts.Layout, id)
	if err != nil {
		return err
	}
	if err := h.ended(rec); err != nil {
		return err
	}
	if pid := RunningElsewhere(h.opts.Layout, rec.BundleHash, rec.ThreadID); pid != 0 {
		return elsewhereError(id, pid, "cannot pause", "pause it with the original's `thread pause "+id+"`")
	}
	return fmt.Errorf("thread not running: %s was interrupted (the host running it stopped); resume it to go on", id)
}

// ended is the error of a request for a thread that has ended, saying
// how; nil while it has not. A thread whose head cannot back a status
// (threads.ReadStatus) has neither ended nor can go on: that is the error.
func (h *Host) ended(rec threads.Record) error {
	status, damage := threads.ReadStatus(h.exec.CAS, rec, threads.NotExecuting)
	if damage != nil {
		return fmt.Errorf("%s; `uncaged-workflow doctor` says what to do", damage.Reason)
	}
	end, _ := threads.HeadEnd(h.exec.CAS, rec.Head)
	if end == nil && rec.Source != threads.SourceHistory {
		return nil
	}
	how := string(status)
	if end != nil {
		how += fmt.Sprintf(", return code %d", end.ReturnCode())
	}
	return fmt.Errorf("thread not running: %s has already finished (%s)", rec.ThreadID, how)
}
