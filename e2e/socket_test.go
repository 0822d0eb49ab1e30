package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// nobody is the uid (and gid) another user's commands run as here.
const nobody = 65534

// TestEngineSocketIsOwnerOnly runs a host under umask 000 on a root that
// others may enter (as a root made under that umask is): its socket is
// still its owner's alone, and another user who gets to connect anyway is
// refused by the host with a message saying why.
func TestEngineSocketIsOwnerOnly(t *testing.T) {
	t.Parallel()
	// Outside t.TempDir, whose parents only this user may enter.
	base, err := os.MkdirTemp("", "uncaged-e2e-socket-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(base); err != nil {
			t.Error(err)
		}
	})
	root := filepath.Join(base, "root")
	for _, d := range []string{base, root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	add(t, root, "linear", "linear.esm.js")

	bin := filepath.Join(binDir, "uncaged-workflow")
	host := exec.Command("/bin/sh", "-c", `umask 000; exec "$0" engine serve --idle-exit 60s`, bin)
	host.Env = append(os.Environ(), "UNCAGED_WORKFLOW_STORAGE_ROOT=", "WORKFLOW_STORAGE_ROOT="+root)
	log := launch(t, host, "the engine host").logs
	sock := filepath.Join(root, "engine.sock")
	testkit.WaitUntil(t, "the engine host to listen", func() bool { return strings.Contains(log.String(), "engine host serving") })
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("engine.sock under umask 000: %v %v, want a socket with mode 0600", fi.Mode(), err)
	}
	if r := run(t, root, "thread", "ps"); r.code != 0 || r.stdout != "(no running threads)\n" {
		t.Fatalf("the owner's thread ps: %+v", r)
	}

	t.Run("another user is refused", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("acting as another user (uid 65534) needs root")
		}
		// The binary, where the other user can run it.
		other := filepath.Join(base, "uncaged-workflow")
		if err := os.Link(bin, other); err != nil {
			b, err := os.ReadFile(bin)
			if err != nil || os.WriteFile(other, b, 0o755) != nil {
				t.Fatalf("copy the binary: %v", err)
			}
		}
		// The root's files, readable by others as under umask 000.
		if err := os.Chmod(filepath.Join(root, "workflow.yaml"), 0o644); err != nil {
			t.Fatal(err)
		}
		runAsNobody := func(args ...string) result {
			t.Helper()
			cmd := exec.Command(other, args...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + base, "WORKFLOW_STORAGE_ROOT=" + root}
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
			return runCommand(t, cmd)
		}

		// The command sees the socket is not its user's and says so at
		// once, sending nothing and starting no host of its own.
		for _, args := range [][]string{{"run", "linear"}, {"engine", "status"}, {"thread", "ps"}} {
			if r := runAsNobody(args...); r.code != 1 || !strings.Contains(r.stderr, "refusing the engine socket "+sock+": its directory "+root+" belongs to uid 0") {
				t.Fatalf("%v as uid 65534: %+v", args, r)
			}
		}
		// A client that checks nothing is kept out by the socket's mode;
		// with the socket open to everyone, as it was, the host refuses.
		spy := buildSockspy(t, base)
		request := func(method, path, body string) result {
			t.Helper()
			return runCommand(t, asUser(exec.Command(spy, "request", sock, method, path, body), nobody))
		}
		if r := request("GET", "/v1/status", ""); r.code != 1 || !strings.Contains(r.stderr, "permission denied") {
			t.Fatalf("a request as uid 65534 through the 0600 socket: %+v", r)
		}
		if err := os.Chmod(sock, 0o666); err != nil {
			t.Fatal(err)
		}
		for _, req := range [][3]string{{"GET", "/v1/status", ""}, {"GET", "/v1/threads", ""}, {"POST", "/v1/threads", `{"workflow":"linear","prompt":"p"}`}} {
			if r := request(req[0], req[1], req[2]); r.code != 0 || !strings.HasPrefix(r.stdout, "403\n") || !strings.Contains(r.stdout, "serves only its owner (uid 0); this connection is from uid 65534") {
				t.Fatalf("%v as uid 65534 through an open socket: %+v", req, r)
			}
		}
		testkit.WaitUntil(t, "the host to log the refusal", func() bool {
			return strings.Contains(log.String(), "refused a connection on the engine socket") && strings.Contains(log.String(), `"peerUID":65534`)
		})
		if r := run(t, root, "thread", "list"); r.stdout != "(no threads found)\n" {
			t.Fatalf("another user started a thread: %+v", r)
		}
	})
}
