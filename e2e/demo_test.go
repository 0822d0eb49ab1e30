package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// demoScript is what `make demo` runs.
const demoScript = "../deploy/demo/run-demo.sh"

// demoLink is the one-click login link the demo prints.
var demoLink = regexp.MustCompile(`(http://127\.0\.0\.1:(\d+))/#token=([A-Za-z0-9._-]+)`)

// startDemo runs the demo script with the tests' binaries, in a process
// group of its own (a terminal's Ctrl-C reaches the whole group) and with
// its temporary directory under a directory of the test's, which it
// returns: every process the demo starts carries that path in its
// environment or arguments, so none can hide from demoLeftovers.
func startDemo(t *testing.T, demoPort string) (*proc, string) {
	t.Helper()
	tmp := t.TempDir()
	cmd := exec.Command("bash", demoScript)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DEMO_") && !strings.HasPrefix(kv, "UNCAGED_") && !strings.HasPrefix(kv, "WORKFLOW_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "DEMO_BIN="+binDir, "TMPDIR="+tmp)
	if demoPort != "" {
		cmd.Env = append(cmd.Env, "DEMO_PORT="+demoPort)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := launch(t, cmd, "run-demo.sh")
	// Before launch's own cleanup (cleanups run last first): stop the demo
	// as Ctrl-C does, then make sure nothing of it is left.
	t.Cleanup(func() {
		if !p.exited() {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGINT) // gone already is fine
			p.stop(syscall.SIGTERM)
		}
		for _, pid := range demoLeftovers(tmp) {
			_ = syscall.Kill(pid, syscall.SIGKILL) // the test fails below; leave nothing behind
		}
	})
	return p, tmp
}

// demoLeftovers lists the processes whose arguments or environment name
// dir, other than zombies (whose environment reads empty).
func demoLeftovers(dir string) []int {
	entries, _ := os.ReadDir("/proc") // unreadable: nothing to list
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		for _, f := range []string{"cmdline", "environ"} {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), f))
			if err == nil && bytes.Contains(b, []byte(dir)) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// stopDemo sends Ctrl-C to the demo's process group and checks that the
// demo exits, leaving no process and no temporary directory behind.
func stopDemo(t *testing.T, p *proc, tmp string) {
	t.Helper()
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the demo to exit on Ctrl-C", p.exited)
	demoCleanedUp(t, tmp)
}

// demoCleanedUp checks that the demo left no process running and removed
// its temporary directory.
func demoCleanedUp(t *testing.T, tmp string) {
	t.Helper()
	testkit.WaitUntil(t, "every process of the demo to be gone", func() bool { return len(demoLeftovers(tmp)) == 0 })
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the demo left %s behind in its temporary directory", left[0].Name())
	}
}

// otherServer holds addr (":0" for any port) with a server that answers
// 200 to everything, /healthz included, as another program on the
// demo's port might; it returns the port.
func otherServer(t *testing.T, addr string) (string, error) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, `{"ok":true}`) })}
	go func() { _ = srv.Serve(ln) }() // ends with Close below
	t.Cleanup(func() { _ = srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port, nil
}

// DEMO_PORT names a port that is taken: the demo stops, saying so with
// the end of the gateway's log, instead of checking the other server's
// health and printing a URL and a token that do not work.
func TestDemoFailsLoudlyWhenDEMO_PORTIsTaken(t *testing.T) {
	t.Parallel()
	port, err := otherServer(t, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p, tmp := startDemo(t, port)
	testkit.WaitUntil(t, "the demo to give up", p.exited)
	out := p.logs.String()
	var exit *exec.ExitError
	if !errors.As(p.exit, &exit) || exit.ExitCode() != 1 {
		t.Errorf("the demo exited with %v, want status 1", p.exit)
	}
	for _, want := range []string{
		"demo: the gateway could not listen on 127.0.0.1:" + port + " (DEMO_PORT)",
		"last lines of gateway.log",
		"address already in use",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "#token=") || strings.Contains(out, "dashboard  http") {
		t.Errorf("the demo printed a link to the other server:\n%s", out)
	}
	demoCleanedUp(t, tmp)
}

// Without DEMO_PORT, a taken 8080 makes the demo listen on a free port and
// say so; the login link it prints is our gateway's and logs in.
func TestDemoPicksAFreePortWhen8080IsTaken(t *testing.T) {
	t.Parallel()
	if _, err := otherServer(t, "127.0.0.1:8080"); err != nil && !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatal(err) // taken already (EADDRINUSE) serves the test as well
	}
	p, tmp := startDemo(t, "")
	var url, token string
	testkit.WaitUntil(t, "the demo's login link", func() bool {
		if m := demoLink.FindStringSubmatch(p.logs.String()); m != nil {
			url, token = m[1], m[3]
			return true
		}
		if p.exited() {
			t.Fatalf("the demo exited (%v):\n%s", p.exit, p.logs.String())
		}
		return false
	})
	out := p.logs.String()
	if !strings.Contains(out, "port 8080 is taken; listening on a free port instead") || !strings.Contains(out, "the gateway is listening on "+url+"\n") {
		t.Errorf("the demo does not say it moved from 8080:\n%s", out)
	}
	if strings.HasSuffix(url, ":8080") {
		t.Fatalf("the demo's link is on the taken port: %s", url)
	}

	// The link's token logs in to this gateway, which serves the dashboard.
	resp, err := http.Post(url+"/api/gateway/login", "application/json", strings.NewReader(`{"token":"`+token+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(resp.Cookies()) == 0 {
		t.Fatalf("logging in with the link's token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	req, _ := http.NewRequest(http.MethodGet, url+"/api/gateway/endpoints", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body) // a short read shows in the check below
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(body.String(), `"name":"demo"`) {
		t.Fatalf("endpoints with the link's token: %d %s", resp.StatusCode, body.String())
	}

	stopDemo(t, p, tmp)
}

// The demo's one-click login link in a real browser: the dashboard logs in
// with the token in the fragment, removes it from the address bar, keeps
// it for the next visit, and the token never reaches the gateway's log.
func TestDashboardLoginLinkInABrowser(t *testing.T) {
	t.Parallel()
	exe := chromiumPath(t)
	g := startGateway(t)
	base := dashboardURL(t, g)
	b := newBrowser(t, exe)

	b.open(base + "/#token=" + g.dash)
	b.until("the dashboard, logged in", `document.querySelector(".topbar") && !document.querySelector("#token")`)
	if href := eval[string](b, `location.href`); strings.Contains(href, "token") || strings.Contains(href, g.dash) {
		t.Errorf("the address bar still holds the token: %s", href)
	}
	b.open(base + "/")
	b.until("the dashboard, still logged in after a reload", `document.querySelector(".topbar") && !document.querySelector("#token")`)
	if strings.Contains(g.gw.logs.String(), g.dash) {
		t.Error("the token reached the gateway's log")
	}
}
