package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/connector/link"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/storage"
)

func statusJSON(t *testing.T, c *cli) Status {
	t.Helper()
	var s Status
	if err := json.Unmarshal([]byte(c.ok("status", "--json")), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStatusOfAMissingRootCreatesNothing(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	out := c.ok("status")
	for _, want := range []string{c.root + " (not created yet)", "engine host   not running", "0 registered", "0 active, 0 finished", "connect       never run"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(c.root); !os.IsNotExist(err) {
		t.Fatalf("status created the root: %v", err)
	}
	s := statusJSON(t, c)
	if s.Root != c.root || s.RootExists || s.Engine.Running || s.Connect != nil || s.Workflows != 0 {
		t.Fatalf("json: %+v", s)
	}
}

func TestStatusCountsTheOriginalStore(t *testing.T) {
	t.Parallel()
	c := fixtureCLI(t)
	before := c.snapshot()
	out := c.ok("status")
	for _, want := range []string{"storage root  " + c.root + "\n", "workflows     1 registered", "threads       1 active, 2 finished"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "problem") {
		t.Errorf("unexpected problem:\n%s", out)
	}
	s := statusJSON(t, c)
	if s.Workflows != 1 || s.Threads != (ThreadCounts{Active: 1, Finished: 2}) || len(s.Problems) != 0 {
		t.Fatalf("json: %+v", s)
	}
	c.unchanged(before)
}

func TestStatusReportsABrokenRegistryAndTheRest(t *testing.T) {
	t.Parallel()
	c := fixtureCLI(t)
	if err := os.WriteFile(filepath.Join(c.root, "workflow.yaml"), []byte("workflows: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code := c.run("status")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out, "workflows     unknown") || !strings.Contains(out, "problem       registry: ") || !strings.Contains(out, "1 active, 2 finished") {
		t.Fatalf("status:\n%s", out)
	}
	if s := statusJSON(t, c); s.Workflows != -1 || len(s.Problems) != 1 {
		t.Fatalf("json: %+v", s)
	}
}

func TestStatusShowsARunningEngineHost(t *testing.T) {
	t.Parallel()
	c := fixtureCLI(t)
	l := storage.Layout{Root: c.root}
	serveHost(t, host.Options{Layout: l, MaxThreads: 3})
	out := c.ok("status")
	if want := fmt.Sprintf("engine host   running, pid %d, up since ", os.Getpid()); !strings.Contains(out, want) {
		t.Fatalf("status lacks %q:\n%s", want, out)
	}
	if !strings.Contains(out, "0 threads running, 0 paused (runs up to 3 at once)") {
		t.Fatalf("status:\n%s", out)
	}
	s := statusJSON(t, c)
	if !s.Engine.Running || s.Engine.PID != os.Getpid() || s.Engine.MaxThreads != 3 || s.Engine.StartedAt == 0 {
		t.Fatalf("json: %+v", s.Engine)
	}
}

func TestStatusFollowsTheConnectLink(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	l := storage.Layout{Root: c.root}
	rec, err := recordConnect(l, "laptop", "https://gw.example.com")
	if err != nil {
		t.Fatal(err)
	}
	rec.set(link.StateRetrying, "dial tcp: connection refused")
	out := c.ok("status")
	if want := `retrying: "laptop" to https://gw.example.com since `; !strings.Contains(out, want) || !strings.Contains(out, "— dial tcp: connection refused") {
		t.Fatalf("status lacks %q:\n%s", want, out)
	}
	rec.set(link.StateConnected, "")
	s := statusJSON(t, c)
	if s.Connect == nil || !s.Connect.Running || s.Connect.State != link.StateConnected || s.Connect.PID != os.Getpid() || s.Connect.Name != "laptop" || s.Connect.Detail != "" {
		t.Fatalf("json: %+v", s.Connect)
	}

	// A second connect on the same root is refused and leaves the first
	// one's record.
	if _, err := recordConnect(l, "other", "https://elsewhere.example.com"); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("a second connect on the root: %v", err)
	}
	if s := statusJSON(t, c); s.Connect.Name != "laptop" || s.Connect.State != link.StateConnected {
		t.Fatalf("second connect overwrote the record: %+v", s.Connect)
	}

	rec.close()
	out = c.ok("status")
	if want := `not running (last: "laptop" to https://gw.example.com, stopped since `; !strings.Contains(out, want) {
		t.Fatalf("status lacks %q:\n%s", want, out)
	}
}

// A connect that gave up leaves its reason and exit code for status, and
// the next connect's record replaces it.
func TestStatusSaysWhyConnectGaveUp(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	l := storage.Layout{Root: c.root}
	rec, err := recordConnect(l, "laptop", "https://gw.example.com")
	if err != nil {
		t.Fatal(err)
	}
	rec.set(link.StateRetrying, "cannot reach the gateway")
	rec.fail("gateway refused the connection (401): token revoked [revoked]", ExitConnectCredential)
	rec.close()
	out := c.ok("status")
	for _, want := range []string{`connect       gave up (exit 11): "laptop" to https://gw.example.com, at `, "\n              why: gateway refused the connection (401): token revoked [revoked]\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if s := statusJSON(t, c); s.Connect.State != link.StateFailed || s.Connect.ExitCode != 11 || s.Connect.Running {
		t.Fatalf("json: %+v", s.Connect)
	}
	next, err := recordConnect(l, "laptop", "https://gw.example.com")
	if err != nil {
		t.Fatal(err)
	}
	next.set(link.StateConnected, "")
	if s := statusJSON(t, c); s.Connect.State != link.StateConnected || s.Connect.ExitCode != 0 || s.Connect.Detail != "" {
		t.Fatalf("after a new connect: %+v", s.Connect)
	}
	next.close()
}

func TestStatusDoesNotTrustAStaleConnectRecord(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	l := storage.Layout{Root: c.root}
	// What a connect killed with SIGKILL leaves: "connected", and no lock
	// holder (the pid may belong to someone else by now).
	stale := ConnectState{Name: "laptop", Gateway: "https://gw.example.com", State: link.StateConnected, Since: time.Now().UnixMilli(), PID: os.Getpid()}
	b, _ := json.Marshal(stale)
	if err := os.MkdirAll(c.root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(connectStateFile(l), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if s := statusJSON(t, c); s.Connect == nil || s.Connect.Running {
		t.Fatalf("stale record reported as running: %+v", s.Connect)
	}
	if out := c.ok("status"); !strings.Contains(out, "not running (last:") {
		t.Fatalf("status:\n%s", out)
	}
}

func TestStatusReportsAGarbledConnectRecord(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	if err := os.MkdirAll(c.root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(connectStateFile(storage.Layout{Root: c.root}), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code := c.run("status")
	if code != 0 || !strings.Contains(out, "problem       connect: ") || !strings.Contains(out, "connect       never run") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestStatusArguments(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.fails("status takes no arguments", "status", "extra")
	c.fails("unknown flag", "status", "--bogus")
}

func TestANewRootIsPrivate(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("thread", "list")
	st, err := os.Stat(c.root)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("root after the first command: %v %v, want a 0700 directory", st, err)
	}
}
