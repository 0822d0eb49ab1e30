//go:build linux

package jsrt

import (
	"os"
	"syscall"
)

// sysStat is the part of a stat result os.FileInfo does not expose.
type sysStat struct {
	ok               bool
	dev, ino, nlink  uint64
	uid, gid         uint32
	rawMode          uint32
	atimeMs, ctimeMs float64
}

func statTimes(fi os.FileInfo) sysStat {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return sysStat{}
	}
	return sysStat{
		ok:      true,
		dev:     uint64(st.Dev),
		ino:     uint64(st.Ino),
		nlink:   uint64(st.Nlink),
		uid:     st.Uid,
		gid:     st.Gid,
		rawMode: uint32(st.Mode),
		atimeMs: float64(st.Atim.Sec)*1e3 + float64(st.Atim.Nsec)/1e6,
		ctimeMs: float64(st.Ctim.Sec)*1e3 + float64(st.Ctim.Nsec)/1e6,
	}
}

// mode is Node's stats.mode: file type bits and permissions as the
// kernel reports them.
func (s sysStat) mode(fi os.FileInfo) uint32 {
	if s.ok {
		return s.rawMode
	}
	return uint32(fi.Mode().Perm())
}
