package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/uncaged/workflow/engine/storage"
)

// The tunnels people run today, built from pinned module versions so that
// every run compares against the same code. They are built in a scratch
// module of their own (never this repository's go.mod) and cached between
// runs under the user's cache directory.
var peerModules = []struct{ module, version string }{
	{"github.com/jpillora/chisel", "v1.11.3"},
	{"github.com/fatedier/frp", "v0.65.0"},
}

// peerBinaries builds chisel, frps and frpc (once per version) and returns
// their paths by name.
func peerBinaries() map[string]string {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "uncaged-tunnelbench")
	check(os.MkdirAll(dir, 0o755))
	bins := map[string]string{}
	for _, m := range peerModules {
		var cmds []string
		switch m.module {
		case "github.com/jpillora/chisel":
			cmds = []string{""}
		case "github.com/fatedier/frp":
			cmds = []string{"cmd/frps", "cmd/frpc"}
		}
		for _, sub := range cmds {
			pkg := strings.TrimSuffix(m.module+"/"+sub, "/")
			name := filepath.Base(pkg)
			bin := filepath.Join(dir, name+"-"+m.version)
			bins[name] = bin
			if _, err := os.Stat(bin); err == nil {
				continue
			}
			fmt.Fprintf(os.Stderr, "tunnelbench: building %s@%s\n", pkg, m.version)
			buildPeer(m.module, m.version, pkg, bin)
		}
	}
	return bins
}

// buildPeer builds pkg of module@version into bin. `go install pkg@version`
// would do, but it asks the proxy for the module's version list (for
// deprecation notices), which some proxies refuse; a scratch module that
// requires the version, with the module's own go.sum, needs only the
// module's files.
func buildPeer(module, version, pkg, bin string) {
	scratch, err := os.MkdirTemp("", "tunnelbench-peer-")
	check(err)
	defer func() { check(os.RemoveAll(scratch)) }()
	dl := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	dl.Dir = scratch
	dl.Stderr = os.Stderr
	b, err := dl.Output()
	check(err)
	var info struct{ Dir string }
	check(json.Unmarshal(b, &info))
	gomod := fmt.Sprintf("module tunnelbenchpeer\n\ngo 1.25\n\nrequire %s %s\n", module, version)
	check(os.WriteFile(filepath.Join(scratch, "go.mod"), []byte(gomod), 0o644))
	sum, err := os.ReadFile(filepath.Join(info.Dir, "go.sum"))
	check(err)
	check(os.WriteFile(filepath.Join(scratch, "go.sum"), sum, 0o644))
	build := exec.Command("go", "build", "-mod=mod", "-trimpath", "-o", bin+".tmp", pkg)
	build.Dir = scratch
	build.Env = append(os.Environ(), "GOFLAGS=", "CGO_ENABLED=0")
	build.Stderr = os.Stderr
	check(build.Run())
	check(os.Rename(bin+".tmp", bin))
}

// tunnelPath is one way to reach the backend's API: directly, through this
// project's gateway and connector, or through a peer tunnel.
type tunnelPath struct {
	name string
	// url is the API's base (…/api); token, when set, is the dashboard's.
	url, token string
	// start brings up the path's processes (none for direct); procs are
	// the tunnel's own processes, whose CPU and memory are the tunnel's.
	start func() []*exec.Cmd
	procs []*exec.Cmd
}

func (p *tunnelPath) pids() []int {
	var out []int
	for _, c := range p.procs {
		out = append(out, c.Process.Pid)
	}
	return out
}

func (p *tunnelPath) stop() {
	for _, c := range p.procs {
		stop(c)
	}
	p.procs = nil
}

// peerSetup is what every path shares: the binaries, the storage root the
// backends serve, and the credentials.
type peerSetup struct {
	bin         func(string) string
	peers       map[string]string
	root, work  string
	env         []string
	dash, token string
}

// ours is this project's path: a fresh gateway and a connector serving the
// same root.
func (s *peerSetup) ours() *tunnelPath {
	p := &tunnelPath{name: "uncaged-workflow", token: s.dash}
	gwAddr := freePort()
	p.url = "http://" + gwAddr + "/api/clients/bench"
	p.start = func() []*exec.Cmd {
		gw := start(s.bin("uncaged-gateway"), s.env, "serve", "--listen", gwAddr, "--connect-rate", "-1", "--max-concurrent", "-1", "--max-conns-per-ip", "-1")
		waitHTTP("http://" + gwAddr + "/healthz")
		conn := start(s.bin("uncaged-workflow"), []string{storage.EnvRoot + "=" + s.root, "UNCAGED_WORKFLOW_TOKEN=" + s.token},
			"connect", "--name", "bench", "--gateway", "http://"+gwAddr, "--listen", freePort())
		waitAuthHTTP(p.url+"/healthz", s.dash)
		return []*exec.Cmd{gw, conn}
	}
	return p
}

// chisel is a reverse chisel tunnel (WebSocket + SSH): the server opens the
// listening port, the client reaches the backend.
func (s *peerSetup) chisel(backend string) *tunnelPath {
	p := &tunnelPath{name: "chisel v1.11.3"}
	ctl, listen := freePort(), freePort()
	p.url = "http://" + listen + "/api"
	p.start = func() []*exec.Cmd {
		_, port, _ := strings.Cut(ctl, ":")
		srv := startQuiet(s.peers["chisel"], "server", "--host", "127.0.0.1", "--port", port, "--reverse")
		cli := startQuiet(s.peers["chisel"], "client", "http://"+ctl, "R:"+listen+":"+backend)
		waitHTTP(p.url + "/healthz")
		return []*exec.Cmd{srv, cli}
	}
	return p
}

// frp is frps + frpc with a tcp proxy to the backend; protocol is frpc's
// transport.protocol, tls its transport.tls.enable.
func (s *peerSetup) frp(backend, protocol string, tls bool) *tunnelPath {
	name := "frp v0.65.0 " + protocol
	if protocol == "tcp" {
		if tls {
			name += ", TLS (default)"
		} else {
			name += ", TLS off"
		}
	}
	p := &tunnelPath{name: name}
	ctl, listen := freePort(), freePort()
	p.url = "http://" + listen + "/api"
	_, ctlPort, _ := strings.Cut(ctl, ":")
	_, listenPort, _ := strings.Cut(listen, ":")
	bHost, bPort, _ := strings.Cut(backend, ":")
	dir, err := os.MkdirTemp(s.work, "frp-")
	check(err)
	srvConf := filepath.Join(dir, "frps.toml")
	check(os.WriteFile(srvConf, fmt.Appendf(nil, "bindAddr = \"127.0.0.1\"\nbindPort = %s\nproxyBindAddr = \"127.0.0.1\"\nlog.level = \"error\"\n", ctlPort), 0o644))
	cliConf := filepath.Join(dir, "frpc.toml")
	check(os.WriteFile(cliConf, fmt.Appendf(nil, `serverAddr = "127.0.0.1"
serverPort = %s
loginFailExit = false
log.level = "error"
transport.protocol = %q
transport.tls.enable = %t

[[proxies]]
name = "api"
type = "tcp"
localIP = %q
localPort = %s
remotePort = %s
`, ctlPort, protocol, tls, bHost, bPort, listenPort), 0o644))
	p.start = func() []*exec.Cmd {
		srv := startQuiet(s.peers["frps"], "-c", srvConf)
		cli := startQuiet(s.peers["frpc"], "-c", cliConf)
		waitHTTP(p.url + "/healthz")
		return []*exec.Cmd{srv, cli}
	}
	return p
}

func startQuiet(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	check(cmd.Start())
	return cmd
}

// peerRun compares this project's tunnel with chisel and frp on the same
// backend (`uncaged-workflow serve` on one storage root), with the same
// load generator, in interleaved rounds, and prints the medians of the
// per-round ratios to direct. It then loads the long-lived tunnels with
// 100 MB responses and follows their memory, and times 100 MB responses on
// fresh processes.
func peerRun(s *peerSetup, bigHash string, bigMB, rounds, seconds, bigRuns int) {
	backend := freePort()
	serve := start(s.bin("uncaged-workflow"), []string{storage.EnvRoot + "=" + s.root}, "serve", "--listen", backend)
	defer stop(serve)
	direct := &tunnelPath{name: "direct (serve)", url: "http://" + backend + "/api"}
	waitHTTP(direct.url + "/healthz")
	paths := []*tunnelPath{
		s.ours(),
		s.chisel(backend),
		s.frp(backend, "tcp", false),
		s.frp(backend, "tcp", true),
		s.frp(backend, "websocket", false),
	}
	for _, p := range paths {
		p.procs = p.start()
	}
	defer func() {
		for _, p := range paths {
			p.stop()
		}
	}()
	servePid := []int{serve.Process.Pid}

	fmt.Printf("peers: small GET /api/healthz, 64 concurrent, %d rounds of %d s, interleaved (the order rotates each round)\n", rounds, seconds)
	type smallFigures struct{ ratio, cpu, p50 []float64 }
	figs := map[*tunnelPath]*smallFigures{}
	for _, p := range paths {
		figs[p] = &smallFigures{}
	}
	var directRates, directCPU []float64
	for r := range rounds {
		d := load(direct.url+"/healthz", "", 64, seconds, servePid)
		directRates, directCPU = append(directRates, d.rate), append(directCPU, d.cpu[0])
		for i := range paths {
			p := paths[(i+r)%len(paths)]
			res := load(p.url+"/healthz", p.token, 64, seconds, append(p.pids(), servePid...))
			tunnelCPU := 0.0
			for _, c := range res.cpu[:len(p.procs)] {
				tunnelCPU += c
			}
			if p.name == "uncaged-workflow" {
				// The connector answers the API itself: its own share of
				// the work is what serve spends on the same request.
				tunnelCPU -= d.cpu[0]
			}
			f := figs[p]
			f.ratio = append(f.ratio, res.rate/d.rate)
			f.cpu = append(f.cpu, tunnelCPU)
		}
		dP50 := p50n(direct.url+"/healthz", "", 300)
		for i := range paths {
			p := paths[(i+r)%len(paths)]
			figs[p].p50 = append(figs[p].p50, float64(p50n(p.url+"/healthz", p.token, 300).Microseconds()))
		}
		fmt.Printf("  round %d done: direct %.0f req/s, p50 %s\n", r+1, d.rate, dP50)
	}
	fmt.Printf("  direct (serve)                 %6.0f req/s, serve CPU %.1f µs/request\n", median(directRates), median(directCPU))
	fmt.Printf("  %-30s %9s %18s %10s\n", "path", "× direct", "tunnel CPU µs/req", "p50 c=1")
	best := struct{ ratio, cpu, p50 float64 }{0, 1e18, 1e18}
	for _, p := range paths {
		f := figs[p]
		fmt.Printf("  %-30s %9.2f %18.1f %8.2f ms\n", p.name, median(f.ratio), median(f.cpu), median(f.p50)/1000)
		if p.name != "uncaged-workflow" {
			best.ratio, best.cpu, best.p50 = max(best.ratio, median(f.ratio)), min(best.cpu, median(f.cpu)), min(best.p50, median(f.p50))
		}
	}
	ours := figs[paths[0]]
	fmt.Printf("  ours against the best peer: throughput %.2fx, CPU %.2fx, p50 %.2fx (targets: >= 1, <= 1, <= 1)\n\n",
		median(ours.ratio)/best.ratio, median(ours.cpu)/best.cpu, median(ours.p50)/best.p50)

	fmt.Printf("peers: memory after the small GETs, then %d × one %d MB response each (long-lived processes)\n", bigRuns, bigMB)
	mem := newMemoryLog(paths)
	mem.sample("after small GETs")
	for range bigRuns {
		for _, p := range paths {
			bigOnce(p.url+"/cas/"+bigHash, p.token)
		}
	}
	mem.sample(fmt.Sprintf("after %d MB ×%d", bigMB, bigRuns))
	for _, at := range []int{1, 2, 5, 10, 20, 30} {
		time.Sleep(time.Until(mem.start.Add(time.Duration(at) * time.Second)))
		mem.sample(fmt.Sprintf("+%d s", at))
	}
	mem.print()
	for _, p := range paths {
		p.stop()
	}

	fmt.Printf("peers: one %d MB response on fresh processes, %d transfers each, interleaved\n", bigMB, bigRuns)
	bigRatio, bigCPU := map[*tunnelPath][]float64{}, map[*tunnelPath][]float64{}
	var directBig []float64
	for r := range bigRuns {
		d := bigOnce(direct.url+"/cas/"+bigHash, "")
		directBig = append(directBig, d)
		for i := range paths {
			p := paths[(i+r)%len(paths)]
			p.procs = p.start()
			cpu0 := 0.0
			for _, pid := range p.pids() {
				cpu0 += cpuTime(pid)
			}
			rate := bigOnce(p.url+"/cas/"+bigHash, p.token)
			cpu1 := 0.0
			for _, pid := range p.pids() {
				cpu1 += cpuTime(pid)
			}
			p.stop()
			bigRatio[p] = append(bigRatio[p], rate/d)
			bigCPU[p] = append(bigCPU[p], (cpu1-cpu0)/1000)
		}
	}
	fmt.Printf("  direct (serve) %.0f MB/s (median)\n", median(directBig))
	fmt.Printf("  %-30s %9s %9s %22s\n", "path", "× direct", "range", "tunnel CPU ms/transfer")
	bestBig := 0.0
	for _, p := range paths {
		rs := append([]float64(nil), bigRatio[p]...)
		sort.Float64s(rs)
		cs := append([]float64(nil), bigCPU[p]...)
		sort.Float64s(cs)
		fmt.Printf("  %-30s %9.2f %4.2f–%4.2f %10.0f (%.0f–%.0f)\n", p.name, median(rs), rs[0], rs[len(rs)-1], median(cs), cs[0], cs[len(cs)-1])
		if p.name != "uncaged-workflow" {
			bestBig = max(bestBig, median(rs))
		}
	}
	fmt.Printf("  ours against the best peer: %.2fx (target >= 1)\n\n", median(bigRatio[paths[0]])/bestBig)
}

// bigOnce fetches url once and returns MB/s.
func bigOnce(url, token string) float64 {
	req, err := newGet(url, token)
	check(err)
	t0 := time.Now()
	resp, err := client(1).Do(req)
	check(err)
	n, err := ioCopyDiscard(resp)
	check(err)
	if resp.StatusCode != 200 {
		check(fmt.Errorf("GET %s: %d", url, resp.StatusCode))
	}
	return float64(n) / 1e6 / time.Since(t0).Seconds()
}

// memoryLog follows the resident memory of every tunnel process over time.
type memoryLog struct {
	start  time.Time
	paths  []*tunnelPath
	labels []string
	rows   [][]int64 // per label, per process
}

func newMemoryLog(paths []*tunnelPath) *memoryLog {
	return &memoryLog{start: time.Now(), paths: paths}
}

func (m *memoryLog) sample(label string) {
	if label != "after small GETs" && !strings.HasPrefix(label, "+") {
		m.start = time.Now()
	}
	var row []int64
	for _, p := range m.paths {
		for _, pid := range p.pids() {
			row = append(row, rss(pid))
		}
	}
	m.labels, m.rows = append(m.labels, label), append(m.rows, row)
}

// print writes one line per process: its RSS in MB at each sample.
func (m *memoryLog) print() {
	fmt.Printf("  RSS in MB at: %s (target for ours: <= 64 MB within 30 s)\n", strings.Join(m.labels, " | "))
	i := 0
	for _, p := range m.paths {
		for j, c := range p.procs {
			var cols []string
			for _, row := range m.rows {
				cols = append(cols, fmt.Sprintf("%4d", row[i]>>20))
			}
			fmt.Printf("  %-30s %-8s %s\n", p.name, processRole(p, j, c), strings.Join(cols, " "))
			i++
		}
	}
	fmt.Println()
}

// processRole names a tunnel's process: the public side, then the side
// beside the backend.
func processRole(p *tunnelPath, i int, _ *exec.Cmd) string {
	switch {
	case p.name == "uncaged-workflow" && i == 0:
		return "gateway"
	case p.name == "uncaged-workflow":
		return "connect"
	case i == 0:
		return "server"
	default:
		return "client"
	}
}
