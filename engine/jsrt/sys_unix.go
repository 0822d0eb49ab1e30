//go:build unix

package jsrt

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup sends SIGKILL to the process group led by pid.
func killGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

func signalName(s syscall.Signal) string { return unix.SignalName(s) }

func signalNum(name string) (syscall.Signal, bool) {
	s := unix.SignalNum(name)
	return s, s != 0
}

func access(path string, mode uint32) error { return unix.Access(path, mode) }

func removeFile(path string) error { return syscall.Unlink(path) }

func removeDir(path string) error { return syscall.Rmdir(path) }

func osRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}
