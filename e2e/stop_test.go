package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	natsservertest "github.com/nats-io/nats-server/v2/test"

	"github.com/uncaged/workflow/shared/testkit"
)

// TestAStoppedGatewaysLogTellsWhatHappened stops a gateway that logs JSON
// and holds two connectors, one of them streaming a thread live: it exits
// 0, the stream ends cleanly, and its log is JSON throughout, without a
// warning, with each connector going offline and one last "gateway
// stopped".
func TestAStoppedGatewaysLogTellsWhatHappened(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "--log-format", "json")
	_, root := g.connector("laptop", map[string]string{"slow": "slow.esm.js"})
	g.connector("ci-box", nil)
	gate := filepath.Join(t.TempDir(), "gate")
	id := startEnv(t, root, []string{"SLOW_GATE=" + gate}, "slow")
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })
	s := openCredStream(t, "http://"+g.addr+"/api/clients/laptop/threads/"+id+"/live", func(r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+g.dash)
	})
	stopsCleanly(t, "the gateway", g.gw, "laptop", "ci-box")
	endsCleanly(t, "the live stream", s)
}

// waitListed waits until addr's endpoints list shows name online on the
// replica holder.
func waitListed(t *testing.T, addr, dash, name, holder string) {
	t.Helper()
	testkit.WaitUntil(t, addr+" to list "+name+" online on "+holder, func() bool {
		req, _ := http.NewRequest("GET", "http://"+addr+"/api/gateway/endpoints", nil)
		req.Header.Set("Authorization", "Bearer "+dash)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var eps []clusterEndpoint
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&eps) != nil {
			return false
		}
		for _, e := range eps {
			if e.Name == name && e.Status == "online" && e.Replica == holder {
				return true
			}
		}
		return false
	})
}

// stopsCleanly sends SIGTERM to a gateway and checks it exits 0, and
// that its log tells what happened and nothing else: every line is JSON,
// none is a warning or an error, each connector it held went offline
// (the line the log shows when a connector leaves), and the last line is
// the one "gateway stopped", with how long the stop took.
func stopsCleanly(t *testing.T, what string, p *proc, held ...string) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("%s exited %d on SIGTERM, want 0:\n%s", what, code, p.logs.String())
	}
	t.Logf("%s stopped %v after SIGTERM", what, time.Since(start).Round(time.Millisecond))
	logs := p.logs.String()
	offline := map[string]int{}
	var last struct {
		Msg        string
		DurationMS *float64 `json:"duration_ms"`
	}
	stopped := 0
	for line := range strings.SplitSeq(strings.TrimSpace(logs), "\n") {
		var l struct{ Level, Msg, Connector string }
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Errorf("%s logged a line that is not JSON: %q", what, line)
			continue
		}
		if l.Level != "INFO" && l.Level != "DEBUG" {
			t.Errorf("%s logged at %s: %s", what, l.Level, line)
		}
		if l.Msg == "connector offline" {
			offline[l.Connector]++
		}
		if l.Msg == "gateway stopped" {
			stopped++
		}
		last.Msg, last.DurationMS = "", nil
		_ = json.Unmarshal([]byte(line), &last)
	}
	for _, name := range held {
		if offline[name] != 1 {
			t.Errorf("%s logged %d `connector offline` lines for %s, want 1", what, offline[name], name)
		}
	}
	if stopped != 1 || last.Msg != "gateway stopped" || last.DurationMS == nil {
		t.Errorf("%s logged %d `gateway stopped` lines, and last %q (duration_ms %v)", what, stopped, last.Msg, last.DurationMS)
	}
	if t.Failed() {
		t.Fatalf("%s's log:\n%s", what, logs)
	}
}

// endsCleanly waits for a live stream to end and checks it ended as a
// stream does, at an event's end, with the last event's id to resume from.
func endsCleanly(t *testing.T, what string, s *credStream) string {
	t.Helper()
	testkit.WaitUntil(t, what+" to end", func() bool { return !s.isOpen() })
	body, err := s.text()
	if err != nil {
		t.Fatalf("%s broke (%v) rather than ending:\n%s", what, err, body)
	}
	if !strings.HasSuffix(body, "\n") { // lines joined: an event ends with an empty line
		t.Fatalf("%s ended inside an event:\n%s", what, body)
	}
	last := ""
	for line := range strings.SplitSeq(body, "\n") {
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			last = id
		}
	}
	if last == "" {
		t.Fatalf("%s carried no event id:\n%s", what, body)
	}
	return last
}

// A replica relaying a live stream — one it forwards to the replica
// holding the connector, or one it serves from its connector for another
// replica — stops on SIGTERM with exit code 0, and the stream's client
// sees the stream end cleanly, at an event's end, with an id to resume
// from.
func TestAReplicaRelayingAStreamStopsCleanly(t *testing.T) {
	t.Parallel()
	ns := natsservertest.RunRandClientPortServer()
	t.Cleanup(ns.Shutdown)
	key := clusterKey(t)
	holder := startReplica(t, key, ns.ClientURL(), "holder")
	front := startReplica(t, key, ns.ClientURL(), "front")
	root := engineRoot(t)
	add(t, root, "slow", "slow.esm.js")
	tok := createToken(t, key, "--connector", "alpha")
	alpha := startProc(t, []string{"UNCAGED_WORKFLOW_STORAGE_ROOT=" + root, "UNCAGED_WORKFLOW_TOKEN=" + tok.Token},
		"uncaged-workflow", "connect", "--name", "alpha", "--gateway", "http://"+holder.addr)
	stopTogether(t, alpha)
	dash := createToken(t, key, "--dashboard").Token
	waitListed(t, front.addr, dash, "alpha", "holder")
	// The thread waits at its second step until the gate opens: its live
	// stream stays open as long as the test needs.
	gate := filepath.Join(t.TempDir(), "gate")
	id := startEnv(t, root, []string{"SLOW_GATE=" + gate}, "slow")
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })
	live := "/api/clients/alpha/threads/" + id + "/live"
	bearer := func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+dash) }

	// The replica forwarding the stream stops.
	s := openCredStream(t, "http://"+front.addr+live, bearer)
	// The thread-start and the first step: then nothing new until the gate.
	testkit.WaitUntil(t, "the stream to show the first step", func() bool {
		body, _ := s.text()
		return strings.Count(body, "event: record\n") == 2
	})
	stopsCleanly(t, "the replica forwarding a stream", front.p)
	last := endsCleanly(t, "the stream through the stopped replica", s)
	// The client resumes where it was, from the replica holding the
	// connector: nothing it had is sent again.
	resumed := openCredStream(t, "http://"+holder.addr+live, func(r *http.Request) {
		bearer(r)
		r.Header.Set("Last-Event-ID", last)
	})
	testkit.WaitUntil(t, "the resumed stream to say where the thread is", func() bool {
		body, _ := resumed.text()
		return strings.Contains(body, "event: start")
	})
	if body, _ := resumed.text(); strings.Contains(body, "event: record\n") {
		t.Fatalf("the stream resumed from %s sent a record again:\n%s", last, body)
	}

	// The replica holding the connector stops while it serves a stream
	// another replica forwards to it.
	front2 := startReplica(t, key, ns.ClientURL(), "front2")
	waitListed(t, front2.addr, dash, "alpha", "holder")
	s2 := openCredStream(t, "http://"+front2.addr+live, bearer)
	stopsCleanly(t, "the replica holding the connector of a forwarded stream", holder.p, "alpha")
	endsCleanly(t, "the stream through the other replica", s2)
	endsCleanly(t, "the stream from the stopped replica", resumed)
	stopsCleanly(t, "the last replica", front2.p)
}
