package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// namesConnect starts `uncaged-workflow connect --name name` on root with
// cred (a token or the shared secret) and the extra flags.
func namesConnect(t *testing.T, g *gatewayEnv, root, name, cred string, extra ...string) *proc {
	t.Helper()
	return startProc(t, []string{"UNCAGED_WORKFLOW_STORAGE_ROOT=" + root, "UNCAGED_WORKFLOW_TOKEN=" + cred, "WORKFLOW_DASHBOARD_SECRET="},
		"uncaged-workflow", append([]string{"connect", "--name", name, "--gateway", "http://" + g.front}, extra...)...)
}

// namesRequest sends a request with the given Authorization (none when
// empty) and returns its status and body.
func namesRequest(t *testing.T, g *gatewayEnv, method, path, authorization, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+g.front+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

// namesEndpoint is an entry of GET /api/gateway/endpoints.
type namesEndpoint struct{ Name, Status, Credential, Instance string }

// namesLists is what the endpoints and machines lists say of name.
func namesLists(t *testing.T, g *gatewayEnv, name string) (endpoint *namesEndpoint, machine map[string]any) {
	t.Helper()
	var eps []namesEndpoint
	if resp, body := g.do("GET", "/api/gateway/endpoints", ""); resp.StatusCode != 200 || json.Unmarshal([]byte(body), &eps) != nil {
		t.Fatalf("endpoints: %d %s", resp.StatusCode, body)
	}
	for i := range eps {
		if eps[i].Name == name {
			endpoint = &eps[i]
		}
	}
	var ms struct{ Machines []map[string]any }
	if resp, body := g.do("GET", "/api/gateway/machines", ""); resp.StatusCode != 200 || json.Unmarshal([]byte(body), &ms) != nil {
		t.Fatalf("machines: %d %s", resp.StatusCode, body)
	}
	for _, m := range ms.Machines {
		if m["name"] == name {
			machine = m
		}
	}
	return endpoint, machine
}

// TestATokenBoundNameSurvivesAGatewayRestart is issue item 8 with real
// binaries: a connector token held alpha, alpha went offline and the
// gateway restarted. The shared secret can neither connect as alpha
// (`connect` stops, exit 14, saying why), register nor unregister it; the
// endpoints and machines lists both show alpha offline and bound to a
// token; every refusal is in the audit log; and `token revoke --connector
// alpha` gives the name to the secret again.
func TestATokenBoundNameSurvivesAGatewayRestart(t *testing.T) {
	t.Parallel()
	const secret = "a-shared-secret-for-the-names-test"
	g := newGateway(t, []string{"WORKFLOW_DASHBOARD_SECRET=" + secret}, 0)
	alpha, _ := g.connector("alpha", map[string]string{"slow": "slow.esm.js"})
	alpha.stop(syscall.SIGTERM)
	g.waitStatus("alpha", "offline")
	g.restart()

	intruder := namesConnect(t, g, engineRoot(t), "alpha", secret)
	if code := intruder.exitCode(t); code != 14 || !strings.Contains(intruder.logs.String(), `gateway refused the connection (409): connector name "alpha" is held by a token-bound connector`) ||
		strings.Contains(intruder.logs.String(), "connected to") {
		t.Fatalf("the secret's connect after the restart exited %d:\n%s", code, intruder.logs.String())
	}
	if code, body := namesRequest(t, g, "POST", "/api/gateway/register", "", `{"name":"alpha","url":"ws://x","secret":"`+secret+`","clientToken":"stolen"}`); code != 409 {
		t.Fatalf("register with the secret: %d %s", code, body)
	}
	if code, body := namesRequest(t, g, "DELETE", "/api/gateway/register/alpha", "Bearer "+secret, ""); code != 409 {
		t.Fatalf("unregister with the secret: %d %s", code, body)
	}
	ep, m := namesLists(t, g, "alpha")
	if ep == nil || ep.Status != "offline" || ep.Credential != "token" || m == nil || m["online"] != false || m["credential"] != "token" {
		t.Fatalf("after the restart the lists say %+v and %v", ep, m)
	}
	var refusals []auditEntry
	testkit.WaitUntil(t, "the refusals in the audit log", func() bool {
		refusals = refusals[:0]
		all, _ := g.audit("?machine=alpha&limit=1000")
		for _, e := range all {
			if e.Status == 409 && e.Actor == "shared secret" {
				refusals = append(refusals, e)
			}
		}
		return len(refusals) == 3
	})
	for _, e := range refusals {
		if (e.Action != "connect-refused" && e.Action != "register" && e.Action != "unregister") || !strings.Contains(e.Target, "token-bound") || e.Source != "127.0.0.1" {
			t.Errorf("refusal entry %+v", e)
		}
	}

	gwCLI(t, g.key, "token", "revoke", "--connector", "alpha")
	testkit.WaitUntil(t, "the running gateway to release alpha", func() bool {
		code, _ := namesRequest(t, g, "POST", "/api/gateway/register", "", `{"name":"alpha","url":"ws://x","secret":"`+secret+`"}`)
		return code == 201
	})
	taker := namesConnect(t, g, engineRoot(t), "alpha", secret)
	testkit.WaitUntil(t, "the secret to connect as alpha", func() bool { return strings.Contains(taker.logs.String(), `as "alpha"`) })
	g.waitStatus("alpha", "online")
}

// TestACopiedInstanceIDIsAnotherInstance is issue item 9's case with real
// binaries: a second root given the first root's instance-id file (as
// shown by gateways before) is another instance, refused (exit 14) while
// the first is online; every request still reaches the first; nothing the
// gateway shows or logs holds either root's id or key, and the refusal is
// in the audit log with both fingerprints.
func TestACopiedInstanceIDIsAnotherInstance(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	first, root1 := g.connector("m1", map[string]string{"slow": "slow.esm.js"})
	fp1 := g.instances()["m1"]
	root2 := engineRoot(t)
	if err := os.MkdirAll(root2, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root2, "instance-id"), []byte(instanceOf(t, root1)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	token := gwCLI(t, g.key, "token", "create", "--connector", "m1")
	copied := namesConnect(t, g, root2, "m1", token)
	if code := copied.exitCode(t); code != 14 || !strings.Contains(copied.logs.String(), `is held by instance `+fp1+` from 127.0.0.1`) {
		t.Fatalf("the copied root exited %d:\n%s", code, copied.logs.String())
	}
	if first.exited() || g.instances()["m1"] != fp1 {
		t.Fatalf("the first root lost m1: %v", g.instances())
	}
	for i := range 5 {
		if resp, body := g.do("GET", "/api/clients/m1/workflows", ""); resp.StatusCode != 200 || !strings.Contains(body, `"name":"slow"`) {
			t.Fatalf("request %d did not reach the first root: %d %s", i, resp.StatusCode, body)
		}
	}
	var refused auditEntry
	testkit.WaitUntil(t, "the refusal in the audit log", func() bool {
		all, _ := g.audit("?action=connect-refused&machine=m1")
		if len(all) == 1 {
			refused = all[0]
		}
		return len(all) == 1
	})
	if !strings.Contains(refused.Target, "held by instance "+fp1) || !strings.Contains(refused.Target, "refused: instance key:") || refused.TokenID != jti(t, token) {
		t.Fatalf("refusal entry %+v", refused)
	}
	_, endpoints := g.do("GET", "/api/gateway/endpoints", "")
	_, audit := g.do("GET", "/api/gateway/audit?limit=1000", "")
	shown := endpoints + audit + g.gw.logs.String() + copied.logs.String() + first.logs.String()
	for _, root := range []string{root1, root2} {
		for _, file := range []string{"instance-id", "instance-key"} {
			if strings.Contains(shown, rootFile(t, root, file)) {
				t.Errorf("%s of %s is shown", file, root)
			}
		}
	}
	if fi, err := os.Stat(filepath.Join(root2, "instance-key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the copied root's key: %v %v", fi, err)
	}
}

// A root copied whole, key included, is the same instance: the two
// replace each other at every reconnection. The gateway lets them (it
// cannot tell them apart, by definition), and the audit log shows the
// flapping without being flooded: a few entries as they come, and the
// rest counted in one summary, written at the latest when the gateway
// stops.
func TestARootCopiedWithItsKeyFlapsVisibly(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	first, root1 := g.connector("m1", map[string]string{"slow": "slow.esm.js"})
	twin := engineRoot(t)
	if err := os.MkdirAll(twin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"instance-id", "instance-key"} {
		if err := os.WriteFile(filepath.Join(twin, file), []byte(rootFile(t, root1, file)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	second := namesConnect(t, g, twin, "m1", gwCLI(t, g.key, "token", "create", "--connector", "m1"))
	// The gateway writes 5 replacements a minute as they come (its audit
	// burst); wait for one more.
	const replacements = 6
	testkit.WaitUntil(t, "the two roots to replace each other", func() bool {
		return strings.Count(g.gw.logs.String(), `"msg":"connector replaced","connector":"m1"`) >= replacements
	})
	if strings.Contains(g.gw.logs.String(), "taken over") || first.exited() || second.exited() {
		t.Fatal("a twin was taken for another instance")
	}
	first.stop(syscall.SIGTERM)
	second.stop(syscall.SIGTERM)
	g.restart() // the summary is written as the gateway stops
	all, total := g.audit("?action=replace&machine=m1&limit=1000")
	if total != 6 {
		t.Fatalf("%d replace entries, want 5 and a summary: %+v", total, all)
	}
	if !strings.Contains(all[0].Target, "more like this") || !strings.Contains(all[0].Target, "replaced the same instance") {
		t.Fatalf("no summary of the flapping: %+v", all)
	}
}

// TestRefusedChangesAreAuditedThroughTheGateway is issue item 16 with real
// binaries: a change refused 401 or 403 — a garbage bearer token, a
// connector's token on the dashboard's API, a connector dialing with
// another name's token — is an audit entry with its reason code, the
// machine and the client's address, and no credential; a refused read is
// not.
func TestRefusedChangesAreAuditedThroughTheGateway(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	g.connector("laptop", map[string]string{"slow": "slow.esm.js"})
	laptopToken := gwCLI(t, g.key, "token", "create", "--connector", "laptop")
	otherToken := gwCLI(t, g.key, "token", "create", "--connector", "other")
	if code, _ := namesRequest(t, g, "POST", "/api/clients/laptop/threads", "Bearer garbage-credential", `{}`); code != 401 {
		t.Fatalf("garbage: %d", code)
	}
	if code, _ := namesRequest(t, g, "POST", "/api/clients/laptop/threads", "Bearer "+laptopToken, `{}`); code != 403 {
		t.Fatalf("a connector's token: %d", code)
	}
	if code, _ := namesRequest(t, g, "GET", "/api/clients/laptop/threads", "Bearer garbage-credential", ""); code != 401 {
		t.Fatalf("a read with garbage: %d", code)
	}
	wrong := namesConnect(t, g, engineRoot(t), "laptop", otherToken)
	if code := wrong.exitCode(t); code != 11 {
		t.Fatalf("connect with another name's token exited %d:\n%s", code, wrong.logs.String())
	}
	want := map[string]int{
		"POST /api/clients/laptop/threads (malformed)":  401,
		"POST /api/clients/laptop/threads (wrong-kind)": 403,
		"GET /ws/connect (wrong-connector)":             403,
	}
	var entries []auditEntry
	testkit.WaitUntil(t, "the refusals in the audit log", func() bool {
		entries, _ = g.audit("?action=refused")
		return len(entries) >= len(want)
	})
	if len(entries) != len(want) {
		t.Fatalf("refusals: %+v", entries)
	}
	for _, e := range entries {
		if status, ok := want[e.Target]; !ok || e.Status != status || e.Machine != "laptop" || e.Source != "127.0.0.1" || e.TokenID != "" {
			t.Errorf("entry %+v", e)
		}
	}
	_, body := g.do("GET", "/api/gateway/audit?limit=1000", "")
	for _, cred := range []string{"garbage-credential", laptopToken, otherToken} {
		if strings.Contains(body, cred) {
			t.Fatal("a credential in the audit log")
		}
	}
}
