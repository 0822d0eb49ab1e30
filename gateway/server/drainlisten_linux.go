package server

import (
	"net"

	"golang.org/x/sys/unix"
)

// stopHandshakes makes the kernel drop every packet that reaches the
// listening socket ln — new connections' SYNs and their handshakes'
// last ACKs — so none joins its queue any more, while the connections
// queued already stay to be accepted. A client whose SYN was dropped
// sends it again a second later, finds the socket closed, and its
// balancer tries another replica: the request was never sent. It
// reports whether the filter is in place.
func stopHandshakes(ln net.Listener) bool {
	tcp, ok := ln.(*net.TCPListener)
	if !ok {
		return false
	}
	raw, err := tcp.SyscallConn()
	if err != nil {
		return false
	}
	// One classic BPF instruction: return 0, keep nothing.
	dropAll := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0}}
	prog := unix.SockFprog{Len: uint16(len(dropAll)), Filter: &dropAll[0]}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog)
	}); err != nil {
		return false
	}
	return serr == nil
}
