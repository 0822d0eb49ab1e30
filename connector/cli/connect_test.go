package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uncaged/workflow/connector/link"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/shared/envflag"
)

// connect takes the gateway credential out of its environment once read,
// so the threads, agents and shell commands it starts do not inherit it.
func TestConnectorTokenLeavesNoCredentialInTheEnvironment(t *testing.T) {
	for _, env := range []string{EnvToken, EnvSharedSecret} {
		t.Setenv(EnvToken, "")
		t.Setenv(EnvSharedSecret, "")
		t.Setenv(env, "credential-"+env)
		a := &app{env: Env{Getenv: os.Getenv}}
		cmd := a.connectCmd()
		if err := envflag.Apply(cmd.Flags(), os.Getenv); err != nil {
			t.Fatal(err)
		}
		token, _ := cmd.Flags().GetString("token")
		tok, err := a.connectorToken("laptop", token, "")
		if err != nil || tok != "credential-"+env {
			t.Fatalf("%s: token %q, %v", env, tok, err)
		}
		if v, ok := os.LookupEnv(env); ok {
			t.Fatalf("%s is still in the environment: %q", env, v)
		}
	}
}

// A gateway URL or a name that cannot work stops connect at once, before
// anything is dialed or served, with its exit code; status then says why.
func TestConnectRefusesAnUnusableGatewayAtStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, gateway, want string }{
		{"laptop", "gw.example.com:8080", `gateway URL "gw.example.com:8080" has no scheme: write https://gw.example.com:8080`},
		{"laptop", "ftp://gw.example.com", `unsupported scheme "ftp"`},
		{"laptop", "https://", "has no host"},
		{"laptop", "", "connect requires --gateway URL"},
		{"Laptop_1", "https://gw.example.com", `invalid connector name "Laptop_1"`},
	} {
		c := newCLI(t)
		out, errOut, code := c.run("connect", "--name", tc.name, "--gateway", tc.gateway, "--token", "t")
		if code != ExitConnectConfig || !strings.HasPrefix(errOut, "connect: ") || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "stopped (exit 10)") || out != "" {
			t.Errorf("%q, %q: exit %d\nstdout: %s\nstderr: %s", tc.name, tc.gateway, code, out, errOut)
			continue
		}
		status := c.ok("status")
		if !strings.Contains(status, fmt.Sprintf(`connect       gave up (exit 10): %q to %s, at `, tc.name, tc.gateway)) || !strings.Contains(status, "why: ") || !strings.Contains(status, tc.want) {
			t.Errorf("%q, %q: status:\n%s", tc.name, tc.gateway, status)
		}
		if _, err := os.Stat(instanceFile(storage.Layout{Root: c.root})); !os.IsNotExist(err) {
			t.Errorf("%q, %q: connect went on to make an instance id: %v", tc.name, tc.gateway, err)
		}
	}
}

// connect's help lists every exit code it stops with, and the systemd
// unit prevents a restart on exactly those.
func TestConnectDocumentsItsExitCodes(t *testing.T) {
	t.Parallel()
	help := newCLI(t).ok("connect", "--help")
	for _, c := range connectExitCodes {
		if !strings.Contains(help, fmt.Sprintf("\n  %d  %s\n", c.code, c.what)) {
			t.Errorf("help lacks exit code %d:\n%s", c.code, help)
		}
		if got := connectExitCode(c.kind); got != c.code {
			t.Errorf("kind %d exits %d, want %d", c.kind, got, c.code)
		}
	}
	if !strings.Contains(help, "--takeover") || restartPreventExitStatus() != "10 11 12 13 14 15 16" {
		t.Errorf("help or unit list: %q\n%s", restartPreventExitStatus(), help)
	}
}

// A root's instance id is made once and kept: the same on every call and
// for processes starting at once, another for another root; a damaged
// file is an error that changes nothing.
func TestInstanceIDIsStablePerRoot(t *testing.T) {
	t.Parallel()
	l := storage.Layout{Root: t.TempDir()}
	ids := make(chan string, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			id, err := instanceID(l)
			if err != nil {
				t.Error(err)
			}
			ids <- id
		})
	}
	wg.Wait()
	close(ids)
	first := <-ids
	for id := range ids {
		if id != first {
			t.Fatalf("two ids for one root: %q, %q", first, id)
		}
	}
	if !instancePattern().MatchString(first) {
		t.Fatalf("id %q", first)
	}
	if again, err := instanceID(l); err != nil || again != first {
		t.Fatalf("again: %q, %v", again, err)
	}
	if other, err := instanceID(storage.Layout{Root: t.TempDir()}); err != nil || other == first {
		t.Fatalf("another root: %q, %v", other, err)
	}
	for _, bad := range []string{"", "short", "Not An Id At All!!", strings.Repeat("a", 65)} {
		if err := os.WriteFile(instanceFile(l), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if id, err := instanceID(l); err == nil || !strings.Contains(err.Error(), "not an instance id") {
			t.Errorf("%q: %q, %v", bad, id, err)
		}
		if b, _ := os.ReadFile(instanceFile(l)); string(b) != bad {
			t.Errorf("%q: the file became %q", bad, b)
		}
	}
}

// A root's instance key is made once, kept private (0600 whatever the
// umask), the same for processes starting at once and another for another
// root; a damaged or readable-by-others file is an error that changes
// nothing and never shows what the file holds.
func TestInstanceKeyIsPrivateAndStablePerRoot(t *testing.T) {
	t.Parallel()
	l := storage.Layout{Root: t.TempDir()}
	keys := make(chan string, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			key, err := instanceKey(l)
			if err != nil {
				t.Error(err)
			}
			keys <- key
		})
	}
	wg.Wait()
	close(keys)
	first := <-keys
	for key := range keys {
		if key != first {
			t.Fatal("two keys for one root")
		}
	}
	if !instanceKeyPattern().MatchString(first) || len(first) < 52 {
		t.Fatalf("key of %d characters", len(first))
	}
	fi, err := os.Stat(instanceKeyFile(l))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi.Mode(), err)
	}
	if id, err := instanceID(l); err != nil || id == first {
		t.Fatalf("the id is the key: %v", err)
	}
	if again, err := instanceKey(l); err != nil || again != first {
		t.Fatalf("again: %v", err)
	}
	if other, err := instanceKey(storage.Layout{Root: t.TempDir()}); err != nil || other == first {
		t.Fatalf("another root: %v", err)
	}

	// Readable by others: refused, the file left as it is.
	if err := os.Chmod(instanceKeyFile(l), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := instanceKey(l); err == nil || !strings.Contains(err.Error(), "chmod 600") || strings.Contains(err.Error(), first) {
		t.Fatalf("a readable key: %v", err)
	}
	for _, bad := range []string{"", "short", strings.Repeat("A", 52), first + " extra words", strings.Repeat("a", 129)} {
		if err := os.WriteFile(instanceKeyFile(l), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(instanceKeyFile(l), 0o600); err != nil {
			t.Fatal(err)
		}
		key, err := instanceKey(l)
		if err == nil || !strings.Contains(err.Error(), "does not hold an instance key") || (len(bad) > 8 && strings.Contains(err.Error(), bad[:8])) {
			t.Errorf("%d bytes: %q, %v", len(bad), key, err)
		}
		if b, _ := os.ReadFile(instanceKeyFile(l)); string(b) != bad {
			t.Errorf("%d bytes: the file changed", len(bad))
		}
	}
}

// Only one connect serves a root. A second one stops at once, before it
// makes or dials anything, with its own exit code and a message naming
// the first one (pid, name, gateway) and how to stop it; the first one's
// record stays as it was. A connect that died holds nothing: the next one
// starts, whatever its connect.json still says.
func TestConnectRefusesASecondConnectOnItsRoot(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	l := storage.Layout{Root: c.root}
	if err := os.MkdirAll(c.root, 0o700); err != nil {
		t.Fatal(err)
	}
	first, err := recordConnect(l, "laptop", "https://gw.example.com")
	if err != nil {
		t.Fatal(err)
	}
	first.set(link.StateConnected, "")
	before, err := os.ReadFile(connectStateFile(l))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"laptop", "desk"} {
		out, errOut, code := c.run("connect", "--name", name, "--gateway", "https://other.example.com", "--token", "t")
		want := fmt.Sprintf(`connect: another connect already serves this storage root (%s): pid %d, "laptop" to https://gw.example.com, connected since `, c.root, os.Getpid())
		if code != ExitConnectRootInUse || out != "" || strings.Count(errOut, want) != 1 || !strings.Contains(errOut, fmt.Sprintf("stop that one first (kill %d)", os.Getpid())) ||
			!strings.Contains(errOut, "stopped (exit 16)") {
			t.Fatalf("--name %s: exit %d\nstdout: %s\nstderr: %s", name, code, out, errOut)
		}
	}
	if after, _ := os.ReadFile(connectStateFile(l)); string(after) != string(before) {
		t.Fatalf("the refused connect changed the record:\n%s\nwas:\n%s", after, before)
	}
	for _, f := range []string{instanceFile(l), instanceKeyFile(l)} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Fatalf("the refused connect went on to make %s: %v", f, err)
		}
	}
	first.close()

	// What a connect killed with SIGKILL leaves: "connected", by a pid
	// that is gone, and no lock holder.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale, _ := json.Marshal(ConnectState{Name: "laptop", Gateway: "https://gw.example.com", State: link.StateConnected, Since: time.Now().UnixMilli(), PID: dead.Process.Pid})
	if err := os.WriteFile(connectStateFile(l), stale, 0o644); err != nil {
		t.Fatal(err)
	}
	next, err := recordConnect(l, "laptop", "https://gw.example.com")
	if err != nil {
		t.Fatalf("after a connect that died: %v", err)
	}
	if s := statusJSON(t, c); s.Connect == nil || !s.Connect.Running || s.Connect.PID != os.Getpid() || s.Connect.State != link.StateConnecting {
		t.Fatalf("the next connect's record: %+v", s.Connect)
	}
	next.close()
}

// Whatever keeps connect from having a credential — no token, a token
// file that is not there, is empty or cannot be read — stops it with the
// credential's exit code, said once, on stderr, before anything is made.
func TestConnectWithoutACredentialExits11(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "connect: no token: pass --token-file, or set " + EnvToken},
		{[]string{"--token-file", filepath.Join(dir, "nosuch")}, "connect: --token-file " + filepath.Join(dir, "nosuch") + ": no such file; write this connector's token there (`uncaged-gateway token create --connector laptop > "},
		{[]string{"--token-file", empty}, "connect: --token-file " + empty + " is empty"},
		{[]string{"--token-file", dir}, "connect: --token-file: read " + dir + ": is a directory"},
	} {
		c := newCLI(t)
		args := append([]string{"connect", "--name", "laptop", "--gateway", "https://gw.example.com"}, tc.args...)
		out, errOut, code := c.run(args...)
		if code != ExitConnectCredential || out != "" || strings.Count(errOut, tc.want) != 1 || strings.Count(errOut, "\n") != 2 || !strings.Contains(errOut, "stopped (exit 11)") {
			t.Errorf("%v: exit %d\nstdout: %s\nstderr: %s", tc.args, code, out, errOut)
		}
		if _, err := os.Stat(instanceFile(storage.Layout{Root: c.root})); !os.IsNotExist(err) {
			t.Errorf("%v: connect went on to make an instance id: %v", tc.args, err)
		}
	}
}
