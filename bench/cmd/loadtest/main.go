// Command loadtest puts a real uncaged-gateway under load from simulated
// connectors and measures it, with chaos on request:
//
//   - N simulated connectors, in this process, each a real WebSocket with
//     the uncaged-workflow.h2 subprotocol kept up by connector/link (the
//     real connector's reconnect loop: exponential backoff, full jitter),
//     serving a small deterministic API through shared/tunnel;
//   - R requests a second to each connector for D, open loop, from a
//     client pool through the gateway's /api/clients/<name>/load;
//   - reported: requests, errors by kind, p50/p90/p99/max latency of the
//     successful ones, the gateway's CPU seconds and peak RSS (from
//     /proc/<pid>), and how long all connectors took to connect.
//
// -chaos restart stops the gateway halfway through (SIGTERM, or SIGKILL
// with -restart-signal kill) and starts it again on the same address: the
// report gives the gap, how long until every connector was back, and the
// errors in that window apart from the rest.
//
// -nats adds a cluster run: -replicas gateways (serve --nats, with an
// embedded NATS server in this process) behind a TCP load balancer in this
// process, the connectors spread over them by the balancer;
// -chaos kill-replica kill -9s one replica halfway through and its
// connectors reconnect to the others. The single-replica run and the
// cluster run are printed with a ratio line, measured in the same
// invocation. Without cluster support in the gateway binary (no --nats
// flag) the cluster run is skipped with a note. Cluster mode keeps its
// state in PostgreSQL: the cluster run needs -database-url (or
// UNCAGED_GATEWAY_DATABASE_URL), a database the replicas share, and is
// skipped with a note without one.
//
// The tokens the simulated connectors present are minted here and
// recorded in the gateways' store (a SQLite data directory of this run's
// own, or the cluster's database), as `uncaged-gateway token create`
// records them: a gateway refuses a token it has no record of.
//
// Usage:
//
//	go run ./bench/cmd/loadtest [-connectors 1000] [-rate 10] [-duration 60s]
//	    [-chaos restart,kill-replica] [-nats -database-url URL] [-replicas 3] [-balance-single] [-quick]
//
// The cluster is reached through TCP balancers in this process, the single
// replica directly; -balance-single puts the single replica behind the
// same balancers, so the ratio is the cluster's own cost and not the
// balancers' (which, on a loaded machine, dominate the tail).
//
// -single-connector (on by default) runs the same total request rate
// through one connector after the fleet, and prints the fleet's gateway
// CPU per request against it; -idle-connectors N connects N connectors
// with no load and prints the gateway's CPU per idle connector per minute.
//
// -quick is a CI-size run (100 connectors × 5 req/s × 10 s, 1,000 idle) unless the
// sizes are given explicitly. With UNCAGED_CPUPROFILE=DIR set, this process
// and the gateways write CPU profiles there.
package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/uncaged/workflow/bench/loadgen"
	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/profiling"
	"github.com/uncaged/workflow/shared/testkit"
)

// config is one run's shape.
type config struct {
	label          string
	connectors     int
	rate           float64
	duration       time.Duration
	timeout        time.Duration
	conns          int
	maxInFlight    int
	replicas       int    // 1: a single gateway, no NATS
	chaos          string // "", "restart" or "kill-replica"
	restartSignal  syscall.Signal
	gatewayBin     string
	gatewayLog     string
	heartbeat      time.Duration
	baseline       time.Duration
	clusterCapable bool
	// connCapped: the gateway limits connections per address
	// (--max-conns-per-ip), a limit the load runs turn off.
	connCapped bool
	// balanced puts a single replica behind the balancers too, as the
	// cluster always is, so the ratio is the cluster's own cost.
	balanced bool
	// store is where the gateways keep their state and the run records
	// its tokens: a data directory (single replica) or PostgreSQL.
	store store.Config
	// idleOnly connects the fleet and measures the baseline (idle CPU)
	// only, with no load.
	idleOnly bool
}

func main() {
	connectors := flag.Int("connectors", 1000, "simulated connectors")
	rate := flag.Float64("rate", 10, "requests a second to each connector")
	duration := flag.Duration("duration", 60*time.Second, "length of the load")
	timeout := flag.Duration("timeout", 10*time.Second, "timeout of one request")
	conns := flag.Int("conns", 256, "client connection pool to the gateway")
	maxInFlight := flag.Int("max-inflight", 2048, "requests outstanding at once; more are counted as not sent (0: no bound)")
	chaos := flag.String("chaos", "", "comma-separated: restart (single-replica run), kill-replica (cluster run)")
	restartSig := flag.String("restart-signal", "term", "how -chaos restart stops the gateway: term or kill")
	useNATS := flag.Bool("nats", false, "also run a cluster of -replicas gateways over an embedded NATS server")
	replicas := flag.Int("replicas", 3, "gateway replicas of the cluster run")
	gatewayBin := flag.String("gateway", "", "uncaged-gateway binary (default: build ./gateway/cmd/uncaged-gateway)")
	gatewayLog := flag.String("gateway-log", "", "append the gateways' JSON logs to this file (default: discarded)")
	heartbeat := flag.Duration("heartbeat", 15*time.Second, "the gateway's heartbeat interval")
	baseline := flag.Duration("baseline", 5*time.Second, "measure the gateways' CPU with every connector connected and no load for this long first (0: skip)")
	balanceSingle := flag.Bool("balance-single", false, "put the single replica behind the harness's TCP balancers too, like the cluster (the ratio then leaves the balancers out)")
	quick := flag.Bool("quick", false, "CI-size run: 100 connectors × 5 req/s × 10 s unless given")
	withBaseline := flag.Bool("single-connector", true, "also run one connector taking the whole request rate, and print the fleet's gateway CPU per request against it")
	idleConnectors := flag.Int("idle-connectors", 10000, "connect this many connectors with no load and print the gateway's CPU per idle connector per minute (0: skip)")
	databaseURL := flag.String("database-url", os.Getenv("UNCAGED_GATEWAY_DATABASE_URL"), "PostgreSQL the cluster run's replicas share (cluster mode needs one; default: $UNCAGED_GATEWAY_DATABASE_URL; without one the cluster run is skipped)")
	flag.Parse()
	// Nothing it starts reads or writes the home of whoever runs it.
	defer testkit.PrivateHomeFor("loadtest")()
	// UNCAGED_CPUPROFILE=DIR profiles this process, and the gateways too.
	defer profiling.Start()()

	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		if !set["connectors"] {
			*connectors = 100
		}
		if !set["rate"] {
			*rate = 5
		}
		if !set["duration"] {
			*duration = 10 * time.Second
		}
		if !set["idle-connectors"] {
			*idleConnectors = 1000
		}
	}
	chaosSet := map[string]bool{}
	for _, c := range strings.Split(*chaos, ",") {
		switch c = strings.TrimSpace(c); c {
		case "":
		case "restart", "kill-replica":
			chaosSet[c] = true
		default:
			fail(fmt.Errorf("unknown -chaos %q: use restart, kill-replica or both", c))
		}
	}
	sig := syscall.SIGTERM
	switch *restartSig {
	case "term":
	case "kill":
		sig = syscall.SIGKILL
	default:
		fail(fmt.Errorf("unknown -restart-signal %q: use term or kill", *restartSig))
	}
	switch {
	case *connectors < 1 || *rate <= 0 || *duration <= 0 || *timeout <= 0 || *conns < 1 || *maxInFlight < 0 || *baseline < 0:
		fail(errors.New("-connectors, -rate, -duration, -timeout and -conns must be positive, -max-inflight and -baseline not negative"))
	case chaosSet["kill-replica"] && !*useNATS:
		fail(errors.New("-chaos kill-replica needs the cluster run: add -nats"))
	case *useNATS && *replicas < 2:
		fail(errors.New("-replicas must be at least 2 for the cluster run"))
	}

	work, err := os.MkdirTemp("", "loadtest-")
	check(err)
	defer func() { check(os.RemoveAll(work)) }()
	if *gatewayBin == "" {
		*gatewayBin = filepath.Join(work, "uncaged-gateway")
		cmd := exec.Command("go", "build", "-o", *gatewayBin, "./gateway/cmd/uncaged-gateway")
		cmd.Stderr = os.Stderr
		check(cmd.Run())
	}
	help, _ := exec.Command(*gatewayBin, "serve", "--help").CombinedOutput()
	base := config{
		connectors: *connectors, rate: *rate, duration: *duration, timeout: *timeout, conns: *conns, maxInFlight: *maxInFlight,
		replicas: 1, restartSignal: sig, gatewayBin: *gatewayBin, gatewayLog: *gatewayLog, heartbeat: *heartbeat, baseline: *baseline,
		clusterCapable: strings.Contains(string(help), "--nats") && strings.Contains(string(help), "--replica-id"),
		connCapped:     strings.Contains(string(help), "--max-conns-per-ip"),
		balanced:       *balanceSingle,
	}
	fmt.Printf("loadtest: %d CPUs (shared by the gateway and this process: connectors and clients); %d connectors × %g req/s × %s, request timeout %s\n\n",
		runtime.NumCPU(), base.connectors, base.rate, base.duration, base.timeout)

	single := base
	single.store = store.Config{DataDir: filepath.Join(work, "gateway-data")}
	single.label = "single replica"
	if single.balanced {
		single.label += " (behind the balancers)"
	}
	if chaosSet["restart"] {
		single.chaos = "restart"
	}
	one := execute(single)
	one.print()
	if *withBaseline && base.connectors > 1 {
		// The same offered load on one connector: what a proxied request
		// costs the gateway when only one tunnel is open, measured beside
		// the fleet so the machine's load of the moment cancels out.
		lone := base
		lone.store = store.Config{DataDir: filepath.Join(work, "gateway-data-single-connector")}
		lone.label = "one connector, the same total rate"
		lone.connectors, lone.rate = 1, base.rate*float64(base.connectors)
		lone.balanced = single.balanced
		solo := execute(lone)
		solo.print()
		fmt.Printf("fleet cost: gateway CPU per successful request %.0f µs with %d connectors, %.0f µs with one: %.2fx (target <= 1.5x); idle with %d connectors: %.1f%% of one core\n\n",
			cpuPerOK(one), base.connectors, cpuPerOK(solo), cpuPerOK(one)/max(cpuPerOK(solo), 1), base.connectors, 100*one.idleCPU)
	}
	if *idleConnectors > 0 {
		idle := base
		idle.store = store.Config{DataDir: filepath.Join(work, "gateway-data-idle")}
		idle.label = "idle fleet"
		idle.connectors, idle.idleOnly = *idleConnectors, true
		idle.baseline = max(base.baseline, 30*time.Second)
		r := execute(idle)
		perConnMin := r.idleCPU * 60 / float64(idle.connectors) // core-seconds per minute, per connector
		fmt.Printf("idle: %d connectors online in %s, recorded seen %s later; then no requests, %s measured: gateway %.1f%% of one core = %.2f ms of CPU per idle connector per minute; RSS %s\n\n",
			idle.connectors, r.connectTime.Round(time.Millisecond), r.settleTime.Round(time.Millisecond), idle.baseline, 100*r.idleCPU, perConnMin*1000, mb(r.endRSS))
	}
	if !*useNATS {
		return
	}
	if !base.clusterCapable {
		fmt.Printf("cluster run skipped: %s serve has no --nats/--replica-id flags\n", *gatewayBin)
		return
	}
	if *databaseURL == "" {
		fmt.Println("cluster run skipped: cluster mode keeps its state in PostgreSQL; pass -database-url (or set UNCAGED_GATEWAY_DATABASE_URL)")
		return
	}
	cluster := base
	cluster.store = store.Config{DatabaseURL: *databaseURL}
	cluster.label = fmt.Sprintf("cluster of %d replicas (NATS)", *replicas)
	cluster.replicas = *replicas
	if chaosSet["kill-replica"] {
		cluster.chaos = "kill-replica"
	}
	many := execute(cluster)
	many.print()
	printRatio(one, many)
}

// report is what one run measured.
type report struct {
	cfg         config
	connectTime time.Duration
	// settleTime is how long after every connector was online the store
	// took to record them all (waitStored), before the idle baseline.
	settleTime time.Duration
	run        *loadgen.Run
	steady     loadgen.Stats // requests outside the chaos window
	inWindow   loadgen.Stats // requests in flight during it
	window     *loadgen.Window
	chaosNote  string
	cpu        time.Duration // all gateway processes, during the load
	idleCPU    float64       // cores the gateways use with no load
	idleKnown  bool          // idleCPU was measured
	peakRSS    int64         // sum over replicas of each one's peak (the largest, across a restart)
	endRSS     int64
	served     int64
}

func (r *report) print() {
	c := r.cfg
	fmt.Printf("%s: %d connectors × %g req/s × %s", c.label, c.connectors, c.rate, c.duration)
	if c.chaos != "" {
		fmt.Printf(", chaos: %s at %s", c.chaos, c.duration/2)
	}
	fmt.Println()
	fmt.Printf("  connect      all %d connectors online in %s\n", c.connectors, r.connectTime.Round(time.Millisecond))
	span := r.run.Ended.Sub(r.run.Began)
	all := loadgen.Summarize(r.run.Samples, nil, span)
	fmt.Printf("  requests     %d due, %d sent, %d ok (%.0f/s), %d answered by the connectors\n",
		all.Requests, all.Requests-all.ByKind[loadgen.KindShed], all.Requests-all.Errors, all.Rate, r.served)
	scope, which := "", "successful requests"
	if r.window != nil {
		scope, which = " outside the chaos window", "successful requests outside the chaos window"
	}
	fmt.Printf("  errors       %d%s (target 0): %s\n", r.steady.Errors, scope, r.steady.Kinds())
	fmt.Printf("  latency      p50 %s  p90 %s  p99 %s  max %s (%s)\n",
		ms(r.steady.P50), ms(r.steady.P90), ms(r.steady.P99), ms(r.steady.Max), which)
	fmt.Printf("  gateway      CPU %.1f s (%.0f%% of one core; %.0f µs per successful request), peak RSS %s, RSS at the end %s\n",
		r.cpu.Seconds(), 100*r.cpu.Seconds()/span.Seconds(), cpuPerOK(r), mb(r.peakRSS), mb(r.endRSS))
	if r.idleKnown {
		fmt.Printf("  idle         with all connectors connected and no requests the gateway uses %.1f%% of one core\n", 100*r.idleCPU)
	}
	if shed := all.ByKind[loadgen.KindShed]; shed > 0 {
		fmt.Printf("  saturated    %d requests not sent: %d were already outstanding (-max-inflight); the offered load is beyond this machine\n", shed, c.maxInFlight)
	}
	if r.window != nil {
		fmt.Printf("  chaos        %s\n", r.chaosNote)
		fmt.Printf("  in window    %d errors of %d requests sent in flight during it: %s\n", r.inWindow.Errors, r.inWindow.Requests, r.inWindow.Kinds())
	}
	fmt.Println()
}

// withoutShed takes the requests the client did not send (KindShed) out
// of st's errors and returns how many there were: they say the machine is
// saturated, not that the gateway failed, and are reported on their own.
func withoutShed(st *loadgen.Stats) int {
	shed := st.ByKind[loadgen.KindShed]
	delete(st.ByKind, loadgen.KindShed)
	st.Errors -= shed
	st.Requests -= shed
	return shed
}

// cpuPerOK is the gateway's CPU µs per successful request.
func cpuPerOK(r *report) float64 {
	ok := 0
	for _, s := range r.run.Samples {
		if s.Kind == "" {
			ok++
		}
	}
	return float64(r.cpu.Microseconds()) / float64(max(ok, 1))
}

func printRatio(one, many *report) {
	ratio := func(a, b float64) string {
		if b == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2fx", a/b)
	}
	okRate := func(r *report) float64 {
		return loadgen.Summarize(r.run.Samples, nil, r.run.Ended.Sub(r.run.Began)).Rate
	}
	fmt.Printf("ratio %s / %s: successful requests/s %s, p50 %s, p99 %s, gateway CPU per request %s, gateway peak RSS %s, errors outside chaos %d vs %d\n",
		many.cfg.label, one.cfg.label,
		ratio(okRate(many), okRate(one)), ratio(float64(many.steady.P50), float64(one.steady.P50)),
		ratio(float64(many.steady.P99), float64(one.steady.P99)), ratio(cpuPerOK(many), cpuPerOK(one)),
		ratio(float64(many.peakRSS), float64(one.peakRSS)), many.steady.Errors, one.steady.Errors)
}

// gateway is one replica's process.
type gateway struct {
	args    []string
	env     []string
	addr    string
	cmd     *exec.Cmd
	log     *os.File
	cpuDead time.Duration // CPU of processes this replica had before a restart
	peak    int64
}

func (g *gateway) start() {
	g.cmd = exec.Command(g.args[0], g.args[1:]...)
	g.cmd.Env = append(os.Environ(), g.env...)
	// If this process dies (a failed check exits at once), the gateway
	// must not outlive it.
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if g.log != nil {
		g.cmd.Stdout, g.cmd.Stderr = g.log, g.log
	}
	check(g.cmd.Start())
	waitHealthy(g.addr)
}

// stop ends the process with sig, first reading its CPU and memory.
func (g *gateway) stop(sig syscall.Signal) {
	if g.cmd == nil {
		return
	}
	if cpu, err := loadgen.CPUTime(g.cmd.Process.Pid); err == nil {
		g.cpuDead += cpu
	}
	if _, peak, err := loadgen.Memory(g.cmd.Process.Pid); err == nil {
		g.peak = max(g.peak, peak)
	}
	// A gateway that exited already makes Signal fail; Wait below reaps
	// it and says how it ended.
	_ = g.cmd.Process.Signal(sig)
	done := make(chan error, 1)
	go func() { done <- g.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(15 * time.Second):
		_ = g.cmd.Process.Kill() // as above
		err = <-done
	}
	if err != nil && sig != syscall.SIGKILL {
		// Reported, not fatal: the figures so far still stand.
		fmt.Fprintf(os.Stderr, "loadtest: gateway %s after %s: %v\n", g.addr, sig, err)
	}
	g.cmd = nil
}

// cpu is the replica's CPU so far, across restarts.
func (g *gateway) cpu() time.Duration {
	if g.cmd == nil {
		return g.cpuDead
	}
	c, err := loadgen.CPUTime(g.cmd.Process.Pid)
	check(err)
	return g.cpuDead + c
}

// memory is the replica's RSS now and its peak across restarts.
func (g *gateway) memory() (rss, peak int64) {
	if g.cmd == nil {
		return 0, g.peak
	}
	rss, p, err := loadgen.Memory(g.cmd.Process.Pid)
	check(err)
	return rss, max(p, g.peak)
}

func execute(c config) *report {
	key := auth.GenerateKey()
	raw, err := base64.StdEncoding.DecodeString(key)
	check(err)
	authority, err := auth.New(raw, "")
	check(err)
	st, err := store.Open(context.Background(), c.store)
	check(err)
	// mint signs a token and records it, as `token create` does.
	mint := func(role, name string) string {
		tok, rec, err := authority.Mint(role, name, 0, "loadtest")
		check(err)
		check(st.CreateToken(context.Background(), rec))
		return tok
	}
	dash := mint(auth.RoleDashboard, "")

	var natsURL string
	if c.replicas > 1 {
		ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
		check(err)
		go ns.Start()
		if !ns.ReadyForConnections(10 * time.Second) {
			fail(errors.New("embedded NATS server did not start"))
		}
		defer ns.Shutdown()
		natsURL = ns.ClientURL()
	}
	var logFile *os.File
	if c.gatewayLog != "" {
		logFile, err = os.OpenFile(c.gatewayLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		check(err)
		defer func() { check(logFile.Close()) }()
	}
	gws := make([]*gateway, c.replicas)
	addrs := make([]string, c.replicas)
	for i := range gws {
		addr := freePort()
		args := []string{c.gatewayBin, "serve", "--listen", addr, "--connect-rate", "-1", "--max-concurrent", "-1",
			"--heartbeat", c.heartbeat.String()}
		if c.connCapped {
			// Every connector and client dials from this one address.
			args = append(args, "--max-conns-per-ip", "-1")
		}
		if natsURL != "" {
			args = append(args, "--nats", natsURL, "--replica-id", fmt.Sprintf("replica-%d", i), "--cluster-advertise", "http://"+addr)
		}
		env := []string{"UNCAGED_GATEWAY_KEY=" + key}
		if c.store.DatabaseURL != "" {
			// In the environment, not the arguments: it may hold a password.
			env = append(env, "UNCAGED_GATEWAY_DATABASE_URL="+c.store.DatabaseURL)
		} else {
			args = append(args, "--data-dir", c.store.DataDir)
		}
		gws[i] = &gateway{args: args, env: env, addr: addr, log: logFile}
		gws[i].start()
		addrs[i] = addr
		defer gws[i].stop(syscall.SIGTERM)
	}
	// Connectors and clients reach the gateway as they would in
	// production: the gateway itself, or a balancer in front of replicas.
	// Two balancers, so the connectors a replica holds can be counted.
	connectTo, requestTo := "http://"+addrs[0], "http://"+addrs[0]
	var connectorLB *loadgen.Balancer
	if c.replicas > 1 || c.balanced {
		connectorLB, err = loadgen.NewBalancer(addrs)
		check(err)
		defer connectorLB.Close()
		clientLB, err := loadgen.NewBalancer(addrs)
		check(err)
		defer clientLB.Close()
		connectTo, requestTo = "http://"+connectorLB.Addr(), "http://"+clientLB.Addr()
	}

	names := make([]string, c.connectors)
	tokens := map[string]string{}
	for i := range names {
		names[i] = fmt.Sprintf("load-%05d", i)
		tokens[names[i]] = mint(auth.RoleConnector, names[i])
	}
	check(st.Close())
	t0 := time.Now()
	fleet := loadgen.StartFleet(loadgen.FleetOptions{Gateway: connectTo, Names: names, Token: func(n string) string { return tokens[n] }, Version: "loadtest"})
	defer fleet.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	check(fleet.WaitFor(ctx, loadgen.AllOnline))
	cancel()
	r := &report{cfg: c, connectTime: time.Since(t0)}
	// Every replica must see every connector before the load starts (in a
	// cluster, presence travels over NATS).
	for _, a := range addrs {
		if err := waitOnline(a, dash, c.connectors); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest: warning:", err)
		}
	}

	gatewaysCPU := func() (total time.Duration) {
		for _, g := range gws {
			total += g.cpu()
		}
		return total
	}
	if c.baseline > 0 {
		// The gateway marks each connector seen in its store as the
		// connector's change stream starts: a connect storm's writes, not
		// what holding the connectors costs. The baseline starts once they
		// are all written.
		settle := time.Now()
		if err := waitStored(c.store, c.connectors, t0); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest: warning:", err)
		}
		r.settleTime = time.Since(settle)
		// What holding the connectors costs (heartbeats, cluster presence,
		// the fleet's idle change streams) before any request: the floor
		// under the per-request figure.
		idle0 := gatewaysCPU()
		time.Sleep(c.baseline)
		r.idleCPU, r.idleKnown = float64(gatewaysCPU()-idle0)/float64(c.baseline), true
	}
	if c.idleOnly {
		for _, g := range gws {
			rss, _ := g.memory()
			r.endRSS += rss
		}
		return r
	}
	cpu0 := gatewaysCPU()
	served0 := fleet.Served()
	chaosDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		if c.chaos == "" {
			return
		}
		time.Sleep(c.duration / 2)
		switch c.chaos {
		case "restart":
			r.window, r.chaosNote = restart(gws[0], fleet, c.restartSignal)
		case "kill-replica":
			r.window, r.chaosNote = killReplica(gws[0], fleet, connectorLB)
		}
	}()
	r.run = loadgen.Drive(context.Background(), loadgen.DriveOptions{
		Gateway: requestTo, Token: dash, Names: names, Rate: c.rate, Duration: c.duration, Timeout: c.timeout, Conns: c.conns, MaxInFlight: c.maxInFlight,
	})
	<-chaosDone
	for _, g := range gws {
		r.cpu += g.cpu()
		rss, peak := g.memory()
		r.endRSS += rss
		r.peakRSS += peak
	}
	r.cpu -= cpu0
	r.served = fleet.Served() - served0
	if r.window != nil {
		w := *r.window
		r.steady = loadgen.Summarize(r.run.Samples, func(s loadgen.Sample) bool { return !w.Overlaps(s) }, r.run.Ended.Sub(r.run.Began))
		r.inWindow = loadgen.Summarize(r.run.Samples, w.Overlaps, 0)
		withoutShed(&r.inWindow)
	} else {
		r.steady = loadgen.Summarize(r.run.Samples, nil, r.run.Ended.Sub(r.run.Began))
	}
	withoutShed(&r.steady)
	return r
}

// restart stops the gateway with sig and starts it again on the same
// address; the window runs from the stop until every connector has a new
// connection.
func restart(g *gateway, fleet *loadgen.Fleet, sig syscall.Signal) (*loadgen.Window, string) {
	killed := time.Now()
	g.stop(sig)
	exited := time.Now()
	g.start()
	up := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	check(fleet.WaitFor(ctx, loadgen.ReconnectedSince(killed)))
	back := time.Now()
	delays := fleet.ReconnectDelays(killed)
	note := fmt.Sprintf("gateway stopped (%s; exited after %s) and restarted: listening again after %s; all %d connectors back after %s (reconnect p50 %s, p99 %s, max %s)",
		sigName(sig), ms(exited.Sub(killed)), ms(up.Sub(killed)), fleet.Size(), ms(back.Sub(killed)),
		ms(loadgen.Percentile(delays, 0.5)), ms(loadgen.Percentile(delays, 0.99)), ms(loadgen.Percentile(delays, 1)))
	return &loadgen.Window{From: killed, To: back}, note
}

// killReplica kill -9s one replica for good; the window runs until every
// connector it held is connected again (to another replica, through the
// balancer).
func killReplica(g *gateway, fleet *loadgen.Fleet, lb *loadgen.Balancer) (*loadgen.Window, string) {
	held := lb.Active(g.addr)
	killed := time.Now()
	g.stop(syscall.SIGKILL)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	check(fleet.WaitFor(ctx, func(f *loadgen.Fleet) bool {
		return loadgen.AllOnline(f) && len(f.ReconnectDelays(killed)) >= held
	}))
	back := time.Now()
	delays := fleet.ReconnectDelays(killed)
	note := fmt.Sprintf("replica %s killed (SIGKILL) holding %d connectors; all back on the other replicas after %s (reconnect p50 %s, p99 %s, max %s)",
		g.addr, held, ms(back.Sub(killed)),
		ms(loadgen.Percentile(delays, 0.5)), ms(loadgen.Percentile(delays, 0.99)), ms(loadgen.Percentile(delays, 1)))
	return &loadgen.Window{From: killed, To: back}, note
}

func sigName(s syscall.Signal) string {
	if s == syscall.SIGKILL {
		return "SIGKILL"
	}
	return "SIGTERM"
}

func ms(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	default:
		return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000)
	}
}

func mb(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/(1<<20)) }

func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	addr := ln.Addr().String()
	check(ln.Close())
	return addr
}

func waitHealthy(addr string) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	fail(fmt.Errorf("gateway at %s never became healthy", addr))
}

// waitOnline waits until the gateway at addr lists n connectors online.
func waitOnline(addr, dash string, n int) error {
	deadline := time.Now().Add(time.Minute)
	got := 0
	for time.Now().Before(deadline) {
		if got = countOnline(addr, dash); got == n {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("gateway at %s lists %d of %d connectors online", addr, got, n)
}

func countOnline(addr, dash string) int {
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/api/gateway/endpoints", nil)
	req.Header.Set("Authorization", "Bearer "+dash)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	eps, err := decodeEndpoints(resp)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range eps {
		if e.Status == "online" {
			n++
		}
	}
	return n
}

func check(err error) {
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "loadtest:", err)
	os.Exit(1)
}

// waitStored waits until the store cfg names records n machines seen
// since t0: every connector's first touch written.
func waitStored(cfg store.Config, n int, t0 time.Time) error {
	st, err := store.Open(context.Background(), cfg)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }() // read only
	deadline := time.Now().Add(2 * time.Minute)
	seen := 0
	for time.Now().Before(deadline) {
		ms, err := st.ListMachines(context.Background())
		if err != nil {
			return err
		}
		seen = 0
		for _, m := range ms {
			if !m.LastSeen.Before(t0.Truncate(time.Millisecond)) {
				seen++
			}
		}
		if seen >= n {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the store records %d of %d connectors seen", seen, n)
}
