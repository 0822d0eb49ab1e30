package host

import (
	"os"
	"os/exec"
	"syscall"
)

// startDetached starts a process in its own session so it outlives the
// command (and terminal) that started it.
func startDetached(exe string, args []string, logf *os.File) error {
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	return cmd.Process.Release()
}
