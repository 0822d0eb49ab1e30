package e2e

import (
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// instanceOf is the instance id connect made for root.
func instanceOf(t *testing.T, root string) string {
	t.Helper()
	return rootFile(t, root, "instance-id")
}

// rootFile is what the file name in root holds, trimmed.
func rootFile(t *testing.T, root, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// instances maps each connector name to the instance the endpoints list
// shows: its fingerprint.
func (g *gatewayEnv) instances() map[string]string {
	var eps []struct{ Name, Instance string }
	resp, body := g.do("GET", "/api/gateway/endpoints", "")
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &eps) != nil {
		return nil
	}
	out := map[string]string{}
	for _, e := range eps {
		out[e.Name] = e.Instance
	}
	return out
}

// Two storage roots connecting with one name: the second is refused with
// 409, naming the holder by fingerprint, and stops (exit 14), while every
// request still reaches the first; with --takeover it takes the name, and
// the first is told who replaced it and stops (exit 15). The gateway logs
// both, and shows neither root's instance id or key anywhere.
func TestTwoRootsWithOneName(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	first, firstRoot := g.connector("m1", map[string]string{"slow": "slow.esm.js"})
	firstID := g.instances()["m1"]
	if !strings.HasPrefix(firstID, "key:") || firstID == "key:"+instanceOf(t, firstRoot) {
		t.Fatalf("endpoints show instance %q", firstID)
	}

	secondRoot := engineRoot(t)
	add(t, secondRoot, "linear", "linear.esm.js")
	token := "UNCAGED_WORKFLOW_TOKEN=" + gwCLI(t, g.key, "token", "create", "--connector", "m1")
	second := startProc(t, []string{"UNCAGED_WORKFLOW_STORAGE_ROOT=" + secondRoot, token},
		"uncaged-workflow", "connect", "--name", "m1", "--gateway", "http://"+g.addr)
	if code := second.exitCode(t); code != 14 {
		t.Fatalf("the second root exited %d, want 14:\n%s", code, second.logs.String())
	}
	refusal := regexp.MustCompile(`gateway refused the connection \(409\): connector name "m1" is held by instance ` + firstID + ` from 127\.0\.0\.1 since \d{4}-\d\d-\d\dT\S+Z: another machine or storage root uses this name; choose another --name, or pass --takeover to replace it`)
	if !refusal.MatchString(second.logs.String()) || strings.Contains(second.logs.String(), "connected to") {
		t.Fatalf("the second root said:\n%s", second.logs.String())
	}
	for i := range 10 {
		if resp, body := g.do("GET", "/api/clients/m1/workflows", ""); resp.StatusCode != 200 || !strings.Contains(body, `"name":"slow"`) {
			t.Fatalf("request %d did not reach the first root: %d %s", i, resp.StatusCode, body)
		}
	}
	if first.exited() {
		t.Fatalf("the first root stopped:\n%s", first.logs.String())
	}

	taker := startProc(t, []string{"UNCAGED_WORKFLOW_STORAGE_ROOT=" + secondRoot, token},
		"uncaged-workflow", "connect", "--name", "m1", "--gateway", "http://"+g.addr, "--takeover")
	var secondID string
	testkit.WaitUntil(t, "the second root to take m1", func() bool { secondID = g.instances()["m1"]; return secondID != firstID && secondID != "" })
	if code := first.exitCode(t); code != 15 {
		t.Fatalf("the first root exited %d, want 15:\n%s", code, first.logs.String())
	}
	if want := "replaced by instance " + secondID + " from 127.0.0.1 (--takeover); not reconnecting"; !strings.Contains(first.logs.String(), want) {
		t.Fatalf("the first root was not told %q:\n%s", want, first.logs.String())
	}
	if resp, body := g.do("GET", "/api/clients/m1/workflows", ""); resp.StatusCode != 200 || !strings.Contains(body, `"name":"linear"`) {
		t.Fatalf("after the takeover: %d %s", resp.StatusCode, body)
	}
	if st := run(t, firstRoot, "status").stdout; !strings.Contains(st, "gave up (exit 15)") || !strings.Contains(st, "--takeover") {
		t.Fatalf("status of the first root:\n%s", st)
	}
	logs := g.gw.logs.String()
	for _, want := range []string{`"msg":"connector refused","connector":"m1","reason":"held by another instance","instance":"` + secondID + `"`,
		`"msg":"connector taken over","connector":"m1"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the gateway did not log %s", want)
		}
	}
	_, endpoints := g.do("GET", "/api/gateway/endpoints", "")
	for _, root := range []string{firstRoot, secondRoot} {
		for _, file := range []string{"instance-id", "instance-key"} {
			if v := rootFile(t, root, file); strings.Contains(logs, v) || strings.Contains(endpoints, v) || strings.Contains(first.logs.String(), v) || strings.Contains(second.logs.String(), v) {
				t.Errorf("%s of a root is shown", file)
			}
		}
	}
	if taker.exited() {
		t.Fatalf("the taker stopped:\n%s", taker.logs.String())
	}
}

// holdingRelay forwards TCP connections to target. When a client goes
// away it keeps the connection to target open, unread, as a network that
// stopped delivering the client's packets would: the far end sees nothing
// until its own heartbeat. Everything closes when the test ends.
func holdingRelay(t *testing.T, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = ln.Close() // ends the accept loop
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close() // the test is over
		}
	})
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = client.Close() // the client sees the relay refuse
				continue
			}
			mu.Lock()
			conns = append(conns, client, up)
			mu.Unlock()
			// Neither copy closes the other side: up stays open after
			// the client is gone.
			go func() { _, _ = io.Copy(up, client) }()
			go func() { _, _ = io.Copy(client, up) }()
		}
	}()
	return ln.Addr().String()
}

// A connector that comes back from the same storage root while the gateway
// still holds its old connection (a connect killed, or a machine that
// lost power, behind a network that did not pass the close on) replaces
// it without a word: no refusal, no takeover.
func TestTheSameRootReconnectsInPlace(t *testing.T) {
	t.Parallel()
	// Heartbeats an hour apart: the held connection stays online.
	g := newGateway(t, nil, 0, "--heartbeat", "1h")
	root := engineRoot(t)
	add(t, root, "slow", "slow.esm.js")
	relay := holdingRelay(t, g.addr)
	token := "UNCAGED_WORKFLOW_TOKEN=" + gwCLI(t, g.key, "token", "create", "--connector", "m1")
	old := startProc(t, []string{"UNCAGED_WORKFLOW_STORAGE_ROOT=" + root, token},
		"uncaged-workflow", "connect", "--name", "m1", "--gateway", "http://"+relay)
	g.waitStatus("m1", "online")
	id := g.instances()["m1"]
	old.stop(syscall.SIGKILL)
	if g.endpoints()["m1"] != "online" {
		t.Fatal("m1 went offline: the relay passed the close on")
	}
	back := startProc(t, []string{"UNCAGED_WORKFLOW_STORAGE_ROOT=" + root, "UNCAGED_WORKFLOW_TOKEN=" + gwCLI(t, g.key, "token", "create", "--connector", "m1")},
		"uncaged-workflow", "connect", "--name", "m1", "--gateway", "http://"+g.addr)
	testkit.WaitUntil(t, "the same root to connect again", func() bool { return strings.Contains(back.logs.String(), `connected to http://`+g.addr+` as "m1"`) })
	testkit.WaitUntil(t, "the replacement to be logged", func() bool {
		return strings.Contains(g.gw.logs.String(), `"msg":"connector replaced","connector":"m1"`)
	})
	logs := g.gw.logs.String()
	if want := `"instance":"` + id + `","replaced_instance":"` + id + `"`; !strings.Contains(logs, want) {
		t.Fatalf("the replacement is not logged with %s:\n%s", want, logs)
	}
	if strings.Contains(logs, "taken over") || strings.Contains(logs, "held by another instance") {
		t.Fatalf("a reconnection was taken for another machine:\n%s", logs)
	}
	if resp, body := g.do("GET", "/api/clients/m1/workflows", ""); resp.StatusCode != 200 || !strings.Contains(body, `"name":"slow"`) {
		t.Fatalf("after the reconnection: %d %s", resp.StatusCode, body)
	}
	if g.instances()["m1"] != id {
		t.Fatalf("endpoints: %v", g.instances())
	}
}
