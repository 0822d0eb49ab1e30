package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/uncaged/workflow/engine/storage"
)

// listenOwnerOnly listens on sock with a socket file only its owner may
// connect to (mode 0600) whatever the umask. bind creates the file with
// the umask applied, and the umask is process-wide: narrowing it here
// would race with the host's other goroutines creating files, and a chmod
// after bind leaves a moment in which anyone may connect. So the socket
// is bound in a new directory only this user can enter, made 0600 there,
// and renamed into place: it is never reachable with a wider mode. (The
// peer check in Serve refuses other users all the same.)
func listenOwnerOnly(sock string) (net.Listener, error) {
	// A short name: a socket path is limited to about 107 bytes, and
	// SocketPath leaves room for this one only.
	dir, err := os.MkdirTemp(filepath.Dir(sock), ".sock")
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", sock, err)
	}
	// Best effort: the socket has been renamed out of dir (or the listen
	// failed), and an empty directory left behind harms nothing.
	defer func() { _ = os.RemoveAll(dir) }()
	if err := os.Chmod(dir, 0o700); err != nil { // MkdirTemp's 0700 is subject to the umask too
		return nil, fmt.Errorf("listen on %s: %w", sock, err)
	}
	tmp := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", sock, err)
	}
	// The listener would unlink the path it was bound to, not sock; Serve
	// removes sock itself.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		_ = ln.Close() // err, already being returned, is what matters
		return nil, fmt.Errorf("listen on %s: %w", sock, err)
	}
	// We hold the root's lock, so a socket file already at sock is stale.
	if err := os.Rename(tmp, sock); err != nil {
		_ = ln.Close() // err, already being returned, is what matters
		return nil, fmt.Errorf("listen on %s: %w", sock, err)
	}
	return ln, nil
}

// prepareSocketDir makes the directory of a deep root's socket, private
// to this user (socketDir), and refuses to serve in one that is not: in a
// shared directory such as /tmp another user could otherwise make it
// first and answer in the engine's place. A socket in the root needs the
// root to be safe, which Open has checked.
func prepareSocketDir(l storage.Layout, sock string) error {
	if dir := filepath.Dir(sock); dir != filepath.Clean(l.Root) {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("engine socket directory: %w", err)
		}
	}
	why, hint, err := socketDirProblem(l, sock)
	if err != nil {
		return fmt.Errorf("engine socket directory: %w", err)
	}
	if why != "" {
		return (&refusedSocket{sock: sock, why: why, hint: hint}).asServer()
	}
	return nil
}

// errPeerUnknown is peerUID's error where the system cannot tell who is
// connected; the socket's mode is the only check there.
var errPeerUnknown = errors.New("this system cannot tell who is connected to a Unix socket")

// peer is who is on the other end of a connection.
type peer struct {
	uid int
	err error
}

type peerKey struct{}

// peerContext notes, once per accepted connection, who connected; a
// connection from another user is logged here and refused by ownerOnly.
func (h *Host) peerContext(ctx context.Context, c net.Conn) context.Context {
	var p peer
	p.uid, p.err = peerUID(c)
	if !h.serves(p) {
		h.opts.Logger.Warn("refused a connection on the engine socket: only the host's own user may use it",
			"peerUID", p.uid, "ownerUID", h.owner, "err", p.err)
	}
	return context.WithValue(ctx, peerKey{}, p)
}

// serves reports whether the host answers p: the user it runs as.
func (h *Host) serves(p peer) bool {
	if errors.Is(p.err, errPeerUnknown) {
		return true
	}
	return p.err == nil && p.uid == h.owner
}

// ownerOnly answers every request of a connection from another user with
// 403 and why, so that the client can say so rather than time out.
func (h *Host) ownerOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := r.Context().Value(peerKey{}).(peer)
		if !ok || !h.serves(p) {
			msg := fmt.Sprintf("the engine host of %s serves only its owner (uid %d); this connection is from uid %d", h.opts.Layout.Root, h.owner, p.uid)
			if p.err != nil {
				msg = fmt.Sprintf("the engine host of %s serves only its owner (uid %d) and could not tell who this connection is from: %v", h.opts.Layout.Root, h.owner, p.err)
			}
			w.Header().Set("Connection", "close")
			writeJSON(w, http.StatusForbidden, apiError{msg})
			return
		}
		next.ServeHTTP(w, r)
	})
}
