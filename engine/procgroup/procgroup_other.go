//go:build !linux

package procgroup

import (
	"log/slog"
	"os/exec"
	"syscall"
)

// reapsFirst is true: without waitid's WNOWAIT the leader is reaped before
// the rest of its group can be killed.
const reapsFirst = true

func setAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func (g *Group) start() error { return g.cmd.Start() }

func leaderExited(int) {}

// Tracker records nothing here: without /proc a recorded pid cannot be
// told from a reused one, so a leftover could not be killed safely.
type Tracker struct{ _ byte } // not zero-size: trackers are map keys

// Open returns a tracker that records nothing.
func Open(string, *slog.Logger) (*Tracker, error) {
	t := &Tracker{}
	register(t)
	return t, nil
}

// KillLeftovers finds nothing: nothing was recorded.
func (*Tracker) KillLeftovers() []Leftover { return nil }

// Close unregisters the tracker.
func (t *Tracker) Close() { unregister(t) }

type recorded struct{}

func (*recorded) remove() {}

func (*Tracker) record(*exec.Cmd, Owner) *recorded { return nil }
