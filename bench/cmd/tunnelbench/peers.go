package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
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

// nginxBinary is nginx on PATH, or where Debian installs it (/usr/sbin is
// often not on a user's PATH), and its version; "" when it is in neither.
func nginxBinary() (bin, version string) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin = "/usr/sbin/nginx"
		if _, err := os.Stat(bin); err != nil {
			return "", ""
		}
	}
	// nginx -v writes "nginx version: nginx/1.22.1" to stderr.
	b, err := exec.Command(bin, "-v").CombinedOutput()
	check(err)
	_, version, _ = strings.Cut(strings.TrimSpace(string(b)), "nginx/")
	return bin, version
}

// tunnelPath is one way to reach the backend's API: directly, through this
// project's gateway and connector, or through a peer.
type tunnelPath struct {
	name string
	// target's url is the API's base (…/api); its token, when set, is the
	// dashboard's, its host the Host frp routes by.
	target
	// start brings up the path's processes (none for direct); procs are
	// the tunnel's own processes, whose CPU and memory are the tunnel's,
	// and roles name them in the same order. A process's children (nginx's
	// workers) count as the tunnel's too.
	start func() []*exec.Cmd
	procs []*exec.Cmd
	roles []string
}

// isOurs tells this project's path from the peers.
func (p *tunnelPath) isOurs() bool { return p.name == oursName }

const oursName = "uncaged-workflow"

// pids are the path's processes and their children.
func (p *tunnelPath) pids() []int {
	var out []int
	for _, c := range p.procs {
		out = append(out, withChildren(c.Process.Pid)...)
	}
	return out
}

// processes names each of pids(): its role, or "worker" for a child.
func (p *tunnelPath) processes() (pids []int, roles []string) {
	for i, c := range p.procs {
		for j, pid := range withChildren(c.Process.Pid) {
			role := p.roles[i]
			if j > 0 {
				role = "worker"
			}
			pids, roles = append(pids, pid), append(roles, role)
		}
	}
	return pids, roles
}

// withChildren is pid and its descendants, from the children lists of all
// its threads.
func withChildren(pid int) []int {
	out := []int{pid}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread has ended
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, withChildren(c)...)
			}
		}
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
	// nginx and nginxVersion are empty when nginx is not installed.
	nginx, nginxVersion string
}

// ours is this project's path: a fresh gateway and a connector serving the
// same root.
func (s *peerSetup) ours() *tunnelPath {
	p := &tunnelPath{name: oursName, roles: []string{"gateway", "connect"}}
	gwAddr := freePort()
	p.target = target{url: "http://" + gwAddr + "/api/clients/bench", token: s.dash}
	p.start = func() []*exec.Cmd {
		gw := start(s.bin("uncaged-gateway"), s.env, "serve", "--listen", gwAddr, "--connect-rate", "-1", "--max-concurrent", "-1", "--max-conns-per-ip", "-1")
		waitHTTP("http://" + gwAddr + "/healthz")
		conn := start(s.bin("uncaged-workflow"), []string{storage.EnvRoot + "=" + s.root, "UNCAGED_WORKFLOW_TOKEN=" + s.token},
			"connect", "--name", "bench", "--gateway", "http://"+gwAddr, "--listen", freePort())
		waitTarget(p.at("/healthz"))
		return []*exec.Cmd{gw, conn}
	}
	return p
}

// chisel is a reverse chisel tunnel (WebSocket + SSH): the server opens the
// listening port, the client reaches the backend.
func (s *peerSetup) chisel(backend string) *tunnelPath {
	p := &tunnelPath{name: "chisel v1.11.3", roles: []string{"server", "client"}}
	ctl, listen := freePort(), freePort()
	p.url = "http://" + listen + "/api"
	p.start = func() []*exec.Cmd {
		_, port, _ := strings.Cut(ctl, ":")
		srv := startQuiet(s.peers["chisel"], "server", "--host", "127.0.0.1", "--port", port, "--reverse")
		cli := startQuiet(s.peers["chisel"], "client", "http://"+ctl, "R:"+listen+":"+backend)
		waitTarget(p.at("/healthz"))
		return []*exec.Cmd{srv, cli}
	}
	return p
}

// frpVariant is one way to run frp: frpc's transport.protocol and
// transport.tls.enable, and whether the proxy is frp's HTTP vhost (routed
// by Host, with token auth) rather than a tcp port.
type frpVariant struct {
	protocol string
	tls      bool
	http     bool
}

// frpDomain is the Host the HTTP vhost proxy answers.
const frpDomain = "bench.frp.test"

// frp is frps + frpc reaching the backend as v says.
//
// The HTTP vhost is the peer doing this gateway's job: one public HTTP
// port, requests routed to a client by name (Host there, the path here),
// a credential checked (frp checks its token when frpc logs in, the
// gateway checks the dashboard's on every request). Its transport is plain
// TCP without TLS, as the gateway's WebSocket is in this benchmark.
func (s *peerSetup) frp(backend string, v frpVariant) *tunnelPath {
	name := "frp v0.65.0 " + v.protocol
	switch {
	case v.http:
		name = "frp v0.65.0 http vhost, token"
	case v.protocol == "tcp" && v.tls:
		name += ", TLS (default)"
	case v.protocol == "tcp":
		name += ", TLS off"
	}
	p := &tunnelPath{name: name, roles: []string{"server", "client"}}
	ctl, listen := freePort(), freePort()
	p.url = "http://" + listen + "/api"
	_, ctlPort, _ := strings.Cut(ctl, ":")
	_, listenPort, _ := strings.Cut(listen, ":")
	bHost, bPort, _ := strings.Cut(backend, ":")
	dir, err := os.MkdirTemp(s.work, "frp-")
	check(err)
	srv := fmt.Sprintf("bindAddr = \"127.0.0.1\"\nbindPort = %s\nproxyBindAddr = \"127.0.0.1\"\nlog.level = \"error\"\n", ctlPort)
	cli := fmt.Sprintf(`serverAddr = "127.0.0.1"
serverPort = %s
loginFailExit = false
log.level = "error"
transport.protocol = %q
transport.tls.enable = %t
`, ctlPort, v.protocol, v.tls)
	proxy := fmt.Sprintf("type = \"tcp\"\nremotePort = %s\n", listenPort)
	if v.http {
		token := "tunnelbench-frp-token"
		auth := fmt.Sprintf("auth.method = \"token\"\nauth.token = %q\n", token)
		srv += fmt.Sprintf("vhostHTTPPort = %s\n", listenPort) + auth
		cli += auth
		proxy = fmt.Sprintf("type = \"http\"\ncustomDomains = [%q]\n", frpDomain)
		p.host = frpDomain
	}
	cli += fmt.Sprintf("\n[[proxies]]\nname = \"api\"\nlocalIP = %q\nlocalPort = %s\n", bHost, bPort) + proxy
	srvConf, cliConf := filepath.Join(dir, "frps.toml"), filepath.Join(dir, "frpc.toml")
	check(os.WriteFile(srvConf, []byte(srv), 0o644))
	check(os.WriteFile(cliConf, []byte(cli), 0o644))
	p.start = func() []*exec.Cmd {
		srv := startQuiet(s.peers["frps"], "-c", srvConf)
		cli := startQuiet(s.peers["frpc"], "-c", cliConf)
		waitTarget(p.at("/healthz"))
		return []*exec.Cmd{srv, cli}
	}
	return p
}

// nginxHop is nginx as a plain reverse proxy in front of the backend, with
// upstream keepalive, one worker per CPU and, as the nginx configuration
// this project ships, without buffering: the floor of one HTTP hop, which
// a tunnel adds to.
func (s *peerSetup) nginxHop(backend string) *tunnelPath {
	p := &tunnelPath{name: "nginx " + s.nginxVersion + " keepalive", roles: []string{"master"}}
	listen := freePort()
	p.url = "http://" + listen + "/api"
	dir, err := os.MkdirTemp(s.work, "nginx-")
	check(err)
	workers := runtime.NumCPU()
	conf := filepath.Join(dir, "nginx.conf")
	check(os.WriteFile(conf, fmt.Appendf(nil, `daemon off;
worker_processes %[2]d;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log error;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    upstream backend {
        server %[3]s;
        keepalive 128;
    }
    server {
        listen %[4]s;
        location / {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }
    }
}
`, dir, workers, backend, listen), 0o644))
	p.start = func() []*exec.Cmd {
		// -e: the error log before the configuration is read, which
		// Debian's build puts on stderr.
		cmd := startQuiet(s.nginx, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"))
		waitTarget(p.at("/healthz"))
		// Every worker must be counted from the first figure on.
		for i := 0; len(withChildren(cmd.Process.Pid)) < 1+workers; i++ {
			if i == 1000 {
				check(fmt.Errorf("nginx started fewer than %d workers", workers))
			}
			time.Sleep(10 * time.Millisecond)
		}
		return []*exec.Cmd{cmd}
	}
	return p
}

func startQuiet(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	check(cmd.Start())
	return cmd
}

// peerRun compares this project's tunnel with chisel, frp and an nginx
// hop on the same backend (`uncaged-workflow serve` on one storage root),
// with the same load generator, in rounds. In every round each path is
// measured right after a direct run of its own, so each figure is divided
// by a baseline taken seconds before it on a machine whose speed drifts
// with whatever else it runs; ours ÷ a peer is the ratio of those two
// quotients. The order of the paths rotates from round to round. It then
// loads the long-lived tunnels with 100 MB responses and follows their
// memory, and times 100 MB responses on fresh processes the same way.
func peerRun(s *peerSetup, bigHash string, bigMB, rounds, seconds, bigRuns int) {
	backend := freePort()
	serve := start(s.bin("uncaged-workflow"), []string{storage.EnvRoot + "=" + s.root}, "serve", "--listen", backend)
	defer stop(serve)
	direct := target{url: "http://" + backend + "/api"}
	waitTarget(direct.at("/healthz"))
	paths := []*tunnelPath{
		s.ours(),
		s.frp(backend, frpVariant{protocol: "tcp", http: true}),
		s.chisel(backend),
		s.frp(backend, frpVariant{protocol: "tcp"}),
		s.frp(backend, frpVariant{protocol: "tcp", tls: true}),
		s.frp(backend, frpVariant{protocol: "websocket"}),
	}
	if s.nginx != "" {
		paths = append(paths, s.nginxHop(backend))
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

	fmt.Printf("peers: small GET /api/healthz, %d rounds; in each round every path runs right after a direct run of its own:\n", rounds)
	fmt.Printf("  %d s at 64 concurrent (throughput, CPU), then 300 one at a time (p50); the order rotates each round\n", seconds)
	rate := newFigure("throughput, req/s", true)
	cpu := newFigure("tunnel CPU per request, µs", false)
	cpu.note = cpuNote
	lat := newFigure("p50 latency one request at a time, µs", false)
	t0 := time.Now()
	for r := range rounds {
		for i := range paths {
			p := paths[(i+r)%len(paths)]
			d := load(direct.at("/healthz"), 64, seconds, servePid)
			res := load(p.at("/healthz"), 64, seconds, append(p.pids(), servePid...))
			tunnelCPU := 0.0
			for _, c := range res.cpu[:len(res.cpu)-1] {
				tunnelCPU += c
			}
			if p.isOurs() {
				// The connector answers the API itself: its own share of
				// the work is what serve spends on the same request.
				tunnelCPU -= d.cpu[0]
			}
			rate.add(r, p, res.rate, d.rate)
			cpu.add(r, p, tunnelCPU, d.cpu[0])
			dP50 := p50n(direct.at("/healthz"), 300)
			lat.add(r, p, float64(p50n(p.at("/healthz"), 300).Microseconds()), float64(dP50.Microseconds()))
		}
		fmt.Fprintf(os.Stderr, "tunnelbench: small-GET round %d of %d done after %s\n", r+1, rounds, time.Since(t0).Round(time.Second))
	}
	for _, f := range []*figure{rate, cpu, lat} {
		f.print(paths)
	}

	fmt.Printf("peers: memory after the small GETs, then %d × one %d MB response each (long-lived processes)\n", bigRuns, bigMB)
	mem := newMemoryLog(paths)
	mem.sample("after small GETs")
	for range bigRuns {
		for _, p := range paths {
			bigOnce(p.at("/cas/" + bigHash))
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

	fmt.Printf("peers: one %d MB response on fresh processes, %d rounds; in each round every path runs right after a direct transfer of its own\n", bigMB, bigRuns)
	bigRate := newFigure(fmt.Sprintf("%d MB response, MB/s", bigMB), true)
	bigCPU := newFigure(fmt.Sprintf("tunnel CPU per %d MB response, ms", bigMB), false)
	bigCPU.note = cpuNote
	for r := range bigRuns {
		for i := range paths {
			p := paths[(i+r)%len(paths)]
			// Started first, so that the direct transfer is the last thing
			// before this path's.
			p.procs = p.start()
			pids := p.pids()
			cpu0 := cpuRun(serve.Process.Pid)
			d := bigOnce(direct.at("/cas/" + bigHash))
			dCPU := (cpuRun(serve.Process.Pid) - cpu0) / 1000
			cpu0 = 0
			for _, pid := range pids {
				cpu0 += cpuRun(pid)
			}
			rate := bigOnce(p.at("/cas/" + bigHash))
			cpu1 := 0.0
			for _, pid := range pids {
				cpu1 += cpuRun(pid)
			}
			p.stop()
			tunnelCPU := (cpu1 - cpu0) / 1000
			if p.isOurs() {
				tunnelCPU -= dCPU
			}
			bigRate.add(r, p, rate, d)
			bigCPU.add(r, p, tunnelCPU, dCPU)
		}
	}
	for _, f := range []*figure{bigRate, bigCPU} {
		f.print(paths)
	}
}

// cpuRun is the time pid's threads have run on a CPU, in µs, from the
// scheduler's nanosecond counts: one transfer costs tens of milliseconds,
// which utime and stime count only in ticks of 10 ms. A thread that has
// ended takes its count with it; the servers measured keep theirs.
func cpuRun(pid int) float64 {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	check(err)
	total := 0.0
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread has just ended
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseFloat(f[0], 64)
		check(err)
		total += ns / 1000
	}
	return total
}

// cpuNote says what the CPU figures count.
const cpuNote = "(the tunnel's processes; direct: serve's own; ours: gateway + connector − serve's own in its direct run, as the connector answers itself)"

// figure is one measure of every path, round by round, each beside the
// direct baseline taken right before it.
type figure struct {
	title, note string
	// higherIsBetter: throughput; CPU and latency are better lower.
	higherIsBetter bool
	value, direct  map[*tunnelPath][]float64
}

func newFigure(title string, higherIsBetter bool) *figure {
	return &figure{title: title, higherIsBetter: higherIsBetter, value: map[*tunnelPath][]float64{}, direct: map[*tunnelPath][]float64{}}
}

func (f *figure) add(round int, p *tunnelPath, value, direct float64) {
	if len(f.value[p]) != round {
		check(fmt.Errorf("%s: %s measured out of turn", f.title, p.name))
	}
	f.value[p] = append(f.value[p], value)
	f.direct[p] = append(f.direct[p], direct)
}

// vsDirect is p's figure ÷ its own direct baseline, round by round.
func (f *figure) vsDirect(p *tunnelPath) []float64 {
	out := make([]float64, len(f.value[p]))
	for i, v := range f.value[p] {
		out[i] = v / f.direct[p][i]
	}
	return out
}

// print writes, round by round and as the median over rounds, every
// path's figure against its own direct run, then ours against each peer.
func (f *figure) print(paths []*tunnelPath) {
	rounds := len(f.value[paths[0]])
	better := "lower is better"
	if f.higherIsBetter {
		better = "higher is better"
	}
	fmt.Printf("\n  %s (%s)\n", f.title, better)
	if f.note != "" {
		fmt.Printf("  %s\n", f.note)
	}
	head := ""
	for r := range rounds {
		head += fmt.Sprintf(" %6s", fmt.Sprintf("r%d", r+1))
	}
	fmt.Printf("  %-30s %s %7s   %s\n", "÷ direct run right before", head, "median", "median value (median direct)")
	for _, p := range paths {
		q := f.vsDirect(p)
		fmt.Printf("  %-30s %s %7.2f   %.1f (%.1f)\n", p.name, row(q), median(q), median(f.value[p]), median(f.direct[p]))
	}
	var ours *tunnelPath
	for _, p := range paths {
		if p.isOurs() {
			ours = p
		}
	}
	fmt.Printf("  %-30s %s %7s   %s\n", "ours ÷ peer, each ÷ its direct", head, "median", "range")
	o := f.vsDirect(ours)
	for _, p := range paths {
		if p == ours {
			continue
		}
		q := f.vsDirect(p)
		rs := make([]float64, rounds)
		for i := range rs {
			rs[i] = o[i] / q[i]
		}
		fmt.Printf("  %-30s %s %7.2f   %.2f–%.2f\n", p.name, row(rs), median(rs), minOf(rs), maxOf(rs))
	}
}

func row(xs []float64) string {
	s := ""
	for _, x := range xs {
		s += fmt.Sprintf(" %6.2f", x)
	}
	return s
}

func minOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs {
		m = min(m, x)
	}
	return m
}

func maxOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// bigOnce fetches t once and returns MB/s.
func bigOnce(t target) float64 {
	req, err := newGet(t)
	check(err)
	t0 := time.Now()
	resp, err := client(1).Do(req)
	check(err)
	n, err := ioCopyDiscard(resp)
	check(err)
	if resp.StatusCode != 200 {
		check(fmt.Errorf("GET %s: %d", t.url, resp.StatusCode))
	}
	return float64(n) / 1e6 / time.Since(t0).Seconds()
}

// memoryLog follows the resident memory of every tunnel process over time.
type memoryLog struct {
	start  time.Time
	procs  []loggedProcess
	labels []string
	rows   [][]int64 // per label, per process
}

// loggedProcess is one process memoryLog follows.
type loggedProcess struct {
	path, role string
	pid        int
}

func newMemoryLog(paths []*tunnelPath) *memoryLog {
	m := &memoryLog{start: time.Now()}
	for _, p := range paths {
		pids, roles := p.processes()
		for i, pid := range pids {
			m.procs = append(m.procs, loggedProcess{path: p.name, role: roles[i], pid: pid})
		}
	}
	return m
}

func (m *memoryLog) sample(label string) {
	if label != "after small GETs" && !strings.HasPrefix(label, "+") {
		m.start = time.Now()
	}
	var row []int64
	for _, p := range m.procs {
		row = append(row, rss(p.pid))
	}
	m.labels, m.rows = append(m.labels, label), append(m.rows, row)
}

// print writes one line per process: its RSS in MB at each sample.
func (m *memoryLog) print() {
	fmt.Printf("  RSS in MB at: %s (target for ours: <= 64 MB within 30 s)\n", strings.Join(m.labels, " | "))
	for i, p := range m.procs {
		var cols []string
		for _, row := range m.rows {
			cols = append(cols, fmt.Sprintf("%4d", row[i]>>20))
		}
		fmt.Printf("  %-30s %-8s %s\n", p.path, p.role, strings.Join(cols, " "))
	}
	fmt.Println()
}
