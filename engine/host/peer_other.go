//go:build !linux && !darwin

package host

import "net"

// peerUID cannot tell here; the socket file's mode (0600) is the check.
func peerUID(net.Conn) (int, error) { return -1, errPeerUnknown }
