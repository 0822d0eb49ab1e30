package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"github.com/uncaged/workflow/engine/storage"
)

// A client sends its user's prompts and whole environment, API keys
// included, to whatever answers at the root's socket. So before anything
// is sent, dialOwnHost makes sure that what answers is this user's own
// engine host: the directory holding the socket is the user's and closed
// to others (nobody else can have put a file there), the socket is a
// socket the user owns (no link to one elsewhere, no file of another
// user's), and the process on the other end runs as the user (the kernel
// says so: SO_PEERCRED, LOCAL_PEERCRED). The last is the one that cannot
// be fooled; the others give a clear message first, and are the only
// check where the system cannot tell who is connected.

// refusedSocket is the client's refusal of a socket that is not its
// user's own. It matches ErrRefused: commands stop and say why, instead
// of starting a host of their own or reporting none.
type refusedSocket struct {
	sock string
	why  string // what is wrong with it
	hint string // what to do, "" when there is nothing to say
}

func (e *refusedSocket) Error() string {
	msg := "refusing the engine socket " + e.sock + ": " + e.why + "; nothing was sent to it"
	if e.hint != "" {
		msg += ". " + e.hint
	}
	return msg
}

func (e *refusedSocket) Unwrap() error { return ErrRefused }

// asServer is the host's own refusal to serve where a client would
// refuse it.
func (e *refusedSocket) asServer() error {
	msg := "the engine host will not serve on " + e.sock + ": " + e.why
	if e.hint != "" {
		msg += ". " + e.hint
	}
	return errors.New(msg)
}

// dialOwnHost connects to sock when, and only when, the user's own engine
// host answers there (see above). A socket, or its directory, that is not
// there is ErrNoHost; one that is not the user's is a *refusedSocket.
func dialOwnHost(ctx context.Context, l storage.Layout, sock string) (net.Conn, error) {
	why, hint, err := socketDirProblem(l, sock)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (%v)", ErrNoHost, err)
	}
	if err != nil {
		return nil, err
	}
	if why != "" {
		return nil, &refusedSocket{sock: sock, why: why, hint: hint}
	}
	fi, err := os.Lstat(sock)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (%v)", ErrNoHost, err)
	}
	if err != nil {
		return nil, err
	}
	if why, hint := socketFileProblem(sock, fi); why != "" {
		return nil, &refusedSocket{sock: sock, why: why, hint: hint}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", sock)
	if errors.Is(err, syscall.ECONNREFUSED) {
		// A socket its host left behind when it died.
		return nil, fmt.Errorf("%w (%v)", ErrNoHost, err)
	}
	if err != nil {
		return nil, err
	}
	uid, err := peerUID(conn)
	switch {
	case errors.Is(err, errPeerUnknown):
		return conn, nil // the checks above are all there is
	case err != nil:
		_ = conn.Close() // nothing was sent; the error that matters is err
		return nil, &refusedSocket{sock: sock, why: "cannot tell which user answers on it: " + err.Error()}
	case uid != os.Geteuid():
		_ = conn.Close() // nothing was sent
		return nil, &refusedSocket{sock: sock,
			why: fmt.Sprintf("the process answering on it runs as %s, not as you (%s)", storage.DescribeUser(uid), storage.DescribeUser(os.Geteuid())),
			hint: fmt.Sprintf("Someone put their own server in your engine host's place: find out who, "+
				"then remove it (rm %s) and run the command again", sock)}
	}
	return conn, nil
}

// socketFileProblem says why fi, found at sock, is not a socket an engine
// host of this user made ("" when it is).
func socketFileProblem(sock string, fi fs.FileInfo) (why, hint string) {
	removeIt := "Remove it if you do not know why it is there (rm " + sock + ") and run the command again"
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(sock)
		return fmt.Sprintf("it is a symbolic link (to %s), which an engine host never makes", target), removeIt
	case fi.Mode().Type() != fs.ModeSocket:
		return fmt.Sprintf("it is a %s, not a socket", fileKind(fi.Mode())), removeIt
	}
	if uid, ok := ownerUID(fi); ok && uid != os.Geteuid() {
		return fmt.Sprintf("it belongs to %s, not to you (%s), so its host is not yours", storage.DescribeUser(uid), storage.DescribeUser(os.Geteuid())),
			"If it should be yours, remove it and run the command again"
	}
	return "", ""
}

// socketDirProblem says why the directory holding sock is not a place
// only this user could have put it ("" when it is), and what to do.
// Inside the storage root it is the root: the user's, and not writable by
// group or others (storage.Layout.Check). A deep root's socket lives in a
// runtime directory of its own (socketDir), which must be the user's and
// closed to everyone else. err is a directory that cannot be looked at:
// fs.ErrNotExist when it is not there (no host has made it).
func socketDirProblem(l storage.Layout, sock string) (why, hint string, err error) {
	dir := filepath.Dir(sock)
	if dir == filepath.Clean(l.Root) {
		fi, err := os.Stat(dir) // a root may be a link to where it lives
		if err != nil {
			return "", "", err
		}
		if uid, ok := ownerUID(fi); ok && uid != os.Geteuid() {
			return fmt.Sprintf("its directory %s belongs to %s, not to you (%s)", dir, storage.DescribeUser(uid), storage.DescribeUser(os.Geteuid())), "", nil
		}
		if fi.Mode().Perm()&0o022 != 0 {
			return fmt.Sprintf("its directory %s is writable by others (mode %s), who could have put it there", dir, storage.OctalMode(fi.Mode())),
				"Run: chmod go-w " + dir, nil
		}
		return "", "", nil
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", "", err
	}
	elsewhere := "set XDG_RUNTIME_DIR to a directory of your own, or use a storage root with a shorter path"
	uid, ok := ownerUID(fi)
	switch {
	case !fi.IsDir():
		return fmt.Sprintf("%s is not this user's private directory: it is a %s", dir, fileKind(fi.Mode())), "Remove it, or " + elsewhere, nil
	case !ok || uid != os.Geteuid():
		return fmt.Sprintf("%s is not this user's private directory: it belongs to %s, not to you (%s)", dir, storage.DescribeUser(uid), storage.DescribeUser(os.Geteuid())),
			"Another user made it first: " + elsewhere, nil
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Sprintf("%s is not this user's private directory: it is open to others (mode %s)", dir, storage.OctalMode(fi.Mode())),
			"Run: chmod 700 " + dir, nil
	}
	return "", "", nil
}

// ownerUID is the uid owning the file fi describes.
func ownerUID(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, false
	}
	return int(st.Uid), true
}

// fileKind names a file type for a message.
func fileKind(m fs.FileMode) string {
	switch m.Type() {
	case 0:
		return "regular file"
	case fs.ModeDir:
		return "directory"
	case fs.ModeSymlink:
		return "symbolic link"
	case fs.ModeNamedPipe:
		return "named pipe (FIFO)"
	case fs.ModeSocket:
		return "socket"
	case fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
		return "device"
	}
	return "file of mode " + m.String()
}
