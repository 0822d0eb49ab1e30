package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
)

// fleetThread is a thread in GET /api/gateway/threads.
type fleetThread struct {
	Machine, ThreadID, Status, Prompt, Summary, UpdatedAt string
	Workflow                                              *string
	Steps                                                 int
	ReturnCode                                            *int
	Online                                                bool
	LastSeen                                              *string
}

type fleetPage struct {
	Threads []fleetThread `json:"threads"`
	Total   int           `json:"total"`
}

func (g *gatewayEnv) searchFleet(query url.Values) fleetPage {
	g.t.Helper()
	resp, body := g.do("GET", "/api/gateway/threads?"+query.Encode(), "")
	var p fleetPage
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &p) != nil {
		g.t.Fatalf("search %v: %d %s", query, resp.StatusCode, body)
	}
	return p
}

// waitFleet waits until the search finds exactly the thread ids want, in
// that order (newest first), and returns the page.
func (g *gatewayEnv) waitFleet(query url.Values, want ...string) fleetPage {
	g.t.Helper()
	var p fleetPage
	testkit.WaitUntil(g.t, fmt.Sprintf("search %v to find %v", query, want), func() bool {
		p = g.searchFleet(query)
		var got []string
		for _, th := range p.Threads {
			got = append(got, th.ThreadID)
		}
		return p.Total == len(want) && strings.Join(got, ",") == strings.Join(want, ",")
	})
	return p
}

type fleetMachine struct {
	Name      string
	Online    bool
	FirstSeen *string
	LastSeen  *string
}

func (g *gatewayEnv) fleetMachines() map[string]fleetMachine {
	g.t.Helper()
	resp, body := g.do("GET", "/api/gateway/machines", "")
	var out struct{ Machines []fleetMachine }
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &out) != nil {
		g.t.Fatalf("machines: %d %s", resp.StatusCode, body)
	}
	m := map[string]fleetMachine{}
	for _, x := range out.Machines {
		m[x.Name] = x
	}
	return m
}

// startThread starts a thread on machine through the gateway.
func (g *gatewayEnv) startThread(machine, workflow, prompt string) string {
	g.t.Helper()
	body, _ := json.Marshal(map[string]string{"workflow": workflow, "prompt": prompt})
	resp, out := g.do("POST", "/api/clients/"+machine+"/threads", string(body))
	var started struct{ ThreadID string }
	if resp.StatusCode != 201 || json.Unmarshal([]byte(out), &started) != nil {
		g.t.Fatalf("start %s on %s: %d %s", workflow, machine, resp.StatusCode, out)
	}
	return started.ThreadID
}

func q(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

// TestFleetMemoryOfAnOfflineMachine: a connector's threads reach the
// gateway's memory as they run and are found by words, workflow and
// status; when the machine goes away they stay listed (marked offline,
// with when it was last seen) and searchable, and actions on it are
// refused with a reason; a gateway restart keeps all of it; the machine
// coming back resumes its stream without duplicating a thread.
func TestFleetMemoryOfAnOfflineMachine(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	laptop, root := g.connector("laptop", map[string]string{"plan-code-review": "linear.esm.js"})
	addPath(t, root, "hello-world", filepath.Join(helloWorldDir, "hello-world.yaml"))

	hello := g.startThread("laptop", "hello-world", "Say hello to the fleet.")
	review := g.startThread("laptop", "plan-code-review", "review the flux capacitor")
	finished(t, root, hello)
	finished(t, root, review)
	// Both finished; the newest update first (ties go by id, so either
	// order is possible: wait for the pair, then look at each).
	g.waitFleet(q("status", "completed", "machine", "laptop", "q", "flux"), review)
	g.waitFleet(q("status", "completed", "workflow", "hello-world"), hello)
	all := g.searchFleet(q("status", "completed"))
	if all.Total != 2 {
		t.Fatalf("completed: %+v", all)
	}
	for _, th := range all.Threads {
		if th.Machine != "laptop" || !th.Online || th.ReturnCode == nil || *th.ReturnCode != 0 || th.Steps == 0 || th.LastSeen == nil {
			t.Fatalf("thread: %+v", th)
		}
		if th.ThreadID == hello && (*th.Workflow != "hello-world" || th.Prompt != "Say hello to the fleet." || th.Summary != "completed: moderator returned END" || th.Steps != 4) {
			t.Fatalf("hello-world thread: %+v", th)
		}
	}
	g.waitFleet(q("q", "moderator", "workflow", "hello-world"), hello) // the summary is searched too

	// The machine goes away.
	stopped := time.Now()
	laptop.stop(syscall.SIGTERM)
	g.waitStatus("laptop", "offline")
	// Its last seen is written as the gateway's reader of its changes
	// ends, a moment after it shows offline; the answers below must agree
	// on it.
	testkit.WaitUntil(t, "laptop's last seen to be written", func() bool {
		m := g.fleetMachines()["laptop"]
		if m.LastSeen == nil {
			return false
		}
		at, err := time.Parse(time.RFC3339Nano, *m.LastSeen)
		return err == nil && !at.Before(stopped.Truncate(time.Millisecond))
	})
	offline := func(when string) {
		t.Helper()
		m := g.fleetMachines()["laptop"]
		if m.Online || m.LastSeen == nil || m.FirstSeen == nil {
			t.Fatalf("%s: machine %+v", when, m)
		}
		resp, body := g.do("GET", "/api/clients/laptop/threads", "")
		var list struct {
			Threads  []struct{ ThreadID, Status string }
			Total    int
			Offline  bool
			LastSeen string
		}
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &list) != nil || !list.Offline || list.LastSeen != *m.LastSeen || list.Total != 2 {
			t.Fatalf("%s: thread list: %d %s", when, resp.StatusCode, body)
		}
		p := g.searchFleet(q("q", "flux capacitor"))
		if p.Total != 1 || p.Threads[0].ThreadID != review || p.Threads[0].Online {
			t.Fatalf("%s: search: %+v", when, p)
		}
		resp, body = g.do("POST", "/api/clients/laptop/threads/"+review+"/kill", "{}")
		var refusal struct{ Error, Reason string }
		if resp.StatusCode != 503 || json.Unmarshal([]byte(body), &refusal) != nil || refusal.Reason != "offline" ||
			!strings.HasPrefix(refusal.Error, "machine laptop is offline (last seen ") || !strings.HasSuffix(refusal.Error, "): actions need it online") {
			t.Fatalf("%s: kill: %d %s", when, resp.StatusCode, body)
		}
	}
	offline("offline")

	// The gateway restarts: the history is still there.
	g.restart()
	offline("after a gateway restart")

	// The machine comes back on the same storage root: the stream resumes
	// (here after a reset: a new connector process), nothing is doubled.
	tok := gwCLI(t, g.key, "token", "create", "--connector", "laptop")
	back := startProc(t, []string{"UNCAGED_WORKFLOW_STORAGE_ROOT=" + root, "UNCAGED_WORKFLOW_TOKEN=" + tok},
		"uncaged-workflow", "connect", "--name", "laptop", "--gateway", "http://"+g.front)
	stopTogether(t, back)
	g.waitStatus("laptop", "online")
	third := g.startThread("laptop", "hello-world", "Say hello again.")
	finished(t, root, third)
	p := g.waitFleet(q("machine", "laptop", "q", "hello"), third, hello)
	if !p.Threads[0].Online {
		t.Fatalf("back online: %+v", p.Threads[0])
	}
	if p := g.searchFleet(q()); p.Total != 3 {
		t.Fatalf("after reconnecting: %d threads, want 3: %+v", p.Total, p.Threads)
	}
	if m := g.fleetMachines(); len(m) != 1 || !m["laptop"].Online {
		t.Fatalf("machines: %+v", m)
	}
}
