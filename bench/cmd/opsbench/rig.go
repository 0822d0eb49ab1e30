package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/uncaged/workflow/shared/testkit/nginxconf"
	"github.com/uncaged/workflow/shared/testkit/pgtest"
)

// rig is the cluster under test, all on loopback: PostgreSQL, NATS,
// three gateway replicas behind nginx with the shipped cluster
// configuration, and connectors dialing through nginx.
type rig struct {
	dir          string
	gwBin, wfBin string
	pg           *pgtest.Server
	dbURL        string
	natsPort     int
	nats         *natsserver.Server
	key, dash    string
	replicas     []*replica
	nginx        *exec.Cmd
	nginxExit    chan struct{}
	front        string // nginx's address
	connectors   []*connector
}

// replica is one uncaged-gateway serve process, restartable on its
// address.
type replica struct {
	id, addr, spool, logPath string
	cmd                      *exec.Cmd
	exit                     chan struct{}
	code                     int
}

// connector is one uncaged-workflow connect process and its root.
type connector struct {
	name, root, logPath string
	cmd                 *exec.Cmd
}

// build compiles the two binaries once, into dir.
func build(dir string) (gw, wf string, err error) {
	gw, wf = filepath.Join(dir, "uncaged-gateway"), filepath.Join(dir, "uncaged-workflow")
	for bin, pkg := range map[string]string{gw: "./gateway/cmd/uncaged-gateway", wf: "./connector/cmd/uncaged-workflow"} {
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return "", "", fmt.Errorf("go build %s: %w", pkg, err)
		}
	}
	return gw, wf, nil
}

// freeAddr is a loopback address nobody listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// gatewayCLI runs an uncaged-gateway command on the cluster's key and
// database and returns its standard output, trimmed.
func (r *rig) gatewayCLI(args ...string) (string, error) {
	cmd := exec.Command(r.gwBin, args...)
	cmd.Env = append(os.Environ(), "UNCAGED_GATEWAY_KEY="+r.key, "UNCAGED_GATEWAY_DATABASE_URL="+r.dbURL)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("uncaged-gateway %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return strings.TrimSpace(out.String()), nil
}

// startNATS runs the NATS server on natsPort (a free one the first time).
func (r *rig) startNATS() error {
	port := r.natsPort
	if port == 0 {
		port = -1
	}
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true})
	if err != nil {
		return err
	}
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		return errors.New("the NATS server did not start")
	}
	r.nats, r.natsPort = ns, ns.Addr().(*net.TCPAddr).Port
	return nil
}

// stopNATS shuts the NATS server down, as an outage does.
func (r *rig) stopNATS() {
	r.nats.Shutdown()
	r.nats.WaitForShutdown()
}

// startReplica starts (or starts again) replica rp on its address.
func (r *rig) startReplica(rp *replica) error {
	logf, err := os.OpenFile(rp.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(r.gwBin, "serve", "--listen", rp.addr, "--replica-id", rp.id, "--spool-dir", rp.spool,
		"--log-format", "json",
		// Behind nginx on loopback every connector comes from one
		// address, which the per-address limit of connection attempts
		// (meant for one machine each) would throttle.
		"--trusted-proxy", "127.0.0.1", "--connect-rate", "-1")
	cmd.Env = append(os.Environ(), "UNCAGED_GATEWAY_KEY="+r.key, "UNCAGED_GATEWAY_DATABASE_URL="+r.dbURL,
		fmt.Sprintf("UNCAGED_GATEWAY_NATS=nats://127.0.0.1:%d", r.natsPort))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		_ = logf.Close() // the start's error is the one to report
		return err
	}
	rp.cmd, rp.exit = cmd, make(chan struct{})
	go func() {
		err := cmd.Wait()
		rp.code = cmd.ProcessState.ExitCode()
		if err != nil && rp.code == 0 {
			rp.code = -1
		}
		_ = logf.Close() // the process is gone; its lines are written
		close(rp.exit)
	}()
	return r.waitReady(rp)
}

// waitReady waits until rp's /readyz answers 200, or fails when it exits.
func (r *rig) waitReady(rp *replica) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-rp.exit:
			return fmt.Errorf("replica %s exited (%d) while starting; see %s", rp.id, rp.code, rp.logPath)
		default:
		}
		if code, _ := get("http://"+rp.addr+"/readyz", ""); code == 200 {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("replica %s not ready after 2 minutes; see %s", rp.id, rp.logPath)
}

// stopReplica signals rp and waits for it to exit, returning its code.
func (r *rig) stopReplica(rp *replica, sig syscall.Signal) (int, error) {
	_ = rp.cmd.Process.Signal(sig) // it may have exited already: the wait says
	select {
	case <-rp.exit:
		return rp.code, nil
	case <-time.After(2 * time.Minute):
		return -1, fmt.Errorf("replica %s did not exit 2 minutes after %v", rp.id, sig)
	}
}

// startNginx runs nginx with the shipped cluster configuration in front
// of the replicas.
func (r *rig) startNginx(repo string) error {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		return errors.New("nginx is not installed (apt-get install nginx-light)")
	}
	b, err := os.ReadFile(filepath.Join(repo, "deploy/nginx/uncaged-gateway-cluster.conf"))
	if err != nil {
		return err
	}
	listen, err := freeAddr()
	if err != nil {
		return err
	}
	redirect, err := freeAddr()
	if err != nil {
		return err
	}
	var addrs []string
	for _, rp := range r.replicas {
		addrs = append(addrs, rp.addr)
	}
	site, err := nginxconf.Cluster(string(b), filepath.Join(repo, "deploy/nginx/proxy.conf"), addrs, listen, redirect)
	if err != nil {
		return err
	}
	dir := filepath.Join(r.dir, "nginx")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(nginxconf.Main(dir, site)), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(bin, "-p", dir, "-c", conf)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		return err
	}
	r.nginx, r.nginxExit, r.front = cmd, make(chan struct{}), listen
	go func() { _ = cmd.Wait(); close(r.nginxExit) }() // its error.log says why
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", listen); err == nil {
			return c.Close()
		}
		select {
		case <-r.nginxExit:
			b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			return fmt.Errorf("nginx exited:\n%s", b)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return errors.New("nginx did not listen within 30 s")
}

// startConnector makes a root with the steps workflow and runs connect
// for name through nginx.
func (r *rig) startConnector(name string) (*connector, error) {
	root, err := os.MkdirTemp(r.dir, "root-"+name+"-")
	if err != nil {
		return nil, err
	}
	bundle := filepath.Join(r.dir, "steps.esm.js")
	if err := os.WriteFile(bundle, []byte(stepsBundle), 0o644); err != nil {
		return nil, err
	}
	env := append(os.Environ(), "UNCAGED_WORKFLOW_STORAGE_ROOT="+root)
	add := exec.Command(r.wfBin, "workflow", "add", "steps", bundle)
	add.Env = env
	if out, err := add.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("workflow add: %v\n%s", err, out)
	}
	tok, err := r.gatewayCLI("token", "create", "--connector", name)
	if err != nil {
		return nil, err
	}
	c := &connector{name: name, root: root, logPath: filepath.Join(r.dir, "connect-"+name+".log")}
	logf, err := os.Create(c.logPath)
	if err != nil {
		return nil, err
	}
	c.cmd = exec.Command(r.wfBin, "connect", "--name", name, "--gateway", "http://"+r.front)
	c.cmd.Env = append(env, "UNCAGED_WORKFLOW_TOKEN="+tok)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = c.cmd.Wait(); _ = logf.Close() }() // stopped at the end; its log says the rest
	return c, nil
}

// logCount counts the lines of a connector's output containing s.
func (c *connector) logCount(s string) int {
	b, _ := os.ReadFile(c.logPath)
	return strings.Count(string(b), s)
}

// close stops everything the rig started, the connectors first.
func (r *rig) close() {
	for _, c := range r.connectors {
		if c.cmd != nil && c.cmd.Process != nil {
			_ = c.cmd.Process.Signal(syscall.SIGTERM) // gone already is fine
		}
	}
	var wg sync.WaitGroup
	for _, rp := range r.replicas {
		if rp.cmd == nil {
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = r.stopReplica(rp, syscall.SIGTERM) }()
	}
	wg.Wait()
	if r.nginx != nil {
		_ = r.nginx.Process.Signal(syscall.SIGQUIT) // gone already is fine
		<-r.nginxExit
	}
	if r.nats != nil {
		r.nats.Shutdown()
	}
	if r.pg != nil {
		r.pg.Close()
	}
}

// get fetches url with a bearer token ("" for none): the status and body.
func get(url, token string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric sums a metric's samples on replica rp whose labels contain match
// (-1: not scraped).
func metric(rp *replica, name, match string) float64 {
	code, body := get("http://"+rp.addr+"/metrics", "")
	if code != 200 {
		return -1
	}
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		if (strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{")) && strings.Contains(line, match) {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err == nil {
				sum += v
			}
		}
	}
	return sum
}

// stepsBundle is the workflow the connectors run: 20 steps of about a
// second each, as an agent's would take.
const stepsBundle = `import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";

const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const names = Array.from({ length: 20 }, (_, i) => "step" + (i + 1));
const roles = {};
const table = { [START]: [{ condition: "FALLBACK", role: names[0] }] };
names.forEach((name, i) => {
  roles[name] = { description: "step " + (i + 1), systemPrompt: "", schema: { type: "object" } };
  table[name] = [{ condition: "FALLBACK", role: names[i + 1] || END }];
});
const definition = { description: "Twenty steps of about a second.", roles, table };

export const descriptor = buildDescriptor(definition);

export const run = createWorkflow(definition, {
  adapter: () => async (ctx) => {
    await delay(1000);
    return { meta: { step: ctx.steps.length + 1 }, childThread: null };
  },
  overrides: null,
});
`
