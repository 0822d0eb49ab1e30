package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/storage"
)

// The live section (-only live) follows threads through a real gateway,
// connector and engine host, as the dashboard does, twice in one run: with
// the host's change stream (the connector's live streams wake when a step
// is written), and with the same binaries polling every 100 ms as they did
// before it — the connector falls back to that with a host older than the
// stream, which a proxy on the host's socket plays by answering its
// change stream 404. For each it prints:
//
//   - step timestamp → the step's event at a client reading
//     /api/clients/<machine>/threads/<id>/live through the gateway:
//     p50, p95, max over liveSteps steps (with the stream, also the part
//     spent before the host published the step: writing it);
//   - the same from the connector's own address (--listen), which tells
//     the gateway's share;
//   - the CPU the gateway, connector and host processes use, each and
//     together, as a share of one core, over liveIdleWindow with liveIdle
//     idle threads (each waiting on a timer in its first role, in its
//     own JavaScript runtime): with no stream open (the gateway's change
//     feed from the connector is open all along, as in production), then
//     with a live stream open on each. The difference is what the streams
//     cost; the total is what waiting threads and their readers cost,
//     which should be next to nothing (the memory watchdog parks while no
//     JavaScript executes).
//
// Step timestamps have millisecond resolution, so latencies read up to
// 1 ms high. The root is under -dir: on a disk, each step's fsyncs are
// part of the latency (-dir /dev/shm leaves them out).

const (
	liveSteps      = 40               // steps of the latency thread
	liveStepEvery  = 25               // ms each of its steps waits
	liveIdle       = 100              // idle threads, one live stream each
	liveIdleWindow = 10 * time.Second // CPU measuring window
	liveSettle     = 10 * time.Second // before it: what opening the streams stirred up (collections, the scavenger) settles
)

// liveTicksSource is the latency workflow: liveSteps steps, each logging
// a line and waiting liveStepEvery ms.
func liveTicksSource() string {
	return fmt.Sprintf(`import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";
const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const more = { name: "more", description: "fewer than %[1]d steps", check: (ctx) => ctx.steps.length < %[1]d };
const definition = {
  description: "%[1]d steps, %[2]d ms apart",
  roles: { tick: { description: "waits", systemPrompt: "", schema: { type: "object" } } },
  table: { [START]: [{ condition: "FALLBACK", role: "tick" }], tick: [{ condition: more, role: "tick" }, { condition: "FALLBACK", role: END }] },
};
export const descriptor = buildDescriptor(definition);
export const run = createWorkflow(definition, { adapter: () => async (ctx) => {
  console.log("tick " + (ctx.steps.length + 1));
  await delay(%[2]d);
  return { meta: { n: ctx.steps.length + 1 }, childThread: null };
}, overrides: null });
`, liveSteps, liveStepEvery)
}

// liveIdleSource is a workflow whose one role waits an hour: a thread
// that runs and changes nothing.
const liveIdleSource = `import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";
const definition = {
  description: "waits an hour",
  roles: { wait: { description: "waits", systemPrompt: "", schema: { type: "object" } } },
  table: { [START]: [{ condition: "FALLBACK", role: "wait" }], wait: [{ condition: "FALLBACK", role: END }] },
};
export const descriptor = buildDescriptor(definition);
export const run = createWorkflow(definition, { adapter: () => async () => {
  await new Promise((resolve) => setTimeout(resolve, 3600000));
  return { meta: {}, childThread: null };
}, overrides: null });
`

// liveFigures is what one mode measured.
type liveFigures struct {
	latency, written []time.Duration // timestamp → client; timestamp → host published (push only)
	direct           []time.Duration // timestamp → client, from the connector's own address
	idleCPU, openCPU liveCPU         // no stream open; one per idle thread
	streamOpen       string          // the connector's uncaged_connector_change_stream_open
}

// liveLatency runs the live section.
func liveLatency(work string) {
	fmt.Println("live streams through the gateway (real gateway, connector and engine host)")
	cli := buildCLI(work)
	gw := buildGateway(work)
	g := startLiveGateway(work, gw)
	defer g.stop()
	push := liveMode(work, cli, g, "push", false)
	poll := liveMode(work, cli, g, "poll", true)

	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	row := func(label string, ds []time.Duration) {
		if len(ds) == 0 {
			fmt.Printf("    %-58s (none measured)\n", label)
			return
		}
		fmt.Printf("    %-58s %9s %9s %9s\n", label, ms(ds[(len(ds)-1)/2]), ms(ds[(len(ds)-1)*95/100]), ms(ds[len(ds)-1]))
	}
	fmt.Printf("  step timestamp → event at the client, %d steps %d ms apart%*s p50       p95       max\n", liveSteps, liveStepEvery, 12, "")
	row("with the host's change stream, through the gateway", push.latency)
	row("  the same, from the connector's own address", push.direct)
	row("  of which writing the step (until the host publishes it)", push.written)
	row("polling every 100 ms (as before), through the gateway", poll.latency)
	fmt.Printf("    the connector's uncaged_connector_change_stream_open: %s with the stream, %s polling\n", push.streamOpen, poll.streamOpen)
	fmt.Printf("  CPU of gateway + connector + host over %s, as a share of one core, with %d idle threads\n", liveIdleWindow, liveIdle)
	for _, m := range []struct {
		name string
		f    liveFigures
	}{{"with the host's change stream", push}, {"polling every 100 ms (before it)", poll}} {
		open, idle := m.f.openCPU, m.f.idleCPU
		fmt.Printf("    %s\n      no stream open     %s\n      %d live streams   %s\n      the streams' own   %.2f%% (connector and gateway %.2f)\n",
			m.name, idle, liveIdle, open, 100*(open.total()-idle.total()), 100*(open[0]+open[1]-idle[0]-idle[1]))
	}
	fmt.Println()
}

// buildGateway builds uncaged-gateway as `make build` does.
func buildGateway(work string) string {
	bin := filepath.Join(work, "uncaged-gateway")
	cmd := exec.Command("go", "build", "-o", bin, "./gateway/cmd/uncaged-gateway")
	cmd.Env = shippedEnv()
	cmd.Stderr = os.Stderr
	liveCheck(cmd.Run())
	return bin
}

// liveProc is a process of the bench's, its output kept.
type liveProc struct {
	cmd *exec.Cmd
	out *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// liveProcs are the processes started and not yet stopped, which a
// failure stops before the bench exits.
var (
	liveProcsMu sync.Mutex
	liveProcs   = map[*liveProc]bool{}
)

func startLiveProc(env []string, bin string, args ...string) *liveProc {
	p := &liveProc{cmd: exec.Command(bin, args...), out: &syncBuffer{}}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	liveCheck(p.cmd.Start())
	liveProcsMu.Lock()
	liveProcs[p] = true
	liveProcsMu.Unlock()
	return p
}

// liveCheck is check for the live section: on an error it first stops the
// processes it started, with their output, which says what went wrong.
func liveCheck(err error) {
	if err == nil {
		return
	}
	liveProcsMu.Lock()
	procs := liveProcs
	liveProcs = map[*liveProc]bool{}
	liveProcsMu.Unlock()
	for p := range procs {
		p.stop()
		fmt.Fprintf(os.Stderr, "--- %s:\n%s\n", strings.Join(p.cmd.Args, " "), lastLines(p.out.String(), 20))
	}
	check(err)
}

// lastLines is the end of a process's output.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// stop ends the process with SIGTERM and waits for it.
func (p *liveProc) stop() {
	liveProcsMu.Lock()
	delete(liveProcs, p)
	liveProcsMu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // gone already if it fails
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill() // as above
		<-done
	}
}

// liveGateway is the gateway the modes share.
type liveGateway struct {
	bin, key, dataDir, addr, dash string
	proc                          *liveProc
}

func startLiveGateway(work, bin string) *liveGateway {
	g := &liveGateway{bin: bin, dataDir: filepath.Join(work, "gateway-data")}
	g.key = g.cli("key", "generate")
	g.dash = g.cli("token", "create", "--dashboard")
	// More streams to one connector than the default bound of requests in
	// flight (64).
	g.proc = startLiveProc(g.env(), bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", g.dataDir, "--max-concurrent", strconv.Itoa(4*liveIdle))
	liveWait("the gateway's listening address", func() bool {
		for _, line := range strings.Split(g.proc.out.String(), "\n") {
			var m struct{ Msg, Address string }
			if json.Unmarshal([]byte(line), &m) == nil && m.Msg == "gateway listening" && m.Address != "" {
				g.addr = m.Address
				return true
			}
		}
		return false
	})
	return g
}

func (g *liveGateway) env() []string {
	return []string{"UNCAGED_GATEWAY_KEY=" + g.key, "UNCAGED_GATEWAY_DATA_DIR=" + g.dataDir}
}

func (g *liveGateway) cli(args ...string) string {
	return runCLI(g.env(), g.bin, args...)
}

func (g *liveGateway) stop() { g.proc.stop() }

// request sends a dashboard request to the gateway and returns the status
// and body.
func (g *liveGateway) request(method, path, body string) (int, []byte) {
	req, err := http.NewRequest(method, "http://"+g.addr+path, strings.NewReader(body))
	liveCheck(err)
	req.Header.Set("Authorization", "Bearer "+g.dash)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	liveCheck(err)
	defer func() { _ = resp.Body.Close() }() // read to its end below
	b, err := io.ReadAll(resp.Body)
	liveCheck(err)
	return resp.StatusCode, b
}

// liveWait polls cond for up to a minute.
func liveWait(what string, cond func() bool) {
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			liveCheck(fmt.Errorf("gave up waiting for %s", what))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// liveMode measures one mode on a root of its own: an engine host, with
// hideStream a proxy in front of it that has no change stream, and a
// connector to the gateway.
func liveMode(work, cli string, g *liveGateway, name string, hideStream bool) liveFigures {
	root := filepath.Join(work, "live-"+name)
	l := storage.Layout{Root: root}
	env := []string{storage.EnvRoot + "=" + root}
	for wf, src := range map[string]string{"ticks": liveTicksSource(), "idle": liveIdleSource} {
		file := filepath.Join(work, wf+".esm.js")
		liveCheck(os.WriteFile(file, []byte(src), 0o644))
		runCLI(env, cli, "workflow", "add", wf, file)
	}
	// Every idle thread runs at once, each in its own JavaScript runtime
	// waiting on a timer: what a host holds while its threads wait.
	hostProc := startLiveProc(env, cli, "engine", "serve", "--max-threads", strconv.Itoa(liveIdle))
	defer func() {
		hostProc.stop()
		_ = os.RemoveAll(root) // the next mode's idle threads are its own
	}()
	liveWait("the engine host", func() bool {
		c, err := host.Dial(l)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if hideStream {
		stop := hideChangeStream(l)
		defer stop()
	}
	machine := "bench-" + name
	listen := freeLoopback()
	tok := g.cli("token", "create", "--connector", machine)
	conn := startLiveProc(append(env, "UNCAGED_WORKFLOW_TOKEN="+tok), cli, "connect", "--name", machine, "--gateway", "http://"+g.addr, "--listen", listen)
	defer conn.stop()
	liveWait(machine+" to be online", func() bool {
		code, b := g.request(http.MethodGet, "/api/gateway/endpoints", "")
		var eps []struct{ Name, Status string }
		return code == http.StatusOK && json.Unmarshal(b, &eps) == nil &&
			slices.ContainsFunc(eps, func(e struct{ Name, Status string }) bool { return e.Name == machine && e.Status == "online" })
	})
	var f liveFigures
	f.latency, f.written = liveStepLatency(g, "http://"+g.addr+"/api/clients/"+machine, l, machine, !hideStream)
	f.direct, _ = liveStepLatency(g, "http://"+listen+"/api", l, machine, false)
	f.streamOpen = scrapeGauge(listen, "uncaged_connector_change_stream_open")

	ids := make([]string, liveIdle)
	for i := range ids {
		ids[i] = startThread(g, machine, "idle")
	}
	liveWait("the idle threads to run", func() bool {
		code, b := g.request(http.MethodGet, "/api/clients/"+machine+"/threads/running", "")
		var list struct{ Threads []json.RawMessage }
		return code == http.StatusOK && json.Unmarshal(b, &list) == nil && len(list.Threads) == liveIdle
	})
	pids := []int{g.proc.cmd.Process.Pid, conn.cmd.Process.Pid, hostProc.cmd.Process.Pid}
	// What starting them stirred up (the collector, the scavenger)
	// settles first.
	time.Sleep(liveSettle)
	f.idleCPU = cpuShare(pids, liveIdleWindow)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: liveIdle, MaxConnsPerHost: 0}}
	started := make(chan error, liveIdle)
	ended := make(chan struct{}, liveIdle)
	for _, id := range ids {
		go func() {
			evs, err := openStream(ctx, client, g, "http://"+g.addr+"/api/clients/"+machine, id)
			if err != nil {
				started <- err
				return
			}
			ev, ok := <-evs
			if !ok || ev.name != "record" {
				started <- fmt.Errorf("stream of %s: first event %+v", id, ev)
				return
			}
			started <- nil
			for range evs {
			}
			ended <- struct{}{}
		}()
	}
	for range ids {
		liveCheck(<-started)
	}
	time.Sleep(liveSettle)
	f.openCPU = cpuShare(pids, liveIdleWindow)
	if len(ended) > 0 {
		liveCheck(fmt.Errorf("%d of the idle threads' streams ended while measured", len(ended)))
	}
	return f
}

// runCLI runs the CLI binary with env and returns its output.
func runCLI(env []string, bin string, args ...string) string {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		liveCheck(fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, errOut.String()))
	}
	return strings.TrimSpace(string(out))
}

// startThread starts a thread through the gateway and returns its id.
func startThread(g *liveGateway, machine, workflow string) string {
	code, b := g.request(http.MethodPost, "/api/clients/"+machine+"/threads", `{"workflow":"`+workflow+`","prompt":"bench"}`)
	var ref struct{ ThreadID string }
	if code != http.StatusCreated || json.Unmarshal(b, &ref) != nil {
		liveCheck(fmt.Errorf("run %s on %s: %d %s", workflow, machine, code, b))
	}
	return ref.ThreadID
}

// liveEvent is a server-sent event, with when it was read.
type liveEvent struct {
	name, data string
	at         time.Time
}

// openStream opens a thread's live stream at base (the machine's API
// through the gateway, or the connector's own); its events come on the
// channel, closed when the stream ends.
func openStream(ctx context.Context, client *http.Client, g *liveGateway, base, id string) (<-chan liveEvent, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/threads/"+id+"/live", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+g.dash)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096)) // for the message
		_ = resp.Body.Close()                               // read-only
		return nil, fmt.Errorf("live stream of %s: %s %s", id, resp.Status, b)
	}
	out := make(chan liveEvent, 64)
	go func() {
		defer close(out)
		defer func() { _ = resp.Body.Close() }() // read-only
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var ev liveEvent
		for sc.Scan() {
			switch line := sc.Text(); {
			case line == "" && ev.name != "":
				ev.at = time.Now()
				out <- ev
				ev = liveEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[len("data: "):]
			}
		}
	}()
	return out, nil
}

// liveStepLatency runs the latency workflow and follows it live through
// the gateway, returning for each step written after the stream opened
// the time from its timestamp to its event at the client and, with
// watch, to the host publishing it (read from the host's change stream).
func liveStepLatency(g *liveGateway, base string, l storage.Layout, machine string, watch bool) (latency, written []time.Duration) {
	published := map[string]time.Time{}
	var mu sync.Mutex
	if watch {
		c, err := host.Dial(l)
		liveCheck(err)
		defer c.Close()
		changes, err := c.Changes(context.Background())
		liveCheck(err)
		defer changes.Close()
		go func() {
			for {
				ch, err := changes.Next()
				if err != nil {
					return
				}
				if ch.Kind == host.ChangeStep {
					mu.Lock()
					published[ch.Head] = time.Now()
					mu.Unlock()
				}
			}
		}()
	}
	id := startThread(g, machine, "ticks")
	evs, err := openStream(context.Background(), http.DefaultClient, g, base, id)
	liveCheck(err)
	var open time.Time
	for ev := range evs {
		if ev.name == "done" {
			break
		}
		var rec struct {
			Type, StateHash string
			Timestamp       int64
		}
		if ev.name != "record" || json.Unmarshal([]byte(ev.data), &rec) != nil {
			continue
		}
		if open.IsZero() {
			open = ev.at
			continue
		}
		if rec.Type != "role" || rec.Timestamp <= open.UnixMilli() {
			continue
		}
		ts := time.UnixMilli(rec.Timestamp)
		latency = append(latency, ev.at.Sub(ts))
		mu.Lock()
		if p, ok := published[rec.StateHash]; ok {
			written = append(written, p.Sub(ts))
		}
		mu.Unlock()
	}
	if len(latency) < liveSteps/2 {
		liveCheck(fmt.Errorf("only %d of %d steps came after the stream opened", len(latency), liveSteps))
	}
	slices.Sort(latency)
	slices.Sort(written)
	return latency, written
}

// hideChangeStream moves the host's socket aside and stands a proxy in
// its place that passes every request on but answers the change stream
// 404, as a host older than it does; stop puts the socket back.
func hideChangeStream(l storage.Layout) (stop func()) {
	sock := host.SocketPath(l)
	hidden := filepath.Join(filepath.Dir(sock), "hidden.sock")
	liveCheck(os.Rename(sock, hidden))
	// Bound where no one else can reach it, made the owner's only, moved
	// into place: what a client checks of an engine socket.
	dir, err := os.MkdirTemp(filepath.Dir(sock), ".p")
	liveCheck(err)
	liveCheck(os.Chmod(dir, 0o700))
	ln, err := net.Listen("unix", filepath.Join(dir, "s"))
	liveCheck(err)
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	liveCheck(os.Chmod(filepath.Join(dir, "s"), 0o600))
	liveCheck(os.Rename(filepath.Join(dir, "s"), sock))
	liveCheck(os.Remove(dir))
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = "http", "engine" },
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", hidden)
		}},
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/changes" {
			http.NotFound(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }() // ErrServerClosed at stop
	return func() {
		_ = srv.Close() // a proxy no one uses any more
		_ = os.Rename(hidden, sock)
	}
}

// freeLoopback is a loopback address no one listened on a moment ago.
func freeLoopback() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	liveCheck(err)
	addr := ln.Addr().String()
	liveCheck(ln.Close())
	return addr
}

// scrapeGauge reads one unlabelled sample from the connector's metrics.
func scrapeGauge(listen, name string) string {
	resp, err := http.Get("http://" + listen + "/metrics")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	defer func() { _ = resp.Body.Close() }() // read-only
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return v
		}
	}
	return "no sample"
}

// cpuShare is the CPU time pids use over window, as a share of one core:
// the sum over their threads of the time the scheduler ran them
// (/proc/<pid>/task/*/schedstat, nanoseconds).
func cpuShare(pids []int, window time.Duration) liveCPU {
	before := make([]time.Duration, len(pids))
	for i, pid := range pids {
		before[i] = cpuTime(pid)
	}
	t0 := time.Now()
	time.Sleep(window)
	took := float64(time.Since(t0))
	var out liveCPU
	for i, pid := range pids {
		out[i] = float64(cpuTime(pid)-before[i]) / took
	}
	return out
}

// liveCPU is the share of a core of the gateway, connector and host.
type liveCPU [3]float64

func (c liveCPU) total() float64 { return c[0] + c[1] + c[2] }

func (c liveCPU) String() string {
	return fmt.Sprintf("%.2f%% (gateway %.2f, connector %.2f, host %.2f)", 100*c.total(), 100*c[0], 100*c[1], 100*c[2])
}

func cpuTime(pid int) time.Duration {
	var total time.Duration
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	liveCheck(err)
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // the thread has just exited
		}
		fields := strings.Fields(string(b))
		if len(fields) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(fields[0], 10, 64)
		liveCheck(err)
		total += time.Duration(ns)
	}
	return total
}
