//go:build unix

package jsrt

import (
	"syscall"

	"golang.org/x/sys/unix"
)

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
