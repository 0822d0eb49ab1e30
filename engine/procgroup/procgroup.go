// Package procgroup starts the programs of agents, and the child processes
// of JavaScript bundles, as process groups that do not outlive the engine
// host that started them.
//
// A host can die in ways that run none of its code (kill -9, the OOM
// killer), so no single mechanism is enough. On Linux there are three:
//
//   - Pdeathsig: the kernel sends the group's leader SIGKILL when the host
//     dies. It fires when the OS thread that forked the leader exits, not
//     the process, and Go exits OS threads whenever a goroutine locked to
//     one ends without unlocking (any library may do that). So each leader
//     is forked by a goroutine locked to its own thread that stays locked
//     until the leader is reaped: that thread exits only with the process.
//     Pdeathsig reaches the leader only; what it started stays in its group.
//   - A watchdog: the first group a host starts also starts one small
//     process (this executable again, in its own session) that blocks
//     reading a pipe only the host can write to. The pipe ends when the
//     host does, however it ends; unless the host said goodbye first, the
//     watchdog kills every group the host recorded and exits.
//   - Records: each running group has a file in the storage root (pgid,
//     the leader's pid and start time, the boot, the host, thread and role).
//     A new host kills what dead hosts recorded before it serves anything,
//     so a leftover never runs beside the role it was resumed as, even when
//     the watchdog died with the host.
//
// A recorded group is killed only while it is provably the same group: the
// boot is the same, no other process holds the leader's pid, and every
// process killed is in the group and the leader's session and started no
// earlier than the leader (start times come from /proc, so a reused pid is
// never mistaken for the recorded one). Each kill goes through a pidfd, so
// a process that exits between the check and the signal cannot have its
// pid reused in between. A process that leaves its group (setsid, a
// daemon) is out of reach, as it is of a thread's kill.
//
// Elsewhere (macOS, BSD) a group is a plain process group: it is killed
// when its thread is killed or its role ends, but not when the host dies.
package procgroup

import (
	"errors"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// WatchdogName is the watchdog's argv[0], so that ps shows what it is.
const WatchdogName = "uncaged-workflow-agent-watchdog"

// Owner says whose process a group is, for the record and the logs.
type Owner struct {
	Thread string // "" when the caller does not know (a bundle's child process)
	Role   string
}

// Record describes one running process group; it is what a group's record
// file holds, as JSON.
type Record struct {
	PGID  int    `json:"pgid"`
	PID   int    `json:"pid"`   // the group's leader (equal to PGID)
	Start uint64 `json:"start"` // the leader's start time, in clock ticks since boot
	Sid   int    `json:"sid"`   // the leader's session: a group never leaves its session
	Boot  string `json:"boot"`  // the kernel's boot id: start times compare only within a boot
	// Host and HostStart identify the engine host process that started the
	// group; Session tells its trackers apart.
	Host      int    `json:"host"`
	HostStart uint64 `json:"hostStart"`
	Session   string `json:"session"`
	Thread    string `json:"thread,omitempty"`
	Role      string `json:"role,omitempty"`
	Command   string `json:"command"` // the program's path (never its arguments: they may hold a prompt)
}

// Leftover is a record of a dead host's group that KillLeftovers handled.
type Leftover struct {
	Record Record
	Killed int   // processes killed
	Err    error // the group could not be killed entirely
}

// Group is one process group: a program started by New and Start, and
// whatever it starts that stays in its group.
type Group struct {
	cmd   *exec.Cmd
	owner Owner

	mu     sync.Mutex
	exited bool // the leader has exited: signalling its group id is no longer safe

	reaped chan struct{} // closed once Wait has reaped the leader
	rec    *recorded     // nil unless a tracker recorded the group
}

// New prepares cmd to start as the leader of a new process group. Callers
// must not set cmd.SysProcAttr; they may set cmd.Cancel (to g.Signal).
func New(cmd *exec.Cmd, owner Owner) *Group {
	setAttr(cmd)
	return &Group{cmd: cmd, owner: owner, reaped: make(chan struct{})}
}

// Start starts the program and records its group with its thread's
// tracker, if one is open. Every started group must be waited for.
func (g *Group) Start() error {
	if err := g.start(); err != nil {
		return err
	}
	if t := trackerFor(g.owner); t != nil {
		g.rec = t.record(g.cmd, g.owner)
	}
	return nil
}

// PID is the leader's pid (and the group id); 0 before Start.
func (g *Group) PID() int {
	if g.cmd.Process == nil {
		return 0
	}
	return g.cmd.Process.Pid
}

// Signal sends sig to the whole group. Once the leader has exited it
// sends nothing and returns os.ErrProcessDone (as os.Process.Signal does,
// and as exec.Cmd's Cancel expects): the group id may then belong to
// someone else.
func (g *Group) Signal(sig syscall.Signal) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cmd.Process == nil {
		return errors.New("procgroup: the group has not started")
	}
	if g.exited {
		return os.ErrProcessDone
	}
	return syscall.Kill(-g.cmd.Process.Pid, sig)
}

// Wait waits for the leader and returns what cmd.Wait returns. With
// killRest, whatever the leader left running in its group is killed as it
// exits (the role is over). Then the group's record is removed.
func (g *Group) Wait(killRest bool) error {
	pid := g.cmd.Process.Pid
	// Until the leader is reaped its zombie holds pid, so no other group
	// can have this id yet: this is the one safe moment to kill the rest.
	leaderExited(pid)
	g.mu.Lock()
	g.exited = true
	if killRest && !reapsFirst {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	g.mu.Unlock()
	err := g.cmd.Wait()
	close(g.reaped)
	if killRest && reapsFirst {
		// Without a way to wait unreaped, this is the best there is.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	if g.rec != nil {
		g.rec.remove()
	}
	return err
}

// The open trackers, and the threads bound to each. An engine host opens
// one tracker for its root and binds each thread it runs, so a group is
// recorded with its thread's host even when a process runs several hosts
// (tests do). A group whose thread is unknown (a bundle's child process)
// goes to the tracker when only one is open, which is always so for the
// binaries; else it is not recorded.
var (
	regMu   sync.Mutex
	open    = map[*Tracker]bool{}
	threads = map[string]*Tracker{}
)

func register(t *Tracker) {
	regMu.Lock()
	open[t] = true
	regMu.Unlock()
}

func unregister(t *Tracker) {
	regMu.Lock()
	defer regMu.Unlock()
	delete(open, t)
	for id, bt := range threads {
		if bt == t {
			delete(threads, id)
		}
	}
}

// Bind records the groups the agents of thread start with t until the
// returned func is called.
func (t *Tracker) Bind(thread string) (unbind func()) {
	regMu.Lock()
	threads[thread] = t
	regMu.Unlock()
	return func() {
		regMu.Lock()
		if threads[thread] == t {
			delete(threads, thread)
		}
		regMu.Unlock()
	}
}

// trackerFor is the tracker that records o's groups, or nil.
func trackerFor(o Owner) *Tracker {
	regMu.Lock()
	defer regMu.Unlock()
	if t := threads[o.Thread]; o.Thread != "" && t != nil {
		return t
	}
	if len(open) == 1 {
		for t := range open {
			return t
		}
	}
	return nil
}
