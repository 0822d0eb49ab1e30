//go:build !unix

package jsrt

import (
	"os"
	"syscall"
)

func signalName(s syscall.Signal) string { return s.String() }

func signalNum(name string) (syscall.Signal, bool) {
	switch name {
	case "SIGKILL":
		return syscall.SIGKILL, true
	case "SIGTERM":
		return syscall.SIGTERM, true
	case "SIGINT":
		return syscall.SIGINT, true
	}
	return 0, false
}

func access(path string, _ uint32) error {
	_, err := os.Stat(path)
	return err
}

func removeFile(path string) error { return os.Remove(path) }

func removeDir(path string) error { return os.Remove(path) }

func osRelease() string { return "" }
