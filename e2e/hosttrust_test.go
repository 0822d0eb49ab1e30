package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// trustBase is a directory for a test that acts as another user too:
// outside t.TempDir, whose parents only this user may enter, and short
// enough for sockets in it.
func trustBase(t *testing.T) string {
	t.Helper()
	base, err := os.MkdirTemp("", "uw-trust-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(base); err != nil {
			t.Error(err)
		}
	})
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	return base
}

// buildSockspy builds e2e/internal/sockspy into dir, where another user
// may run it.
func buildSockspy(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "sockspy")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./internal/sockspy")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building sockspy: %v\n%s", err, out)
	}
	return bin
}

// asUser makes cmd run as uid (and gid) uid.
func asUser(cmd *exec.Cmd, uid int) *exec.Cmd {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	return cmd
}

// trustSpy is sockspy serving as another user: what a command of ours
// sends it, it notes.
type trustSpy struct {
	proc    *proc
	sock    string // where it listens, until a test moves the file
	markers atomic.Int32
}

// startTrustSpy starts sockspy as uid on a socket in a directory of that
// user's own, under base.
func startTrustSpy(t *testing.T, bin, base string, uid int) *trustSpy {
	t.Helper()
	dir := filepath.Join(base, "spy")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
	s := &trustSpy{sock: filepath.Join(dir, "s.sock")}
	s.proc = launch(t, asUser(exec.Command(bin, "serve", s.sock), uid), "sockspy as uid "+fmt.Sprint(uid))
	testkit.WaitUntil(t, "sockspy to listen", func() bool { return strings.Contains(s.proc.logs.String(), "listening\n") })
	return s
}

// heard returns what every connection made to the spy so far sent it
// ("nothing" for one that sent nothing), once the spy has read them all:
// the test connects last, through addr, with a marker, and waits for it.
func (s *trustSpy) heard(t *testing.T, addr string) []string {
	t.Helper()
	marker := fmt.Sprintf("MARKER-%d", s.markers.Add(1))
	c, err := net.Dial("unix", addr)
	if err != nil {
		t.Fatalf("reaching the spy at %s: %v", addr, err)
	}
	if _, err := c.Write([]byte(marker)); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	testkit.WaitUntil(t, "the spy to read "+marker, func() bool {
		lines = strings.Split(s.proc.logs.String(), "\n")
		return strings.Contains(s.proc.logs.String(), `"`+marker+`"`)
	})
	var got []string
	for _, l := range lines {
		if strings.HasPrefix(l, "connection ") && !strings.Contains(l, `"MARKER-`) {
			got = append(got, l[strings.Index(l, ": ")+2:])
		}
	}
	return got
}

// sentNothing fails the test if anything but empty connections reached
// the spy.
func (s *trustSpy) sentNothing(t *testing.T, addr, what string) {
	t.Helper()
	for _, got := range s.heard(t, addr) {
		if got != "nothing" {
			t.Fatalf("%s: the other user's server was sent %s", what, got)
		}
	}
}

// TestCommandsSendNothingToAnotherUsersServer puts another user's server
// where the engine host's socket should be, in each way the owner's
// files allow: renamed into place and given to the owner, linked to,
// left as the other user's, in a root that was open to everyone, and in
// a deep root's runtime directory made first by the other user. Every
// command that would talk to the host refuses, says why, and sends it
// nothing — not the prompt, not the environment with its keys.
func TestCommandsSendNothingToAnotherUsersServer(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("acting as another user (uid 65534) needs root")
	}
	base := trustBase(t)
	spy := startTrustSpy(t, buildSockspy(t, base), base, nobody)
	root := filepath.Join(base, "root")
	t.Cleanup(func() { stopHost(t, root, syscall.SIGTERM) })
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	add(t, root, "linear", "linear.esm.js")
	sock := filepath.Join(root, "engine.sock")
	secret := []string{"UNCAGED_E2E_SECRET=sk-never-to-be-sent"}
	commands := [][]string{{"run", "linear", "--prompt", "the owner's prompt"}, {"engine", "status"}, {"thread", "ps"}, {"engine", "stop"}}
	refused := func(what, sock, want string) {
		t.Helper()
		for _, args := range commands {
			r := runEnv(t, secret, "", root, args...)
			if r.code != 1 || !strings.Contains(r.stderr, "refusing the engine socket "+sock+": "+want) || !strings.Contains(r.stderr, "nothing was sent to it") {
				t.Fatalf("%s: %v: %+v\nwant exit 1 and %q", what, args, r, want)
			}
		}
	}
	move := func(from, to string, uid int) {
		t.Helper()
		if err := os.Rename(from, to); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(to, uid, uid); err != nil {
			t.Fatal(err)
		}
	}

	// Renamed into place and given to the owner: only the kernel's word
	// on who answers tells.
	move(spy.sock, sock, 0)
	refused("renamed into place", sock, "the process answering on it runs as uid 65534 (nobody), not as you (uid 0 (root))")
	spy.sentNothing(t, sock, "renamed into place")
	move(sock, spy.sock, nobody)

	if err := os.Symlink(spy.sock, sock); err != nil {
		t.Fatal(err)
	}
	refused("a link", sock, "it is a symbolic link (to "+spy.sock+")")
	spy.sentNothing(t, spy.sock, "a link")
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}

	// In a root that was open to everyone, as one made under umask 000:
	// the root is refused first, with the chmod that closes it; then the
	// socket its visitor left.
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	move(spy.sock, sock, nobody)
	for _, args := range commands {
		r := runEnv(t, secret, "", root, args...)
		if want := "unsafe storage root " + root + ": it is writable by others (mode 0777)"; r.code != 1 || !strings.Contains(r.stderr, want) || !strings.HasSuffix(r.stderr, "; run: chmod go-w "+root+"\n") {
			t.Fatalf("%v in a root open to everyone: %+v\nwant %q and the chmod", args, r, want)
		}
	}
	if out, err := exec.Command("chmod", "go-w", root).CombinedOutput(); err != nil {
		t.Fatalf("chmod: %v %s", err, out)
	}
	refused("another user's socket", sock, "it belongs to uid 65534 (nobody), not to you (uid 0 (root))")
	spy.sentNothing(t, sock, "another user's socket")
	move(sock, spy.sock, nobody)

	// A deep root keeps its socket in the runtime directory, which the
	// other user made first.
	deep := filepath.Join(base, strings.Repeat("deep/", 20), "root")
	if err := os.MkdirAll(deep, 0o700); err != nil {
		t.Fatal(err)
	}
	add(t, deep, "linear", "linear.esm.js")
	runDir := filepath.Join(base, "run")
	if err := os.Mkdir(runDir, 0o700); err != nil {
		t.Fatal(err)
	}
	runtimeDir := filepath.Join(runDir, "uncaged-workflow")
	if err := os.Mkdir(runtimeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(runtimeDir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(deep))
	deepSock := filepath.Join(runtimeDir, hex.EncodeToString(sum[:8])+".sock")
	move(spy.sock, deepSock, nobody)
	env := append([]string{"XDG_RUNTIME_DIR=" + runDir}, secret...)
	for _, args := range commands {
		r := runEnv(t, env, "", deep, args...)
		if want := runtimeDir + " is not this user's private directory: it belongs to uid 65534"; r.code != 1 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "nothing was sent to it") {
			t.Fatalf("%v through another user's runtime directory: %+v\nwant %q", args, r, want)
		}
	}
	spy.sentNothing(t, deepSock, "another user's runtime directory")

	// With the socket gone, the owner's own host starts and runs the
	// thread, the first and only one.
	if r := run(t, root, "thread", "list"); r.code != 0 || r.stdout != "(no threads found)\n" {
		t.Fatalf("a thread started somewhere: %+v", r)
	}
	id := startEnv(t, root, secret, "linear")
	if s := finished(t, root, id); s.Status != "completed" {
		t.Fatalf("the owner's own thread: %+v", s)
	}
}

// TestARootMadeUnderUmask000IsPrivate makes a root, and runs a thread in
// it through a host started on demand, all under umask 000: the root is
// its owner's alone, nothing in it is writable by others, and it stays
// usable.
func TestARootMadeUnderUmask000IsPrivate(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	bundle, err := filepath.Abs(filepath.Join("testdata", "linear.esm.js"))
	if err != nil {
		t.Fatal(err)
	}
	underUmask000 := func(args ...string) result {
		t.Helper()
		cmd := cliCommand(nil, "", root, args...)
		cmd.Path, cmd.Args = "/bin/sh", append([]string{"/bin/sh", "-c", `umask 000; exec "$0" "$@"`, cmd.Path}, args...)
		return runCommand(t, cmd)
	}
	if r := underUmask000("workflow", "add", "linear", bundle); r.code != 0 {
		t.Fatalf("workflow add under umask 000: %+v", r)
	}
	r := underUmask000("run", "linear")
	if r.code != 0 {
		t.Fatalf("run under umask 000: %+v", r)
	}
	if s := finished(t, root, strings.TrimSpace(r.stdout)); s.Status != "completed" {
		t.Fatalf("thread: %+v", s)
	}
	if fi, err := os.Stat(root); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("root: %v %v, want 0700", fi.Mode(), err)
	}
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink == 0 && fi.Mode().Perm()&0o022 != 0 {
			t.Errorf("%s is writable by others: %v", p, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTheLocalAPIAdmitsOnlyTheOriginsItIsGiven sends `serve` what a web
// page's fetch sends — a text/plain POST that starts a thread, from the
// page's origin — from the pages the API used to admit unasked (any Vite
// dev server on the machine, the original's UI port) and others: each is
// refused and starts nothing. Given one origin (through its variable),
// the API admits that page and no other.
func TestTheLocalAPIAdmitsOnlyTheOriginsItIsGiven(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	add(t, root, "linear", "linear.esm.js")
	post := func(api, origin string) (int, string, string) {
		t.Helper()
		req, err := http.NewRequest("POST", api+"/api/threads", strings.NewReader(`{"workflow":"linear","prompt":"from a web page"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "text/plain;charset=UTF-8")
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", "same-site")
		req.Header.Set("Sec-Fetch-Mode", "cors")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), string(b)
	}
	pages := []string{"http://localhost:5173", "http://127.0.0.1:5173", "http://localhost:7860", "http://127.0.0.1:7860", "http://[::1]:5173", "null"}

	api := startProc(t, []string{"UNCAGED_WORKFLOW_STORAGE_ROOT=" + root}, "uncaged-workflow", "serve", "--listen", "127.0.0.1:0").serving(t)
	for _, origin := range pages {
		if code, allow, body := post(api, origin); code != http.StatusForbidden || allow != "" || !strings.Contains(body, "cross-origin request refused") {
			t.Errorf("a page of %s, no origin given: %d %q %s", origin, code, allow, body)
		}
	}
	if r := run(t, root, "thread", "list"); r.stdout != "(no threads found)\n" {
		t.Fatalf("a web page started a thread: %+v", r)
	}

	given := startProc(t, []string{"UNCAGED_WORKFLOW_STORAGE_ROOT=" + root, "UNCAGED_WORKFLOW_ALLOW_ORIGIN=http://localhost:5173"},
		"uncaged-workflow", "serve", "--listen", "127.0.0.1:0").serving(t)
	for _, origin := range pages[1:] {
		if code, allow, body := post(given, origin); code != http.StatusForbidden || allow != "" {
			t.Errorf("a page of %s, http://localhost:5173 given: %d %q %s", origin, code, allow, body)
		}
	}
	code, allow, body := post(given, "http://localhost:5173")
	var ref struct{ ThreadID string }
	if code != http.StatusCreated || allow != "http://localhost:5173" || json.Unmarshal([]byte(body), &ref) != nil || ref.ThreadID == "" {
		t.Fatalf("the page of the origin given: %d %q %s", code, allow, body)
	}
	finished(t, root, ref.ThreadID)
}
