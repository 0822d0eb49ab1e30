// Command opsbench runs a gateway cluster as an operator does and puts it
// through the faults operations bring, under load, measuring what each
// costs the people using it:
//
//   - on loopback: PostgreSQL and NATS, three uncaged-gateway replicas
//     behind nginx with the shipped cluster configuration
//     (deploy/nginx/uncaged-gateway-cluster.conf), and three real
//     connectors (uncaged-workflow connect) dialing through nginx, each
//     with a workflow of 20 steps of about a second;
//   - a steady load through nginx: every connector read every probe
//     interval, the endpoints and machine lists every second (the
//     dashboard's sidebar), a thread start every start interval, and live
//     streams that follow those threads and resume with Last-Event-ID;
//   - the faults in turn: a rolling restart at Kubernetes pace (SIGTERM,
//     start again, the next once /readyz is 200), kill -9 of the replica
//     holding the most connectors, NATS stopped, PostgreSQL stopped.
//
// It prints one line per fault — requests, failed, the longest time a
// connector answered nothing, streams resumed (and events lost or
// repeated), audit entries expected and found — after a line for the
// steady state measured in the same run, then checks each fault against
// its target and exits 1 when one is missed:
//
//   - rolling restart: no failed request, no connector away over 1 s;
//   - kill -9: only requests in flight at the kill fail, every connector
//     is back within 2 s;
//   - NATS stopped: at most 1% of requests fail;
//   - PostgreSQL stopped: no proxied request fails, the machine list
//     never fails;
//   - every fault: no live stream event lost or repeated across its
//     resumptions, and every thread start that was answered 201 is in the
//     audit log once the store has written what waited.
//
// Usage (from the repository's root):
//
//	go run ./bench/cmd/opsbench [-quick] [-outage 30s] [-keep]
//
// -quick is the CI size (a short steady state and settling; ≤ 5 minutes on
// 2 cores); the outages are 30 s in both. Logs of every process are in a
// temporary directory, kept with -keep or when a target is missed.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/testkit/pgtest"
)

func main() {
	quick := flag.Bool("quick", false, "CI size: 10 s of steady state, 5 s to settle after each fault")
	outage := flag.Duration("outage", 30*time.Second, "how long NATS and PostgreSQL stay stopped")
	steady := flag.Duration("steady", 60*time.Second, "steady state before the faults (the baseline line)")
	settle := flag.Duration("settle", 20*time.Second, "load after each fault is over, counted with it")
	probe := flag.Duration("probe", 200*time.Millisecond, "each connector is read this often (the outage's resolution)")
	startEvery := flag.Duration("start-every", 2*time.Second, "a thread start this often")
	streams := flag.Int("streams", 6, "live streams followed at once")
	keep := flag.Bool("keep", false, "keep the logs' directory")
	flag.Parse()
	// Nothing it starts reads or writes the home of whoever runs it.
	removeHome := testkit.PrivateHomeFor("opsbench")
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		if !set["steady"] {
			*steady = 10 * time.Second
		}
		if !set["settle"] {
			*settle = 5 * time.Second
		}
	}
	missed, dir, err := run(*steady, *settle, *outage, *probe, *startEvery, *streams)
	if err != nil {
		fmt.Fprintln(os.Stderr, "opsbench:", err)
	}
	if *keep || err != nil || missed > 0 {
		fmt.Printf("logs: %s\n", dir)
	} else if dir != "" {
		_ = os.RemoveAll(dir) // a temporary directory: nothing in it is wanted
	}
	removeHome()
	switch {
	case err != nil:
		os.Exit(2)
	case missed > 0:
		fmt.Printf("%d target(s) missed\n", missed)
		os.Exit(1)
	}
	fmt.Println("every target met")
}

// step prints what the harness is doing, so a person sees progress.
func step(format string, args ...any) {
	fmt.Printf("%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(steady, settle, outage, probeEvery, startEvery time.Duration, streams int) (missed int, dir string, err error) {
	repo, err := os.Getwd()
	if err != nil {
		return 0, "", err
	}
	if _, err := os.Stat(filepath.Join(repo, "deploy/nginx/uncaged-gateway-cluster.conf")); err != nil {
		return 0, "", fmt.Errorf("run it from the repository's root: %v", err)
	}
	dir, err = os.MkdirTemp("", "opsbench-")
	if err != nil {
		return 0, "", err
	}
	r := &rig{dir: dir}
	defer r.close()

	step("building uncaged-gateway and uncaged-workflow (a minute or two the first time)")
	if r.gwBin, r.wfBin, err = build(dir); err != nil {
		return 0, dir, err
	}
	step("starting PostgreSQL and NATS")
	if r.pg, err = pgtest.Launch(); err != nil {
		return 0, dir, err
	}
	if r.dbURL, err = r.pg.Database("opsbench"); err != nil {
		return 0, dir, err
	}
	if err := r.startNATS(); err != nil {
		return 0, dir, err
	}
	if r.key, err = r.gatewayCLI("key", "generate"); err != nil {
		return 0, dir, err
	}
	if r.dash, err = r.gatewayCLI("token", "create", "--dashboard"); err != nil {
		return 0, dir, err
	}
	for i := 1; i <= 3; i++ {
		addr, err := freeAddr()
		if err != nil {
			return 0, dir, err
		}
		id := fmt.Sprintf("r%d", i)
		rp := &replica{id: id, addr: addr, spool: filepath.Join(dir, "spool-"+id), logPath: filepath.Join(dir, "gateway-"+id+".log")}
		r.replicas = append(r.replicas, rp)
		step("starting replica %s on %s", id, addr)
		if err := r.startReplica(rp); err != nil {
			return 0, dir, err
		}
	}
	if err := r.startNginx(repo); err != nil {
		return 0, dir, err
	}
	names := []string{"laptop", "build-box", "desktop"}
	step("nginx on %s; starting connectors %s", r.front, strings.Join(names, ", "))
	for _, name := range names {
		c, err := r.startConnector(name)
		if err != nil {
			return 0, dir, err
		}
		r.connectors = append(r.connectors, c)
	}
	if err := waitFor("every connector reachable through nginx", time.Minute, func() bool {
		for _, name := range names {
			if code, _ := get("http://"+r.front+"/api/clients/"+name+"/workflows", r.dash); code != 200 {
				return false
			}
		}
		return true
	}); err != nil {
		return 0, dir, err
	}

	l := newLoad(r.front, r.dash, names, probeEvery, startEvery, streams)
	step("load running: reads, lists, thread starts, %d live streams; %s of steady state", streams, steady)
	l.run()
	time.Sleep(steady)

	faults := []struct {
		name string
		do   func(p *phase) (string, error)
	}{
		{"rolling restart", func(p *phase) (string, error) { return r.rollingRestart(p) }},
		{"kill -9 busiest replica", func(p *phase) (string, error) { return r.killBusiest(p, names) }},
		{fmt.Sprintf("NATS stopped %s", outage), func(p *phase) (string, error) { return r.natsOutage(p, outage) }},
		{fmt.Sprintf("PostgreSQL stopped %s", outage), func(p *phase) (string, error) { return r.storeOutage(p, outage) }},
	}
	notes := map[string]string{}
	for i, f := range faults {
		step("fault %d/%d: %s", i+1, len(faults), f.name)
		moves, drops := r.connectorLines()
		p := l.begin(f.name)
		note, err := f.do(p)
		if err != nil {
			l.finish()
			return 0, dir, fmt.Errorf("%s: %w", f.name, err)
		}
		time.Sleep(settle)
		m2, d2 := r.connectorLines()
		notes[f.name] = fmt.Sprintf("%s; connector moves %d, disconnections %d", note, m2-moves, d2-drops)
	}
	l.begin("after the faults")
	step("stopping the load (streams end with their threads' next event)")
	l.finish()

	step("reading the audit log once every replica has written what it queued")
	audited, err := r.auditedStarts()
	if err != nil {
		return 0, dir, err
	}
	fmt.Println()
	for i, p := range l.phases[:len(l.phases)-1] {
		fmt.Println(p.line(audited))
		if i > 0 {
			fmt.Printf("    %s\n", notes[p.name])
			for _, miss := range p.check(i, l.probeEvery, audited) {
				fmt.Printf("    target missed: %s\n", miss)
				missed++
			}
		}
	}
	return missed, dir, nil
}

// waitFor polls cond until it holds, or says what did not happen in bound.
func waitFor(what string, bound time.Duration, cond func() bool) error {
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s", what, bound)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// connectorLines counts, over every connector's output, moves to another
// replica and disconnections.
func (r *rig) connectorLines() (moves, drops int) {
	for _, c := range r.connectors {
		moves += c.logCount("moved to another gateway replica")
		drops += c.logCount("disconnected from gateway")
	}
	return moves, drops
}

// rollingRestart stops each replica with SIGTERM, starts it again on its
// address, and goes on to the next once its /readyz is 200.
func (r *rig) rollingRestart(p *phase) (string, error) {
	p.fault = time.Now()
	var parts []string
	for _, rp := range r.replicas {
		began := time.Now()
		code, err := r.stopReplica(rp, syscall.SIGTERM)
		if err != nil {
			return "", err
		}
		stopped := time.Since(began)
		if err := r.startReplica(rp); err != nil {
			return "", err
		}
		parts = append(parts, fmt.Sprintf("%s stopped in %.1fs (exit %d), ready again in %.1fs", rp.id, stopped.Seconds(), code, time.Since(began).Seconds()-stopped.Seconds()))
	}
	return strings.Join(parts, ", "), nil
}

// killBusiest kill -9s the replica holding the most connectors, waits
// until they are all online elsewhere, and starts it again.
func (r *rig) killBusiest(p *phase, names []string) (string, error) {
	held := r.holders()
	count := map[string]int{}
	for _, id := range held {
		count[id]++
	}
	victim := r.replicas[0]
	for _, rp := range r.replicas {
		if count[rp.id] > count[victim.id] {
			victim = rp
		}
	}
	p.fault = time.Now()
	if _, err := r.stopReplica(victim, syscall.SIGKILL); err != nil {
		return "", err
	}
	if err := waitFor("the killed replica's connectors online elsewhere", time.Minute, func() bool {
		now := r.holders()
		for _, name := range names {
			if now[name] == "" || now[name] == victim.id {
				return false
			}
		}
		return true
	}); err != nil {
		return "", err
	}
	back := time.Since(p.fault)
	if err := r.startReplica(victim); err != nil {
		return "", err
	}
	return fmt.Sprintf("killed %s holding %d connector(s); all online elsewhere (by the endpoints list) %.2fs after the kill", victim.id, count[victim.id], back.Seconds()), nil
}

// holders maps each connector online to its replica, by the endpoints
// list through nginx.
func (r *rig) holders() map[string]string {
	code, body := get("http://"+r.front+"/api/gateway/endpoints", r.dash)
	var eps []struct{ Name, Status, Replica string }
	out := map[string]string{}
	if code != 200 || json.Unmarshal([]byte(body), &eps) != nil {
		return out
	}
	for _, e := range eps {
		if e.Status == "online" {
			out[e.Name] = e.Replica
		}
	}
	return out
}

// natsOutage stops NATS for outage, starts it again on its port, and
// waits until every replica is connected again.
func (r *rig) natsOutage(p *phase, outage time.Duration) (string, error) {
	p.fault = time.Now()
	r.stopNATS()
	time.Sleep(outage)
	if err := r.startNATS(); err != nil {
		return "", err
	}
	began := time.Now()
	err := waitFor("every replica connected to NATS again", time.Minute, func() bool {
		for _, rp := range r.replicas {
			if metric(rp, "uncaged_gateway_cluster_nats_connected", "") != 1 {
				return false
			}
		}
		return true
	})
	return fmt.Sprintf("every replica reconnected %.1fs after NATS was back", time.Since(began).Seconds()), err
}

// storeOutage stops PostgreSQL for outage, starts it again, and waits
// until every replica has written what it queued meanwhile.
func (r *rig) storeOutage(p *phase, outage time.Duration) (string, error) {
	p.fault = time.Now()
	r.pg.Halt()
	time.Sleep(outage)
	peak := 0.0
	for _, rp := range r.replicas {
		peak += max(0, metric(rp, "uncaged_gateway_store_queued", ""))
	}
	if err := r.pg.Restart(); err != nil {
		return "", err
	}
	began := time.Now()
	err := r.waitQueuesEmpty()
	return fmt.Sprintf("%.0f record(s) queued at the end of the outage, written %.1fs after the store was back", peak, time.Since(began).Seconds()), err
}

// waitQueuesEmpty waits until no replica holds records for the store.
func (r *rig) waitQueuesEmpty() error {
	return waitFor("every replica's store queue written", 2*time.Minute, func() bool {
		for _, rp := range r.replicas {
			if metric(rp, "uncaged_gateway_store_queued", "") != 0 {
				return false
			}
		}
		return true
	})
}

// auditedStarts are the threads the audit log records a start of.
func (r *rig) auditedStarts() (map[string]bool, error) {
	if err := r.waitQueuesEmpty(); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for offset := 0; ; offset += 1000 {
		code, body := get(fmt.Sprintf("http://%s/api/gateway/audit?action=start&limit=1000&offset=%d", r.front, offset), r.dash)
		var page struct {
			Entries []struct{ Target string }
			Total   int
		}
		if code != 200 || json.Unmarshal([]byte(body), &page) != nil {
			return nil, fmt.Errorf("reading the audit log: %d %s", code, body)
		}
		for _, e := range page.Entries {
			out[e.Target] = true
		}
		if len(page.Entries) == 0 || offset+len(page.Entries) >= page.Total {
			return out, nil
		}
	}
}

// longestGap is the phase's longest time a connector answered nothing.
func (p *phase) longestGap() time.Duration {
	var g time.Duration
	for _, d := range p.gap {
		g = max(g, d)
	}
	return g
}

// found counts the phase's starts the audit log has.
func (p *phase) found(audited map[string]bool) int {
	n := 0
	for _, id := range p.started {
		if audited[id] {
			n++
		}
	}
	return n
}

// line is the phase's report line.
func (p *phase) line(audited map[string]bool) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := fmt.Sprintf("%-30s requests %5d  failed %3d  longest connector outage %5.2fs  streams %2d resumed (%d lost, %d repeated, %d followed to the end)  audit %d/%d",
		p.name, p.requests, len(p.failed), p.longestGap().Seconds(), p.resumed, p.lost, p.repeated, p.streams, p.found(audited), len(p.started))
	if p.machines > 0 {
		s += fmt.Sprintf("  machine list failed %d", p.machines)
	}
	return s
}

// check says which of the fault's targets the phase missed; i is the
// fault's place (1: rolling restart, 2: kill, 3: NATS, 4: PostgreSQL).
func (p *phase) check(i int, probeEvery time.Duration, audited map[string]bool) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var missed []string
	failures := func(keep func(f failure) bool) []string {
		var out []string
		for _, f := range p.failed {
			if keep(f) {
				out = append(out, f.what)
			}
		}
		return out
	}
	first := func(fs []string) string { return strings.Join(fs[:min(3, len(fs))], "; ") }
	switch i {
	case 1:
		if len(p.failed) > 0 {
			missed = append(missed, fmt.Sprintf("%d failed request(s), want 0: %s", len(p.failed), first(failures(func(failure) bool { return true }))))
		}
		if g := p.longestGap(); g > time.Second {
			missed = append(missed, fmt.Sprintf("a connector was away %.2fs, want ≤ 1s", g.Seconds()))
		}
	case 2:
		// In flight at the kill: sent before it, failed after it.
		other := failures(func(f failure) bool { return !(f.sent.Before(p.fault) && !f.done.Before(p.fault)) })
		if len(other) > 0 {
			missed = append(missed, fmt.Sprintf("%d request(s) not in flight at the kill failed, want 0: %s", len(other), first(other)))
		}
		if g := p.longestGap(); g > 2*time.Second {
			missed = append(missed, fmt.Sprintf("a connector was away %.2fs, want ≤ 2s", g.Seconds()))
		}
	case 3:
		if 100*len(p.failed) > p.requests {
			missed = append(missed, fmt.Sprintf("%d of %d requests failed, want ≤ 1%%: %s", len(p.failed), p.requests, first(failures(func(failure) bool { return true }))))
		}
	case 4:
		if proxied := failures(func(f failure) bool { return f.proxied }); len(proxied) > 0 {
			missed = append(missed, fmt.Sprintf("%d proxied request(s) failed, want 0: %s", len(proxied), first(proxied)))
		}
		if p.machines > 0 {
			missed = append(missed, fmt.Sprintf("the machine list failed %d time(s), want never", p.machines))
		}
	}
	// A stream's events are checked when its thread ends, in whichever
	// phase that is: none may be lost or repeated in any.
	if p.lost > 0 || p.repeated > 0 {
		missed = append(missed, fmt.Sprintf("live streams lost %d and repeated %d event(s), want 0", p.lost, p.repeated))
	}
	if n := p.found(audited); n != len(p.started) {
		var lost []string
		for _, id := range p.started {
			if !audited[id] {
				lost = append(lost, id)
			}
		}
		slices.Sort(lost)
		missed = append(missed, fmt.Sprintf("%d of %d audit entries lost (%s)", len(p.started)-n, len(p.started), first(lost)))
	}
	return missed
}
