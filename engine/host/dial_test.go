package host

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/shared/testkit"
)

// nobody is another user of the machine, for the tests that run as root.
const nobody = 65534

// spy is a server on a Unix socket standing where an engine host would:
// it answers nothing and notes, connection by connection, what was sent
// to it.
type spy struct {
	sock string
	mu   sync.Mutex
	got  []string // per connection: what its first read returned
}

// startSpy listens on a socket in a directory of its own.
func startSpy(t *testing.T) *spy {
	t.Helper()
	s := &spy{sock: filepath.Join(shortDir(t), "spy.sock")}
	ln, err := net.Listen("unix", s.sock)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false) // tests move the file
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		// One connection at a time, in the order they came: once the
		// marker's is read, every earlier one has been.
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 4096)
			n, _ := c.Read(buf)
			_ = c.Close()
			s.mu.Lock()
			s.got = append(s.got, string(buf[:n]))
			s.mu.Unlock()
		}
	}()
	return s
}

// received returns what every connection made so far sent, once the spy
// has read them all: it connects last itself, with a marker, and waits
// for that.
func (s *spy) received(t *testing.T, addr string) []string {
	t.Helper()
	c, err := net.Dial("unix", addr)
	if err != nil {
		t.Fatalf("the spy is gone: %v", err)
	}
	if _, err := c.Write([]byte("MARKER")); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	var got []string
	testkit.WaitUntil(t, "the spy to read the marker", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.got) == 0 || s.got[len(s.got)-1] != "MARKER" {
			return false
		}
		got = append([]string(nil), s.got[:len(s.got)-1]...)
		return true
	})
	return got
}

// refusedAndSentNothing checks that a client of l refuses what is at its
// socket with a message containing want, neither starting a host of its
// own nor sending the spy a byte.
func refusedAndSentNothing(t *testing.T, l storage.Layout, s *spy, spyAddr, want string) {
	t.Helper()
	_, err := Dial(l)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "nothing was sent to it") {
		t.Errorf("Dial: %v\nwant ErrRefused saying %q", err, want)
	}
	var spawned atomic.Int32
	if _, err := Ensure(l, func() error { spawned.Add(1); return nil }); !errors.Is(err, ErrRefused) || spawned.Load() != 0 {
		t.Errorf("Ensure: %v, %d host(s) started; want ErrRefused and none", err, spawned.Load())
	}
	for _, got := range s.received(t, spyAddr) {
		if got != "" {
			t.Errorf("the spy was sent %q", got)
		}
	}
}

// A client sends nothing to the socket of a root whose socket is not its
// user's engine host's: a link to a socket elsewhere, a file of another
// kind, a socket of another user, a socket in a directory others may
// write or that belongs to someone else.
func TestAClientSendsNothingToASocketThatIsNotItsUsers(t *testing.T) {
	t.Parallel()
	asRoot := os.Geteuid() == 0
	for _, tc := range []struct {
		name     string
		needRoot bool
		// plant puts something at sock (root's engine.sock), given the
		// spy's socket, and returns where the spy still answers.
		plant func(t *testing.T, root, sock, spySock string) string
		want  func(root, sock string) string
	}{
		{"a link to another socket", false,
			func(t *testing.T, root, sock, spySock string) string {
				must(t, os.Symlink(spySock, sock))
				return spySock
			},
			func(root, sock string) string { return "it is a symbolic link (to " }},
		{"a regular file", false,
			func(t *testing.T, root, sock, spySock string) string {
				must(t, os.WriteFile(sock, nil, 0o600))
				return spySock
			},
			func(root, sock string) string { return "it is a regular file, not a socket" }},
		{"a FIFO", false,
			func(t *testing.T, root, sock, spySock string) string {
				must(t, syscall.Mkfifo(sock, 0o600))
				return spySock
			},
			func(root, sock string) string { return "it is a named pipe (FIFO), not a socket" }},
		{"a directory", false,
			func(t *testing.T, root, sock, spySock string) string { must(t, os.Mkdir(sock, 0o700)); return spySock },
			func(root, sock string) string { return "it is a directory, not a socket" }},
		{"a socket of another user", true,
			func(t *testing.T, root, sock, spySock string) string {
				must(t, os.Rename(spySock, sock))
				must(t, os.Lchown(sock, nobody, nobody))
				return sock
			},
			func(root, sock string) string { return "it belongs to uid 65534" }},
		{"the owner's socket in a root others may write", false,
			func(t *testing.T, root, sock, spySock string) string {
				must(t, os.Rename(spySock, sock))
				must(t, os.Chmod(root, 0o777))
				return sock
			},
			func(root, sock string) string { return "its directory " + root + " is writable by others (mode 0777)" }},
		{"the owner's socket in a sticky root others may write", false,
			func(t *testing.T, root, sock, spySock string) string {
				must(t, os.Rename(spySock, sock))
				must(t, os.Chmod(root, 0o777|os.ModeSticky))
				return sock
			},
			func(root, sock string) string { return "its directory " + root + " is writable by others (mode 1777)" }},
		{"the owner's socket in a root its group may write", false,
			func(t *testing.T, root, sock, spySock string) string {
				must(t, os.Rename(spySock, sock))
				must(t, os.Chmod(root, 0o770))
				return sock
			},
			func(root, sock string) string { return "its directory " + root + " is writable by others (mode 0770)" }},
		{"the owner's socket in a root of another user", true,
			func(t *testing.T, root, sock, spySock string) string {
				must(t, os.Rename(spySock, sock))
				must(t, os.Chown(root, nobody, nobody))
				return sock
			},
			func(root, sock string) string { return "its directory " + root + " belongs to uid 65534" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.needRoot && !asRoot {
				t.Skip("acting as another user (uid 65534) needs root")
			}
			l := storage.Layout{Root: shortDir(t)}
			sock := SocketPath(l)
			if filepath.Dir(sock) != l.Root {
				t.Fatalf("socket %s, want it in the root", sock)
			}
			s := startSpy(t)
			addr := tc.plant(t, l.Root, sock, s.sock)
			refusedAndSentNothing(t, l, s, addr, tc.want(l.Root, sock))
		})
	}
}

// A deep root's socket lives in a runtime directory (socketDir); one
// that is not the user's private directory is refused, whatever else is
// wrong with it, and nothing is sent to a socket in it.
func TestAClientSendsNothingThroughARuntimeDirectoryThatIsNotPrivate(t *testing.T) {
	// Serial: sets XDG_RUNTIME_DIR (t.Setenv).
	run := shortDir(t)
	t.Setenv("XDG_RUNTIME_DIR", run)
	l := storage.Layout{Root: filepath.Join(privateDir(t), strings.Repeat("deep/", 20), "root")}
	sock := SocketPath(l)
	dir := filepath.Join(run, "uncaged-workflow")
	if filepath.Dir(sock) != dir {
		t.Fatalf("socket %s, want it in %s", sock, dir)
	}
	for _, tc := range []struct {
		name     string
		needRoot bool
		plant    func(t *testing.T, spySock string) // makes dir, with a socket answering at sock
		want     string
	}{
		{"open to others", false, func(t *testing.T, spySock string) {
			must(t, os.Mkdir(dir, 0o755))
			must(t, os.Chmod(dir, 0o755))
			must(t, os.Rename(spySock, sock))
		}, dir + " is not this user's private directory: it is open to others (mode 0755); nothing was sent to it. Run: chmod 700 " + dir},
		{"writable by all", false, func(t *testing.T, spySock string) {
			must(t, os.Mkdir(dir, 0o777))
			must(t, os.Chmod(dir, 0o777|os.ModeSticky))
			must(t, os.Rename(spySock, sock))
		}, "it is open to others (mode 1777)"},
		{"a link to a private directory", false, func(t *testing.T, spySock string) {
			must(t, os.Symlink(filepath.Dir(spySock), dir))
			must(t, os.Rename(spySock, filepath.Join(filepath.Dir(spySock), filepath.Base(sock))))
		}, "it is a symbolic link"},
		{"another user's", true, func(t *testing.T, spySock string) {
			must(t, os.Mkdir(dir, 0o700))
			must(t, os.Chown(dir, nobody, nobody))
			must(t, os.Rename(spySock, sock))
		}, "it belongs to uid 65534"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needRoot && os.Geteuid() != 0 {
				t.Skip("acting as another user (uid 65534) needs root")
			}
			t.Cleanup(func() { must(t, os.RemoveAll(dir)) })
			s := startSpy(t)
			tc.plant(t, s.sock)
			addr, err := filepath.EvalSymlinks(sock)
			if err != nil {
				t.Fatal(err)
			}
			refusedAndSentNothing(t, l, s, addr, tc.want)
		})
	}
	// With nothing there, there is no host: Ensure starts one.
	if _, err := Dial(l); !errors.Is(err, ErrNoHost) {
		t.Fatalf("no runtime directory: %v, want ErrNoHost", err)
	}
}

// shortDir is a new directory only its owner may use, with a path short
// enough for sockets in it (t.TempDir's is named after the test).
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "uw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { must(t, os.RemoveAll(dir)) })
	must(t, os.Chmod(dir, 0o700))
	return dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
