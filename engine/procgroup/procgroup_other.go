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
type Tracker struct{}

// Open returns a tracker that records nothing.
func Open(string, *slog.Logger) (*Tracker, error) {
	t := &Tracker{}
	setCurrent(t)
	return t, nil
}

// KillLeftovers finds nothing: nothing was recorded.
func (*Tracker) KillLeftovers() []Leftover { return nil }

// Close stops being the process's tracker.
func (t *Tracker) Close() { clearCurrent(t) }

type recorded struct{}

func (*recorded) remove() {}

func (*Tracker) record(*exec.Cmd, Owner) *recorded { return nil }
