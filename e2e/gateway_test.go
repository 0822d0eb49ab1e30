package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/testkit/nginxconf"
)

// gatewayEnv holds what the tests need to talk to a gateway.
type gatewayEnv struct {
	t    *testing.T
	addr string // the gateway's own address
	// front is where connectors and the dashboard reach it: the gateway
	// itself, or nginx in front of it.
	front  string
	key    string
	dash   string
	gw     *proc
	conns  []*proc // the connectors started by connector
	client *http.Client
	// env is added to the gateway's environment; nofile, when not 0,
	// limits its open file descriptors; serveArgs are extra flags of
	// `uncaged-gateway serve`.
	env       []string
	nofile    int
	serveArgs []string
	// dataDir holds the gateway's SQLite store; a restart keeps it.
	dataDir string
}

// gwCLI runs `uncaged-gateway args...` with the signing key and returns
// its standard output, trimmed; it fails the test if the command fails.
// The token commands work on the store of the gateway (or cluster) that
// uses key, as useStore registered it.
func gwCLI(t *testing.T, key string, args ...string) string {
	t.Helper()
	out, errOut, err := gwCLIResult(t, key, args...)
	if err != nil {
		t.Fatalf("uncaged-gateway %v: %v\n%s", args, err, errOut)
	}
	return out
}

// gwCLIResult is gwCLI for a command that may fail: its standard output
// (trimmed), standard error and error.
func gwCLIResult(t *testing.T, key string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "uncaged-gateway"), args...)
	cmd.Env = append(os.Environ(), "UNCAGED_GATEWAY_KEY="+key)
	if len(args) > 0 && (args[0] == "token" || args[0] == "trigger") {
		env, ok := storeOf(key)
		if !ok {
			// Never the default ~/.uncaged/gateway of whoever runs the tests.
			t.Fatalf("uncaged-gateway %v: no store registered for this key (useStore)", args)
		}
		cmd.Env = append(cmd.Env, env...)
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return strings.TrimSpace(stdout.String()), stderr.String(), err
}

// stores maps a signing key to the environment naming the store of the
// gateway or cluster using it: keys are generated per gateway, so the key
// a test holds says where its tokens are recorded.
var (
	storesMu sync.Mutex
	stores   = map[string][]string{}
)

// useStore records that the gateway (or cluster) signing with key keeps
// its state where env says (UNCAGED_GATEWAY_DATA_DIR or
// UNCAGED_GATEWAY_DATABASE_URL).
func useStore(key string, env ...string) {
	storesMu.Lock()
	defer storesMu.Unlock()
	stores[key] = env
}

func storeOf(key string) ([]string, bool) {
	storesMu.Lock()
	defer storesMu.Unlock()
	env, ok := stores[key]
	return env, ok
}

func startGateway(t *testing.T, serveArgs ...string) *gatewayEnv {
	return newGateway(t, nil, 0, serveArgs...)
}

// newGateway starts a gateway with env added to its environment and, when
// nofile is not 0, at most nofile open file descriptors.
func newGateway(t *testing.T, env []string, nofile int, serveArgs ...string) *gatewayEnv {
	t.Helper()
	g := &gatewayEnv{t: t, client: &http.Client{Timeout: 60 * time.Second}, env: env, nofile: nofile, serveArgs: serveArgs, dataDir: t.TempDir()}
	g.key = gwCLI(t, "", "key", "generate")
	useStore(g.key, "UNCAGED_GATEWAY_DATA_DIR="+g.dataDir)
	g.dash = gwCLI(t, g.key, "token", "create", "--dashboard")
	g.restart()
	g.front = g.addr
	return g
}

// restart stops the gateway, if one runs, and starts it again: the first
// time on a port of its own, then on the same address.
func (g *gatewayEnv) restart() {
	g.t.Helper()
	if g.gw != nil {
		g.gw.stop(syscall.SIGTERM)
	}
	listen := g.addr
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	bin := filepath.Join(binDir, "uncaged-gateway")
	args := append([]string{"serve", "--listen", listen, "--heartbeat", "1s", "--data-dir", g.dataDir}, g.serveArgs...)
	cmd := exec.Command(bin, args...)
	if g.nofile != 0 {
		cmd = exec.Command("sh", append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, g.nofile), bin}, args...)...)
	}
	cmd.Env = append(append(os.Environ(), "UNCAGED_GATEWAY_KEY="+g.key), g.env...)
	g.gw = launch(g.t, cmd, "uncaged-gateway "+strings.Join(args, " "))
	g.addr = g.gw.listening(g.t)
	waitOK(g.t, "the gateway to answer /healthz", "http://"+g.addr+"/healthz")
}

// connector starts `uncaged-workflow connect` for name on its own root with
// the given workflows registered.
func (g *gatewayEnv) connector(name string, workflows map[string]string, extra ...string) (*proc, string) {
	root := engineRoot(g.t)
	for wf, file := range workflows {
		add(g.t, root, wf, file)
	}
	tok := gwCLI(g.t, g.key, "token", "create", "--connector", name)
	p := startProc(g.t, []string{"UNCAGED_WORKFLOW_STORAGE_ROOT=" + root, "UNCAGED_WORKFLOW_TOKEN=" + tok},
		"uncaged-workflow", append([]string{"connect", "--name", name, "--gateway", "http://" + g.front}, extra...)...)
	g.conns = append(g.conns, p)
	stopTogether(g.t, g.conns...)
	g.waitStatus(name, "online")
	return p, root
}

func (g *gatewayEnv) endpoints() map[string]string {
	var eps []struct{ Name, Status string }
	resp, body := g.do("GET", "/api/gateway/endpoints", "")
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &eps) != nil {
		return nil
	}
	out := map[string]string{}
	for _, e := range eps {
		out[e.Name] = e.Status
	}
	return out
}

func (g *gatewayEnv) waitStatus(name, status string) {
	g.t.Helper()
	testkit.WaitUntil(g.t, name+" to be "+status, func() bool { return g.endpoints()[name] == status })
}

func (g *gatewayEnv) do(method, path, body string) (*http.Response, string) {
	g.t.Helper()
	req, err := http.NewRequest(method, "http://"+g.front+path, strings.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+g.dash)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := g.client.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		g.t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return resp, string(b)
}

func TestTwoMachinesThroughTheGateway(t *testing.T) {
	t.Parallel()
	twoMachines(t, startGateway(t))
}

// TestThroughNginx runs the same flows with nginx in front of the gateway,
// configured with deploy/nginx/proxy.conf: WebSocket upgrade for the
// tunnels, no buffering for live streams. The gateway trusts nginx's
// forwarding headers (--trusted-proxy) and sees each client's own address.
func TestThroughNginx(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "--trusted-proxy", "127.0.0.1")
	g.front = startNginx(t, g.addr)
	twoMachines(t, g)
	clientAddressesThroughProxy(t, g)
}

func twoMachines(t *testing.T, g *gatewayEnv) {
	_, laptopRoot := g.connector("laptop", map[string]string{"slow": "slow.esm.js"})
	_, ciRoot := g.connector("ci-box", map[string]string{"plan-code-review": "linear.esm.js"})
	if eps := g.endpoints(); eps["laptop"] != "online" || eps["ci-box"] != "online" {
		t.Fatalf("endpoints: %v", eps)
	}
	resp, body := g.do("GET", "/api/clients/laptop/workflows", "")
	if resp.StatusCode != 200 || !strings.Contains(body, `"name":"slow"`) || strings.Contains(body, "plan-code-review") {
		t.Fatalf("laptop workflows: %d %s", resp.StatusCode, body)
	}
	resp, body = g.do("POST", "/api/clients/ci-box/threads", `{"workflow":"plan-code-review","prompt":"via the gateway"}`)
	var started struct{ ThreadID string }
	if resp.StatusCode != 201 || json.Unmarshal([]byte(body), &started) != nil {
		t.Fatalf("start on ci-box: %d %s", resp.StatusCode, body)
	}
	s := finished(t, ciRoot, started.ThreadID)
	if roles(s) != "planner,coder,reviewer" {
		t.Fatalf("thread on ci-box: %+v", s)
	}
	if r := run(t, laptopRoot, "thread", "list"); !strings.Contains(r.stdout, "no threads") {
		t.Fatalf("the thread ran on the wrong machine: %+v", r)
	}

	// Live SSE through the gateway: the first step arrives while the slow
	// thread still runs.
	resp, body = g.do("POST", "/api/clients/laptop/threads", `{"workflow":"slow","prompt":"stream me"}`)
	if resp.StatusCode != 201 || json.Unmarshal([]byte(body), &started) != nil {
		t.Fatalf("start on laptop: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest("GET", "http://"+g.front+"/api/clients/laptop/threads/"+started.ThreadID+"/live?key="+g.dash, nil)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("live: %v %v", stream, err)
	}
	defer stream.Body.Close()
	sc := bufio.NewScanner(stream.Body)
	sawRoleWhileRunning, sawDone := false, false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"type":"role"`) && !sawRoleWhileRunning {
			if st := show(t, laptopRoot, started.ThreadID); st.Result == nil {
				sawRoleWhileRunning = true
			}
		}
		if line == "event: done" {
			sawDone = true
			break
		}
	}
	if !sawRoleWhileRunning || !sawDone {
		t.Fatalf("stream: role while running %v, done %v", sawRoleWhileRunning, sawDone)
	}
}

func TestGatewayRestartAndConnectorDeath(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	laptop, _ := g.connector("laptop", nil)
	g.restart()
	g.waitStatus("laptop", "online")
	laptop.stop(syscall.SIGKILL)
	g.waitStatus("laptop", "offline")
	resp, body := g.do("GET", "/api/clients/laptop/workflows", "")
	if resp.StatusCode != 503 {
		t.Fatalf("offline connector: %d %s", resp.StatusCode, body)
	}
}

func TestTokensAndNames(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	g.connector("laptop", nil)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitBound)
	defer cancel()
	// Another connector's token cannot take the name.
	other := gwCLI(t, g.key, "token", "create", "--connector", "ci-box")
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "uncaged-workflow"), "connect", "--name", "laptop", "--gateway", "http://"+g.addr)
	cmd.Env = append(os.Environ(), "UNCAGED_WORKFLOW_STORAGE_ROOT="+engineRoot(t), "UNCAGED_WORKFLOW_TOKEN="+other)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, readErr := bufio.NewReader(stderr).ReadString('\n')
	// It may have exited already (the refusal can be final): then the
	// signal fails, and its exit status says nothing the line did not.
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	if !strings.Contains(line, "gateway refused the connection (403)") {
		t.Fatalf("hijack attempt printed %q (%v)", line, readErr)
	}
	if g.endpoints()["laptop"] != "online" {
		t.Fatal("the real laptop was displaced")
	}
	expired := gwCLI(t, g.key, "token", "create", "--dashboard", "--ttl", "1ms")
	issued := time.Now() // after the token was made
	testkit.WaitUntil(t, "the 1 ms token to expire", func() bool { return time.Since(issued) > time.Millisecond })
	for tok, want := range map[string]int{"": 401, "wrong": 401, expired: 401, other: 403} {
		req, _ := http.NewRequest("GET", "http://"+g.addr+"/api/gateway/endpoints", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("token %.12q: %v", tok, err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("token %.12q: %d, want %d", tok, resp.StatusCode, want)
		}
	}
	if out := gwCLIStatus(t, g); !strings.Contains(out, "laptop") || !strings.Contains(out, "online") {
		t.Fatalf("uncaged-gateway status:\n%s", out)
	}
}

func gwCLIStatus(t *testing.T, g *gatewayEnv) string {
	cmd := exec.Command(filepath.Join(binDir, "uncaged-gateway"), "status", "--url", "http://"+g.addr)
	cmd.Env = append(os.Environ(), "UNCAGED_DASHBOARD_TOKEN="+g.dash)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	return string(out)
}

// startNginx runs nginx on a free port in front of upstream and returns its
// address.
func startNginx(t *testing.T, upstream string) string {
	t.Helper()
	proxyConf, err := filepath.Abs("../deploy/nginx/proxy.conf")
	if err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	runNginx(t, addr, fmt.Sprintf(`map $http_upgrade $connection_upgrade { default upgrade; '' close; }
server {
    listen %[1]s;
    location / {
        proxy_pass http://%[2]s;
        include %[3]s;
    }
}
`, addr, upstream, proxyConf))
	return addr
}

// runNginx runs nginx with site (what goes inside its http block) and
// waits until the gateway's /healthz answers through it on addr.
func runNginx(t *testing.T, addr, site string) {
	t.Helper()
	bin := requireProxy(t, "nginx", "apt-get install nginx-light")
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := nginxconf.Main(dir, site)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", confPath)
	runProxy(t, "nginx", cmd, syscall.SIGQUIT, addr, func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return string(b)
	})
}

// requireProxy finds a reverse proxy's program. Locally a missing one skips
// the test; CI installs it (.ci/run), and there a missing one fails.
func requireProxy(t *testing.T, name, install string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed (.ci/run installs it)", name)
		}
		t.Skipf("%s not installed; %s", name, install)
	}
	return bin
}

// runProxy starts cmd, a reverse proxy listening on addr in front of the
// gateway, and waits until the gateway's /healthz answers through it. When
// the test ends the proxy gets stop; if the test failed, its output and
// extraLog's (nil: none) go to the test log.
func runProxy(t *testing.T, name string, cmd *exec.Cmd, stop os.Signal, addr string, extraLog func() string) {
	t.Helper()
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A proxy that exited early is why the test failed, and its
		// output below says why; its exit status adds nothing.
		_ = cmd.Process.Signal(stop)
		_ = cmd.Wait()
		if t.Failed() {
			extra := ""
			if extraLog != nil {
				extra = "\n" + extraLog()
			}
			t.Logf("%s output:\n%s%s", name, logs.String(), extra)
		}
	})
	waitOK(t, name+" to proxy", "http://"+addr+"/healthz")
}

// TestLargeResponseStreamsWithBoundedGatewayMemory fetches a 50 MB CAS
// node through the gateway and checks the gateway's peak memory grew by
// far less than the body: the proxy streams, it does not buffer.
func TestLargeResponseStreamsWithBoundedGatewayMemory(t *testing.T) {
	// Serial: it measures the gateway's peak memory, which should not depend on what else the machine does.
	g := startGateway(t)
	_, root := g.connector("laptop", nil)
	payload := strings.Repeat("0123456789abcdef", 50<<16) // 50 MiB
	hash := putBlob(t, root, payload)
	before := peakRSS(t, g.gw.cmd.Process.Pid)
	req, _ := http.NewRequest("GET", "http://"+g.front+"/api/clients/laptop/cas/"+hash, nil)
	req.Header.Set("Authorization", "Bearer "+g.dash)
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || n < int64(len(payload)) {
		t.Fatalf("large response: %d, %d bytes, %v", resp.StatusCode, n, err)
	}
	grew := peakRSS(t, g.gw.cmd.Process.Pid) - before
	t.Logf("gateway peak RSS grew %d MiB for a %d MiB response", grew>>20, n>>20)
	if grew > 24<<20 {
		t.Fatalf("gateway peak memory grew by %d MiB for a %d MiB body: it buffers", grew>>20, n>>20)
	}
}

// putBlob writes a content node straight into a connector's CAS (the
// API caps request bodies at 1 MiB, and argv cannot carry 50 MiB) with
// the putblob helper TestMain built.
func putBlob(t *testing.T, root, payload string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "putblob"), root)
	cmd.Stdin = strings.NewReader(payload)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("putblob: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// peakRSS is a process's high-water resident memory (VmHWM).
func peakRSS(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			var kb int64
			if _, err := fmt.Sscan(strings.Fields(line)[1], &kb); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestClosingTheDashboardRequestStopsTheConnectorHandler opens a live stream
// through the gateway to a running thread, closes it, and watches the
// connector's own metrics (on its --listen address) count the live route as
// answered: its handler returned although the thread still runs.
func TestClosingTheDashboardRequestStopsTheConnectorHandler(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	local := freePort(t)
	_, root := g.connector("laptop", nil, "--listen", local)
	// Slower than slow.esm.js, so the thread is surely still running when
	// the stream is closed, however loaded the machine.
	src, err := os.ReadFile(filepath.Join("testdata", "slow.esm.js"))
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "slower.esm.js")
	if err := os.WriteFile(bundle, []byte(strings.Replace(string(src), "await delay(400)", "await delay(5000)", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, root, "workflow", "add", "slow", bundle); r.code != 0 {
		t.Fatalf("add: %+v", r)
	}
	liveCount := func() int {
		return int(metricValue(t, local, "uncaged_connector_requests_total", `/live"`))
	}
	id := start(t, root, "slow")
	before := liveCount()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+g.front+"/api/clients/laptop/threads/"+id+"/live?key="+g.dash, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("live: %v %v", resp, err)
	}
	if line, _ := bufio.NewReader(resp.Body).ReadString('\n'); !strings.HasPrefix(line, "id:") && !strings.HasPrefix(line, "event:") && !strings.HasPrefix(line, ":") {
		t.Fatalf("first line %q", line)
	}
	if liveCount() != before {
		t.Fatal("the live handler ended before the client went away")
	}
	cancel()
	resp.Body.Close()
	testkit.WaitUntil(t, "the connector's live handler to return", func() bool { return liveCount() == before+1 })
	if s := show(t, root, id); s.Result != nil {
		t.Fatalf("the thread finished before the check, so it proves nothing: %+v", s)
	}
}
