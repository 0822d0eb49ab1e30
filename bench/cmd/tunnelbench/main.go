// Command tunnelbench measures the gateway + tunnel path against the
// connector's own API on loopback, with real binaries, and prints ratios
// measured in the same run:
//
//   - small GETs, 64 concurrent: throughput through the gateway vs direct,
//     and the CPU the gateway and connector processes spend per request;
//   - one 100 MB response: throughput through the gateway vs direct;
//   - p50 latency of one request at a time;
//   - gateway memory per idle connector, with -idle connectors held open.
//
// Usage: go run ./bench/cmd/tunnelbench [-seconds 5] [-idle 10000]
//
// By default (-peers) it compares the tunnel with what people run today
// instead (peers.go): frp's HTTP vhost proxy with token auth (the peer
// doing the same job), frp's tcp proxies and chisel, built from pinned
// versions, and nginx with upstream keepalive as the floor of one HTTP hop
// (left out, saying so, when nginx is not installed), all on the same
// `uncaged-workflow serve` backend. Every figure of every path is taken
// right after a direct run of its own, in every round, and printed round
// by round against it and against ours, then as the median over rounds;
// then their memory after load over time, and 100 MB responses on fresh
// processes measured the same way. -peers=false gives the single-tunnel
// figures and the design floors below.
//
// On a busy machine throughput ratios say little; CPU per request does not
// depend on what else runs. -cpuonly measures just that figure, -runs times
// in turn (direct, then via the gateway), and prints the median. -src builds
// the binaries from another tree (a scratch copy with an experimental
// change), so two variants can be measured back to back. With
// UNCAGED_CPUPROFILE=/dir set, both binaries write a CPU profile there on
// exit.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/uncaged/workflow/bench/loadgen"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/shared/gctune"
	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/tunnel"
)

func main() {
	seconds := flag.Int("seconds", 5, "duration of each throughput run")
	idle := flag.Int("idle", 10000, "idle connectors for the memory figure (0: skip)")
	bigMB := flag.Int("big", 100, "size of the large response in MB")
	cpuOnly := flag.Bool("cpuonly", false, "measure only CPU per small GET (repeated -runs times)")
	runs := flag.Int("runs", 1, "repetitions of the small-GET figure; the median is reported")
	src := flag.String("src", ".", "source tree to build the binaries from")
	withDirect := flag.Bool("direct", true, "also measure the connector directly (off: only via the gateway, e.g. under -wrap-*)")
	wrapGW := flag.String("wrap-gateway", "", "command line to run the gateway under (e.g. valgrind --tool=callgrind)")
	wrapConn := flag.String("wrap-connector", "", "command line to run the connector under")
	floorAddr := flag.String("serve-floor", "", "internal: serve the bare-server floor on this address")
	skeletonGW := flag.String("serve-skeleton-gateway", "", "internal: CARRIER,HTTP,TUNNEL of a design skeleton's gateway")
	skeletonConn := flag.String("serve-skeleton-connector", "", "internal: CARRIER,TUNNEL of a design skeleton's connector")
	peers := flag.Bool("peers", true, "compare with frp and chisel (built from pinned module versions) and nginx instead of the design floors")
	rounds := flag.Int("rounds", 5, "interleaved rounds of the peer comparison")
	flag.Parse()
	if *floorAddr != "" || *skeletonGW != "" || *skeletonConn != "" {
		// The same collector policy as the real servers, so the floors
		// differ from them only by code.
		gctune.Start()
	}
	switch {
	case *floorAddr != "":
		serveFloor(*floorAddr)
		return
	case *skeletonGW != "":
		a := strings.Split(*skeletonGW, ",")
		serveSkeletonGateway(a[0], a[1], a[2])
		return
	case *skeletonConn != "":
		carrier, tunnelAddr, _ := strings.Cut(*skeletonConn, ",")
		serveSkeletonConnector(carrier, tunnelAddr)
		return
	}
	// Nothing it starts reads or writes the home of whoever runs it.
	defer testkit.PrivateHomeFor("tunnelbench")()
	work, err := os.MkdirTemp("", "tunnelbench-")
	check(err)
	defer func() { check(os.RemoveAll(work)) }()

	bin := build(*src, work)
	key := strings.TrimSpace(out(bin("uncaged-gateway"), nil, "key", "generate"))
	// The shared secret lets the idle connectors of the memory figure in
	// without issuing ten thousand tokens.
	// The gateway's store lives in the scratch directory: the default,
	// ~/.uncaged/gateway, is the user's own gateway's, and would keep the
	// bench's tokens.
	env := []string{"UNCAGED_GATEWAY_KEY=" + key, "WORKFLOW_DASHBOARD_SECRET=" + idleSecret, "UNCAGED_GATEWAY_DATA_DIR=" + filepath.Join(work, "gateway")}
	dash := strings.TrimSpace(out(bin("uncaged-gateway"), env, "token", "create", "--dashboard"))
	connTok := strings.TrimSpace(out(bin("uncaged-gateway"), env, "token", "create", "--connector", "bench"))

	root := filepath.Join(work, "root")
	bigHash := putBig(root, *bigMB)
	if *peers && !*cpuOnly && *wrapGW == "" && *wrapConn == "" {
		setup := &peerSetup{bin: bin, peers: peerBinaries(), root: root, work: work, env: env, dash: dash, token: connTok}
		setup.nginx, setup.nginxVersion = nginxBinary()
		fmt.Printf("tunnelbench: %d CPUs, load average %s at the start; this project's tunnel against frp, chisel and an nginx hop\n", numCPU(), loadAverage())
		if setup.nginx == "" {
			fmt.Println("tunnelbench: nginx is not installed (not on PATH, not /usr/sbin/nginx): the nginx hop is left out (Debian: apt-get install nginx)")
		}
		fmt.Println()
		peerRun(setup, bigHash, *bigMB, *rounds, *seconds, 5)
		fmt.Printf("tunnelbench: load average %s at the end of the peer comparison\n\n", loadAverage())
		if *idle > 0 {
			gwAddr := freePort()
			gw := start(bin("uncaged-gateway"), env, "serve", "--listen", gwAddr, "--connect-rate", "-1", "--max-concurrent", "-1", "--max-conns-per-ip", "-1")
			defer stop(gw)
			waitHTTP("http://" + gwAddr + "/healthz")
			idleMemory(gw.Process.Pid, gwAddr, *idle)
		}
		return
	}

	gwAddr, apiAddr := freePort(), freePort()
	// All idle connectors dial from one address.
	gw := startWrapped(*wrapGW, bin("uncaged-gateway"), env, "serve", "--listen", gwAddr, "--connect-rate", "-1", "--max-concurrent", "-1", "--max-conns-per-ip", "-1")
	defer stop(gw)
	waitHTTP("http://" + gwAddr + "/healthz")
	conn := startWrapped(*wrapConn, bin("uncaged-workflow"), []string{storage.EnvRoot + "=" + root, "UNCAGED_WORKFLOW_TOKEN=" + connTok},
		"connect", "--name", "bench", "--gateway", "http://"+gwAddr, "--listen", apiAddr)
	defer stop(conn)
	direct := "http://" + apiAddr + "/api"
	viaGW := "http://" + gwAddr + "/api/clients/bench"
	waitHTTP(direct + "/healthz")
	waitTarget(target{url: viaGW + "/healthz", token: dash})

	fmt.Printf("tunnelbench: %d CPUs, gateway %s, connector API %s\n\n", numCPU(), gwAddr, apiAddr)

	fmt.Println("small GET /api/healthz, 64 concurrent")
	pids := []int{gw.Process.Pid, conn.Process.Pid}
	var dRates, dCPUs, tRates, tCPUs, own, gwCPUs, connCPUs, gwCalls, connCalls, gwBytes, connBytes []float64
	for i := 0; i < max(*runs, 1); i++ {
		d := loadResult{cpu: []float64{0}, syscalls: []float64{0}, written: []float64{0}}
		if *withDirect {
			d = load(target{url: direct + "/healthz"}, 64, *seconds, []int{conn.Process.Pid})
		}
		t := load(target{url: viaGW + "/healthz", token: dash}, 64, *seconds, pids)
		dCPU, tCPU := d.cpu[0], t.cpu[0]+t.cpu[1]
		if *runs > 1 {
			fmt.Printf("  run %d: direct %.0f req/s %.1f µs, via gateway %.0f req/s %.1f µs (gateway %.1f, connector %.1f), tunnel %.1f µs; %d + %d requests\n",
				i+1, d.rate, dCPU, t.rate, tCPU, t.cpu[0], t.cpu[1], tCPU-dCPU, d.requests, t.requests)
		}
		dRates, dCPUs = append(dRates, d.rate), append(dCPUs, dCPU)
		tRates, tCPUs = append(tRates, t.rate), append(tCPUs, tCPU)
		gwCPUs, connCPUs = append(gwCPUs, t.cpu[0]), append(connCPUs, t.cpu[1])
		gwCalls, connCalls = append(gwCalls, t.syscalls[0]), append(connCalls, t.syscalls[1]-d.syscalls[0])
		gwBytes, connBytes = append(gwBytes, t.written[0]), append(connBytes, t.written[1])
		own = append(own, tCPU-dCPU)
	}
	dRate, dCPU, tRate, cpuPerReq := median(dRates), median(dCPUs), median(tRates), median(tCPUs)
	fmt.Printf("  direct       %9.0f req/s   connector CPU %.1f µs/request\n", dRate, dCPU)
	fmt.Printf("  via gateway  %9.0f req/s   gateway + connector CPU %.1f µs/request   ratio %.2fx (target >= 0.5x)\n", tRate, cpuPerReq, tRate/dRate)
	fmt.Printf("    gateway %.1f µs, connector %.1f µs; read+write system calls per request: gateway %.2f, connector %+.2f vs direct\n",
		median(gwCPUs), median(connCPUs), median(gwCalls), median(connCalls))
	fmt.Printf("    bytes written per request: gateway %.0f (tunnel and dashboard), connector %.0f\n", median(gwBytes), median(connBytes))
	fmt.Printf("  the tunnel's own CPU per request (via gateway minus direct): %.1f µs (target <= 40 µs)\n", median(own))
	if *withDirect {
		floors(*runs, *seconds, tRate/dRate, median(own))
	}
	fmt.Println()
	// Callgrind does not survive the SIGTERM that stops the processes, so
	// have it write its counts first.
	for _, w := range []struct {
		wrap string
		cmd  *exec.Cmd
	}{{*wrapGW, gw}, {*wrapConn, conn}} {
		if strings.Contains(w.wrap, "callgrind") {
			dump := exec.Command("callgrind_control", "--dump", strconv.Itoa(w.cmd.Process.Pid))
			dump.Stdout, dump.Stderr = os.Stderr, os.Stderr
			check(dump.Run())
		}
	}
	if *cpuOnly {
		return
	}

	fmt.Printf("one %d MB response (GET /api/cas/<hash>), median of 5 each\n", *bigMB)
	// One transfer swings by 2x with what else the machine does, so
	// alternate direct and tunnelled transfers and compare medians.
	var dBigs, tBigs []float64
	for i := 0; i < 5; i++ {
		dBigs = append(dBigs, bigGet(target{url: direct + "/cas/" + bigHash}))
		tBigs = append(tBigs, bigGet(target{url: viaGW + "/cas/" + bigHash, token: dash}))
	}
	dBig, tBig := median(dBigs), median(tBigs)
	fmt.Printf("  direct       %8.1f MB/s\n  via gateway  %8.1f MB/s   ratio %.2fx (target >= 0.5x)\n\n", dBig, tBig, tBig/dBig)

	fmt.Println("latency of one request at a time (GET /api/healthz, 500 requests)")
	dP50 := p50(target{url: direct + "/healthz"})
	tP50 := p50(target{url: viaGW + "/healthz", token: dash})
	fmt.Printf("  direct p50       %8s\n  via gateway p50  %8s   (target <= 1 ms)\n\n", dP50, tP50)

	if *idle > 0 {
		idleMemory(gw.Process.Pid, gwAddr, *idle)
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "tunnelbench:", err)
		os.Exit(1)
	}
}

// loadAverage is the machine's 1, 5 and 15 minute load averages: figures
// taken beside other work are worth less, and the reader should know.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func numCPU() int { n, _ := strconv.Atoi(strings.TrimSpace(out("nproc", nil))); return n }

// median of xs (of the middle two when even).
func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func build(src, work string) func(string) string {
	for _, b := range []struct{ name, pkg string }{{"uncaged-workflow", "./connector/cmd/uncaged-workflow"}, {"uncaged-gateway", "./gateway/cmd/uncaged-gateway"}} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(work, b.name), b.pkg)
		cmd.Dir = src
		cmd.Stderr = os.Stderr
		check(cmd.Run())
	}
	return func(name string) string { return filepath.Join(work, name) }
}

func out(bin string, env []string, args ...string) string {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	b, err := cmd.Output()
	check(err)
	return string(b)
}

// startWrapped starts bin under wrap, a command line such as
// "valgrind --tool=callgrind": instruction counts per request do not
// depend on what else the machine runs. The pid measured is the wrapper's,
// which under valgrind is the program's own.
func startWrapped(wrap, bin string, env []string, args ...string) *exec.Cmd {
	if wrap == "" {
		return start(bin, env, args...)
	}
	w := strings.Fields(wrap)
	cmd := exec.Command(w[0], append(append(w[1:], bin), args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	check(cmd.Start())
	return cmd
}

func start(bin string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	check(cmd.Start())
	return cmd
}

// stop ends a process the benchmark started and reaps it. How it ended
// does not matter once its figures are taken; a failed Signal or Kill
// means it has exited already, which Wait then reports.
func stop(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	addr := ln.Addr().String()
	check(ln.Close())
	return addr
}

// target is what the requests of one figure go to: a URL, with the
// dashboard's bearer token and a Host header where the path needs them
// (frp's HTTP proxy routes by Host, as the gateway routes by path).
type target struct{ url, token, host string }

// at is t with path added to its URL.
func (t target) at(path string) target {
	t.url += path
	return t
}

func waitHTTP(url string) { waitTarget(target{url: url}) }

// waitTarget waits until t answers 200: the process behind it has started
// and, for a tunnel, its two ends have met.
func waitTarget(t target) {
	for i := 0; i < 1200; i++ {
		req, err := newGet(t)
		check(err)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	check(fmt.Errorf("%s never answered", t.url))
}

// putBig stores a content node of mb megabytes straight into the CAS.
func putBig(root string, mb int) string {
	payload := strings.Repeat("0123456789abcdef", mb<<16)
	h, err := cas.Open(storage.Layout{Root: root}.CASDir()).PutNode(node.NewContent(payload, nil))
	check(err)
	return h
}

func client(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
}

// cpuTime is utime+stime of a process in µs.
func cpuTime(pid int) float64 {
	d, err := loadgen.CPUTime(pid)
	check(err)
	return float64(d.Microseconds())
}

// syscalls counts a process's read and write system calls (the socket
// traffic; futexes and polls are not included). Unlike CPU time it does not
// grow when the machine is busy, so it shows coalescing at work.
func syscalls(pid int) float64 { return procIO(pid, "syscr") + procIO(pid, "syscw") }

// procIO is one counter of /proc/<pid>/io.
func procIO(pid int, key string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	check(err)
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok && k == key {
			x, _ := strconv.ParseFloat(v, 64)
			return x
		}
	}
	return 0
}

// loadResult is one load run: requests per second and, per process, CPU µs
// and read+write system calls per request.
type loadResult struct {
	rate          float64
	requests      int64
	cpu, syscalls []float64
	// written is bytes written per request (sockets included).
	written []float64
}

// load runs `workers` loops of GET t for the duration, measuring the
// processes pids.
func load(t target, workers, seconds int, pids []int) loadResult {
	c := client(workers)
	var n atomic.Int64
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	cpu0, calls0, written0 := make([]float64, len(pids)), make([]float64, len(pids)), make([]float64, len(pids))
	for i, p := range pids {
		cpu0[i], calls0[i], written0[i] = cpuTime(p), syscalls(p), procIO(p, "wchar")
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				req, _ := newGet(t)
				resp, err := c.Do(req)
				if err != nil {
					continue
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode == 200 {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0).Seconds()
	res := loadResult{rate: float64(n.Load()) / elapsed, requests: n.Load(), cpu: make([]float64, len(pids)), syscalls: make([]float64, len(pids)), written: make([]float64, len(pids))}
	if n.Load() > 0 {
		for i, p := range pids {
			res.cpu[i] = (cpuTime(p) - cpu0[i]) / float64(n.Load())
			res.syscalls[i] = (syscalls(p) - calls0[i]) / float64(n.Load())
			res.written[i] = (procIO(p, "wchar") - written0[i]) / float64(n.Load())
		}
	}
	return res
}

func bigGet(t target) float64 {
	best := 0.0
	for i := 0; i < 3; i++ {
		req, err := newGet(t)
		check(err)
		t0 := time.Now()
		resp, err := client(1).Do(req)
		check(err)
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		check(err)
		if rate := float64(n) / 1e6 / time.Since(t0).Seconds(); rate > best {
			best = rate
		}
	}
	return best
}

func p50(t target) time.Duration { return p50n(t, 500) }

// p50n is the median latency of n requests made one at a time.
func p50n(t target, n int) time.Duration {
	c := client(1)
	var ds []time.Duration
	for i := 0; i < n; i++ {
		req, err := newGet(t)
		check(err)
		t0 := time.Now()
		resp, err := c.Do(req)
		check(err)
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		check(err)
		if resp.StatusCode != 200 {
			check(fmt.Errorf("GET %s: %d", t.url, resp.StatusCode))
		}
		ds = append(ds, time.Since(t0))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2].Round(time.Microsecond)
}

// newGet is a GET of t's URL, with its token as the bearer and its Host
// when set.
func newGet(t target) (*http.Request, error) {
	req, err := http.NewRequest("GET", t.url, nil)
	if err != nil {
		return nil, err
	}
	if t.token != "" {
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	if t.host != "" {
		req.Host = t.host
	}
	return req, nil
}

// ioCopyDiscard reads resp's body to its end and closes it.
func ioCopyDiscard(resp *http.Response) (int64, error) {
	defer func() { _ = resp.Body.Close() }()
	return io.Copy(io.Discard, resp.Body)
}

func rss(pid int) int64 {
	now, _, err := loadgen.Memory(pid)
	check(err)
	return now
}

const idleSecret = "tunnelbench-shared-secret"

// idleMemory holds n tunnel connections open (served by a trivial handler
// in this process) and reports the gateway's resident memory per
// connection.
func idleMemory(pid int, gwAddr string, n int) {
	fmt.Printf("gateway memory per idle connector (%d connectors)\n", n)
	before, goBefore := rss(pid), goMemory(gwAddr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	var connected atomic.Int64
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("idle-%d", i)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ws, err := tunnel.Dial(ctx, "http://"+gwAddr, name, idleSecret, nil)
			if err != nil {
				return
			}
			connected.Add(1)
			// Idle until ctx ends, which is what ends Serve: its error
			// then says only that.
			go func() { _ = tunnel.Serve(ctx, ws, handler, tunnel.ServeOptions{}) }()
		}()
	}
	wg.Wait()
	time.Sleep(2 * time.Second)
	after := rss(pid)
	per := float64(after-before) / float64(max(connected.Load(), 1))
	fmt.Printf("  %d connected; gateway RSS %d MB -> %d MB: %.1f KiB per connector (target <= 64 KiB)\n",
		connected.Load(), before>>20, after>>20, per/1024)
	goAfter := goMemory(gwAddr)
	n64 := float64(max(connected.Load(), 1))
	fmt.Printf("  of which, by the gateway's runtime: heap in use %.1f KiB, goroutine stacks %.1f KiB, %.2f goroutines per connector\n",
		(goAfter["go_memstats_heap_inuse_bytes"]-goBefore["go_memstats_heap_inuse_bytes"])/n64/1024,
		(goAfter["go_memstats_stack_inuse_bytes"]-goBefore["go_memstats_stack_inuse_bytes"])/n64/1024,
		(goAfter["go_goroutines"]-goBefore["go_goroutines"])/n64)
}

// goMemory reads the gateway's own account of its memory and goroutines
// from its /metrics: what RSS is made of, steadier than RSS.
func goMemory(gwAddr string) map[string]float64 {
	resp, err := http.Get("http://" + gwAddr + "/metrics")
	check(err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	check(err)
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		name, value, ok := strings.Cut(line, " ")
		switch name {
		case "go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes", "go_goroutines":
			if v, err := strconv.ParseFloat(value, 64); ok && err == nil {
				out[name] = v
			}
		}
	}
	return out
}

// serveFloor answers every request as floorHandler does, with nothing else
// in the way: no router, no auth, no proxy.
func serveFloor(addr string) { check(http.ListenAndServe(addr, floorHandler())) }

// floorHandler answers with the body the connector's healthz sends.
func floorHandler() http.Handler {
	body := []byte(`{"ok":true}` + "\n")
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
}

// floors measures, alternating run by run, a bare net/http server (what
// the gateway's dashboard side costs before any proxying: whatever the
// tunnel does, the gateway must at least accept the dashboard's HTTP/1
// request and answer it) and the design skeleton behind it over both
// carriers (skeleton.go), and prints them beside the real tunnel's ratio
// and own CPU.
func floors(runs, seconds int, ratio, own float64) {
	self, err := os.Executable()
	check(err)
	bareAddr := freePort()
	bare := start(self, nil, "-serve-floor", bareAddr)
	defer stop(bare)
	waitHTTP("http://" + bareAddr + "/api/healthz")
	type skeleton struct {
		carrier, addr    string
		gw, conn         *exec.Cmd
		cpu, rate, gwCPU []float64
	}
	var skels []*skeleton
	for _, carrier := range []string{carrierTCP, carrierWebSocket} {
		s := &skeleton{carrier: carrier, addr: freePort()}
		tunnelAddr := freePort()
		s.gw = start(self, nil, "-serve-skeleton-gateway", carrier+","+s.addr+","+tunnelAddr)
		defer stop(s.gw)
		s.conn = start(self, nil, "-serve-skeleton-connector", carrier+","+tunnelAddr)
		defer stop(s.conn)
		waitHTTP("http://" + s.addr + "/api/healthz")
		skels = append(skels, s)
	}
	var bareCPU, bareRate []float64
	for i := 0; i < max(runs, 1); i++ {
		b := load(target{url: "http://" + bareAddr + "/api/healthz"}, 64, seconds, []int{bare.Process.Pid})
		bareCPU, bareRate = append(bareCPU, b.cpu[0]), append(bareRate, b.rate)
		for _, s := range skels {
			r := load(target{url: "http://" + s.addr + "/api/healthz"}, 64, seconds, []int{s.gw.Process.Pid, s.conn.Process.Pid})
			s.cpu, s.rate, s.gwCPU = append(s.cpu, r.cpu[0]+r.cpu[1]), append(s.rate, r.rate), append(s.gwCPU, r.cpu[0])
		}
	}
	fmt.Printf("  floor: a bare net/http server answering the same request: %.0f req/s, %.1f µs/request — what the gateway's dashboard side costs before any proxying\n",
		median(bareRate), median(bareCPU))
	fmt.Printf("  design skeleton: that server + ReverseProxy + x/net/http2 client to an http2.Server, nothing else (no router, auth, log or metrics):\n")
	for _, s := range skels {
		fmt.Printf("    over %-9s %6.0f req/s = %.2fx the bare server; %.1f µs/request (gateway %.1f), %.1f µs more than the bare server\n",
			s.carrier, median(s.rate), median(s.rate)/median(bareRate), median(s.cpu), median(s.gwCPU), median(s.cpu)-median(bareCPU))
	}
	fmt.Printf("    the real gateway + connector: %.2fx, %.1f µs more than direct\n", ratio, own)
}
