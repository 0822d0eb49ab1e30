//go:build !linux

package jsrt

import "os"

// sysStat is the part of a stat result os.FileInfo does not expose; only
// Linux fills it in.
type sysStat struct {
	ok               bool
	dev, ino, nlink  uint64
	uid, gid         uint32
	atimeMs, ctimeMs float64
}

func statTimes(os.FileInfo) sysStat { return sysStat{} }

func (s sysStat) mode(fi os.FileInfo) uint32 { return uint32(fi.Mode().Perm()) }
