package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/agents/llm"
	"github.com/uncaged/workflow/shared/testkit"
)

// newWorkspace makes a workspace with a.txt and sub/b.txt next to a file
// outside it, and symlinks inside: in -> sub, root -> /, out -> ../secret.
func newWorkspace(t *testing.T) (*Workspace, string) {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "ws")
	must(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("alpha\nbeta\ngamma\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "sub", "b.txt"), []byte("bee"), 0o644))
	must(t, os.WriteFile(filepath.Join(base, "secret"), []byte("top secret"), 0o644))
	must(t, os.Symlink("sub", filepath.Join(dir, "in")))
	must(t, os.Symlink("/", filepath.Join(dir, "root")))
	must(t, os.Symlink("../secret", filepath.Join(dir, "out")))
	must(t, os.Symlink(base, filepath.Join(dir, "up")))
	w, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w, base
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "f")
	must(t, os.WriteFile(file, nil, 0o644))
	for dir, want := range map[string]string{
		"":                          "no directory given",
		"  ":                        "no directory given",
		file:                        "is not a directory",
		filepath.Join(file, "nope"): "",
		"/definitely/not/here/ws":   "does not exist",
	} {
		_, err := Open(dir)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) = %v, want an error containing %q", dir, err, want)
		}
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	w, base := newWorkspace(t)
	inside := map[string]string{
		"a.txt":                         "a.txt",
		"./sub/../a.txt":                "a.txt",
		".":                             ".",
		"in/b.txt":                      filepath.Join("sub", "b.txt"),
		"new/dir/file.go":               filepath.Join("new", "dir", "file.go"),
		filepath.Join(w.Dir(), "a.txt"): "a.txt",
		"a.txt/x":                       filepath.Join("a.txt", "x"), // fails later, but inside
	}
	for in, want := range inside {
		got, err := w.Resolve(in)
		if err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	outside := []string{
		"../x", "../secret", "sub/../../secret", "/etc/passwd", "/", base, filepath.Join(base, "secret"),
		"root", "root/etc/passwd", "out", "up/secret", "up/ws/../secret", "root/tmp/new-file",
	}
	for _, in := range outside {
		got, err := w.Resolve(in)
		if err == nil || !strings.Contains(err.Error(), "is outside the workspace") {
			t.Errorf("Resolve(%q) = %q, %v; want it refused", in, got, err)
		}
	}
	for in, want := range map[string]string{"": "path is required", "a\x00b": "NUL"} {
		if _, err := w.Resolve(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Resolve(%q) = %v, want %q", in, err, want)
		}
	}
}

func TestReadFile(t *testing.T) {
	t.Parallel()
	w, _ := newWorkspace(t)
	cases := []struct {
		offset, limit int
		want          string
	}{
		{0, 0, "1|alpha\n2|beta\n3|gamma"},
		{2, 0, "2|beta\n3|gamma"},
		{1, 2, "1|alpha\n2|beta\n... (1 more lines; call read_file with offset 3 to continue)"},
		{3, 5, "3|gamma"},
	}
	for _, c := range cases {
		got, err := w.ReadFile("a.txt", c.offset, c.limit)
		if err != nil || got != c.want {
			t.Errorf("ReadFile(a.txt, %d, %d) = %q, %v; want %q", c.offset, c.limit, got, err, c.want)
		}
	}
	got, err := w.ReadFile("in/b.txt", 1, 0)
	if err != nil || got != "1|bee" {
		t.Errorf("through an inside symlink: %q, %v", got, err)
	}
	must(t, os.WriteFile(filepath.Join(w.Dir(), "empty"), nil, 0o644))
	if got, err := w.ReadFile("empty", 0, 0); err != nil || got != "" {
		t.Errorf("empty file: %q, %v", got, err)
	}
	big, err := os.Create(filepath.Join(w.Dir(), "big"))
	must(t, err)
	must(t, big.Truncate(MaxReadBytes+1))
	if err := big.Close(); err != nil {
		t.Fatal(err)
	}
	bad := map[[3]string]string{
		{"a.txt", "4", "0"}:           "offset 4 is past the end of a.txt (3 lines)",
		{"a.txt", "-1", "0"}:          "offset must be a line number >= 1",
		{"a.txt", "1", "-2"}:          "limit must be >= 1",
		{"missing.txt", "0", "0"}:     "file not found: missing.txt",
		{"sub", "0", "0"}:             "sub is a directory",
		{"big", "0", "0"}:             "big is too large",
		{"../secret", "0", "0"}:       "outside the workspace",
		{"out", "0", "0"}:             "outside the workspace",
		{"root/etc/passwd", "0", "0"}: "outside the workspace",
	}
	for in, want := range bad {
		off, _ := strconv.Atoi(in[1])
		lim, _ := strconv.Atoi(in[2])
		if _, err := w.ReadFile(in[0], off, lim); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadFile(%v) = %v, want %q", in, err, want)
		}
	}
}

func TestWriteFile(t *testing.T) {
	t.Parallel()
	w, base := newWorkspace(t)
	got, err := w.WriteFile("deep/new/file.txt", "héllo")
	if err != nil || got != "Successfully wrote 6 bytes to deep/new/file.txt" {
		t.Fatalf("%q, %v", got, err)
	}
	if b, _ := os.ReadFile(filepath.Join(w.Dir(), "deep", "new", "file.txt")); string(b) != "héllo" {
		t.Fatalf("content %q", b)
	}
	script := filepath.Join(w.Dir(), "run.sh")
	must(t, os.WriteFile(script, []byte("old"), 0o755))
	if _, err := w.WriteFile("run.sh", "echo hi"); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(script); st.Mode().Perm() != 0o755 {
		t.Fatalf("mode changed to %v", st.Mode())
	}
	for path, want := range map[string]string{
		".":               "is a directory",
		"sub":             "is a directory",
		"../escape.txt":   "outside the workspace",
		"up/escape.txt":   "outside the workspace",
		"root/tmp/escape": "outside the workspace",
		"out":             "outside the workspace",
		"/tmp/escape-abs": "outside the workspace",
		"a.txt/child":     "a.txt/child",
	} {
		if _, err := w.WriteFile(path, "x"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("WriteFile(%q) = %v, want %q", path, err, want)
		}
	}
	// A dangling symlink to a file outside is not followed to create it.
	must(t, os.Symlink(filepath.Join(base, "dangling-target"), filepath.Join(w.Dir(), "dangle")))
	if _, err := w.WriteFile("dangle", "x"); err == nil {
		t.Error("wrote through a dangling symlink")
	}
	if _, err := os.Lstat(filepath.Join(base, "dangling-target")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file was created outside through a dangling symlink: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(base, "secret")); string(b) != "top secret" {
		t.Fatalf("the outside file changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(base, "escape.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file was written outside: %v", err)
	}
}

// A FIFO in the workspace (shell_exec can make one) is refused by every
// file tool at once: opening it would wait for a reader or writer that
// never comes, and cancelling the run cannot interrupt an open.
func TestFileToolsRefuseAFIFO(t *testing.T) {
	t.Parallel()
	w, _ := newWorkspace(t)
	must(t, syscall.Mkfifo(filepath.Join(w.Dir(), "pipe"), 0o644))
	done := make(chan error, 3)
	go func() {
		_, err := w.WriteFile("pipe", "x")
		done <- err
		_, err = w.ReadFile("pipe", 0, 0)
		done <- err
		_, err = w.PatchFile("pipe", "a", "b")
		done <- err
	}()
	for _, tool := range []string{"write_file", "read_file", "patch_file"} {
		select {
		case err := <-done:
			if err == nil || err.Error() != "pipe is not a regular file" {
				t.Errorf("%s on a FIFO: %v", tool, err)
			}
		case <-time.After(testkit.WaitBound):
			t.Fatalf("%s blocked on a FIFO", tool)
		}
	}
}

func TestPatchFile(t *testing.T) {
	t.Parallel()
	w, _ := newWorkspace(t)
	got, err := w.PatchFile("a.txt", "beta", "BETA")
	if err != nil || got != "Successfully patched a.txt" {
		t.Fatalf("%q, %v", got, err)
	}
	must(t, os.WriteFile(filepath.Join(w.Dir(), "dup.txt"), []byte("x\nx\n"), 0o644))
	for in, want := range map[[3]string]string{
		{"a.txt", "beta", "z"}:      "old_string not found in a.txt",
		{"dup.txt", "x", "y"}:       "old_string is not unique in dup.txt (2 occurrences)",
		{"a.txt", "", "z"}:          "old_string must not be empty",
		{"missing.txt", "a", "b"}:   "file not found: missing.txt",
		{"out", "top", "bottom"}:    "outside the workspace",
		{"../secret", "top", "bot"}: "outside the workspace",
	} {
		if _, err := w.PatchFile(in[0], in[1], in[2]); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("PatchFile(%v) = %v, want %q", in, err, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(w.Dir(), "a.txt")); string(b) != "alpha\nBETA\ngamma\n" {
		t.Fatalf("a.txt = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(w.Dir(), "dup.txt")); string(b) != "x\nx\n" {
		t.Fatalf("an ambiguous patch changed the file: %q", b)
	}
}

func TestShellExec(t *testing.T) {
	t.Parallel()
	w, _ := newWorkspace(t)
	ctx := context.Background()
	out, err := w.ShellExec(ctx, "pwd; cat a.txt | head -1; echo oops >&2", 0)
	if err != nil || out != w.Dir()+"\nalpha\noops\n" {
		t.Fatalf("%q, %v", out, err)
	}
	_, err = w.ShellExec(ctx, "echo partial; exit 3", 0)
	if err == nil || err.Error() != "command exited with status 3\npartial\n" {
		t.Fatalf("err = %v", err)
	}
	out, err = w.ShellExec(ctx, "yes 0123456789 | head -c 20000", 0)
	if err != nil || !strings.HasSuffix(out, truncatedMark) || len(out) != MaxShellOutput+len(truncatedMark) {
		t.Fatalf("truncation: len %d, %v", len(out), err)
	}
	if _, err := w.ShellExec(ctx, "", 0); err == nil {
		t.Fatal("empty command accepted")
	}
	// A command that backgrounds a job still returns when the shell exits.
	out, err = w.ShellExec(ctx, "sleep 100 & echo $! > bg.pid; echo started", 0)
	if err != nil || out != "started\n" {
		t.Fatalf("%q, %v", out, err)
	}
	bg := readPid(t, filepath.Join(w.Dir(), "bg.pid"))
	if err := syscall.Kill(bg, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, bg)
}

// waitGone waits until pid no longer runs (gone or a zombie).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	testkit.WaitUntil(t, fmt.Sprintf("process %d to end", pid), func() bool { return testkit.ProcessGone(pid) })
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	must(t, err)
	return pid
}

func TestShellTimeoutKillsTheGroup(t *testing.T) {
	t.Parallel()
	w, _ := newWorkspace(t)
	// The child is started in the background and its pid recorded before
	// the shell itself blocks.
	_, err := w.ShellExec(context.Background(), "sleep 100 & echo $! > child.pid; wait", 200*time.Millisecond)
	if !errors.Is(err, errTimedOut) || err.Error() != "command timed out" {
		t.Fatalf("err = %v", err)
	}
	waitGone(t, readPid(t, filepath.Join(w.Dir(), "child.pid")))
}

func TestShellCancelKillsTheGroup(t *testing.T) {
	t.Parallel()
	w, _ := newWorkspace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pidFile := filepath.Join(w.Dir(), "child.pid")
	done := make(chan error, 1)
	go func() {
		_, err := w.ShellExec(ctx, "sleep 100 & echo $! > child.pid.tmp && mv child.pid.tmp child.pid; wait", time.Hour)
		done <- err
	}()
	testkit.WaitUntil(t, "the command to record its child's pid", func() bool {
		if _, err := os.Stat(pidFile); err == nil {
			return true
		}
		select {
		case err := <-done:
			t.Fatalf("returned early: %v", err)
		default:
		}
		return false
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	waitGone(t, readPid(t, pidFile))
}

func call(t *testing.T, tools []llm.Tool, name, args string) string {
	t.Helper()
	for _, tl := range tools {
		if tl.Name == name {
			res, err := tl.Handler(context.Background(), args)
			if err != nil {
				t.Fatalf("%s(%s) returned an error: %v", name, args, err)
			}
			return res
		}
	}
	t.Fatalf("no tool %s", name)
	return ""
}

func TestToolHandlers(t *testing.T) {
	t.Parallel()
	w, _ := newWorkspace(t)
	tl, err := w.Tools(nil)
	if err != nil || len(tl) != 4 {
		t.Fatalf("tools %d, %v", len(tl), err)
	}
	cases := []struct{ name, args, want string }{
		{ReadFile, `{"path":"a.txt","offset":2,"limit":1}`, "2|beta\n... (1 more lines; call read_file with offset 3 to continue)"},
		{ReadFile, `{"path":"a.txt","offset":null,"limit":null}`, "1|alpha\n2|beta\n3|gamma"},
		{ReadFile, `{"path":"a.txt","offset":1.5}`, "Error: offset must be an integer, got 1.5"},
		{ReadFile, `{"path":"a.txt","offset":"2"}`, "Error: offset must be an integer"},
		{ReadFile, `{"path":7}`, "Error: path must be a string"},
		{ReadFile, `{}`, "Error: path is required"},
		{ReadFile, `not json`, "Error: arguments must be a JSON object"},
		{ReadFile, `[1]`, "Error: arguments must be a JSON object"},
		{ReadFile, `{"path":"/etc/passwd"}`, "Error: path /etc/passwd is outside the workspace " + w.Dir()},
		{WriteFile, `{"path":"n.txt","content":"abc"}`, "Successfully wrote 3 bytes to n.txt"},
		{WriteFile, `{"path":"n.txt"}`, "Error: content is required"},
		{PatchFile, `{"path":"n.txt","old_string":"b","new_string":"B"}`, "Successfully patched n.txt"},
		{PatchFile, `{"path":"n.txt","old_string":"q","new_string":"B"}`, "Error: old_string not found in n.txt"},
		{ShellExec, `{"command":"cat n.txt"}`, "aBc"},
		{ShellExec, `{"command":"true"}`, "(no output)"},
		{ShellExec, `{"command":"exit 2"}`, "Error: command exited with status 2\n"},
		{ShellExec, `{"command":"sleep 100","timeout":0.1}`, "Error: command timed out"},
		{ShellExec, `{"command":"true","timeout":-1}`, "Error: timeout must be a number of seconds between 0 and 86400, got -1"},
		{ShellExec, `{"command":"true","timeout":"5"}`, "Error: timeout must be a number of seconds"},
		{ShellExec, `{}`, "Error: command is required"},
	}
	for _, c := range cases {
		if got := call(t, tl, c.name, c.args); got != c.want {
			t.Errorf("%s(%s) = %q, want %q", c.name, c.args, got, c.want)
		}
	}

	sub, err := w.Tools([]string{ShellExec, ReadFile})
	if err != nil || len(sub) != 2 || sub[0].Name != ReadFile || sub[1].Name != ShellExec {
		t.Fatalf("subset %+v, %v", sub, err)
	}
	if _, err := w.Tools([]string{"read_file", "rm_rf"}); err == nil || !strings.Contains(err.Error(), `unknown tool "rm_rf"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestHandlerReturnsCancellation(t *testing.T) {
	t.Parallel()
	w, _ := newWorkspace(t)
	tl, _ := w.Tools([]string{ShellExec})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tl[0].Handler(ctx, `{"command":"sleep 100"}`); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}
