//go:build linux || darwin

package host

import (
	"fmt"
	"net"
)

// peerUID is the uid of the process that connected c, as the kernel
// recorded it at connect time (the peer cannot forge it); fdPeerUID asks
// in the system's own way.
func peerUID(c net.Conn) (int, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1, fmt.Errorf("not a Unix socket connection: %T", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1, err
	}
	uid, cerr := -1, error(nil)
	if err := raw.Control(func(fd uintptr) { uid, cerr = fdPeerUID(int(fd)) }); err != nil {
		return -1, err
	}
	return uid, cerr
}
