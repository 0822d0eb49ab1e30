package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	natsservertest "github.com/nats-io/nats-server/v2/test"

	"github.com/uncaged/workflow/shared/testkit"
)

// createdToken is `token create --json`'s output.
type createdToken struct {
	ID, Kind, Name, Token string
}

func createToken(t *testing.T, key string, args ...string) createdToken {
	t.Helper()
	out := gwCLI(t, key, append([]string{"token", "create", "--json"}, args...)...)
	var c createdToken
	if err := json.Unmarshal([]byte(out), &c); err != nil || c.ID == "" || c.Token == "" {
		t.Fatalf("token create --json: %q (%v)", out, err)
	}
	return c
}

// refusal asks addr's endpoints list with token: the status and, for a
// refusal, its reason.
func refusal(t *testing.T, addr, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/api/gateway/endpoints", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Error, Reason string }
	_ = json.NewDecoder(resp.Body).Decode(&body) // a 200 is a list, not a refusal
	return resp.StatusCode, body.Reason
}

// Tokens and revocations are kept across a restart: a revoked token stays
// refused, the live ones still work, the connector comes back.
func TestTokensSurviveAGatewayRestart(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	g.connector("laptop", nil)
	gone := createToken(t, g.key, "--dashboard", "--note", "leaked")
	if code, _ := refusal(t, g.addr, gone.Token); code != 200 {
		t.Fatalf("a new dashboard token: %d", code)
	}
	if out := gwCLI(t, g.key, "token", "revoke", gone.ID); out != "revoked "+gone.ID+" (dashboard, leaked)" {
		t.Fatalf("revoke printed %q", out)
	}
	testkit.WaitUntil(t, "the running gateway to refuse the revoked token", func() bool {
		code, reason := refusal(t, g.addr, gone.Token)
		return code == 401 && reason == "revoked"
	})

	g.restart()
	if code, reason := refusal(t, g.addr, gone.Token); code != 401 || reason != "revoked" {
		t.Fatalf("after a restart, the revoked token: %d %q", code, reason)
	}
	if code, _ := refusal(t, g.addr, g.dash); code != 200 {
		t.Fatalf("after a restart, the live dashboard token: %d", code)
	}
	g.waitStatus("laptop", "online")
	if resp, body := g.do("GET", "/api/clients/laptop/workflows", ""); resp.StatusCode != 200 {
		t.Fatalf("after a restart, through the laptop's tunnel: %d %s", resp.StatusCode, body)
	}
}

// revokedLog is what a connector prints when the gateway closes its
// tunnel for a revoked token, and then when it is refused.
var revokedLog = []string{"closed by the gateway: token revoked", `gateway refused the connection (401): token revoked [revoked]`}

// Revoking a connected connector's token with the CLI disconnects it
// within seconds, saying why; the others stay.
func TestRevokingAConnectedConnector(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	laptop, _ := g.connector("laptop", nil)
	g.connector("desk", nil)
	out := gwCLI(t, g.key, "token", "revoke", "--connector", "laptop")
	if !regexp.MustCompile(`^revoked \S+ \(connector laptop\)$`).MatchString(out) {
		t.Fatalf("revoke printed %q", out)
	}
	waitLogs(t, laptop, "laptop", revokedLog...)
	g.waitStatus("laptop", "offline")
	if g.endpoints()["desk"] != "online" {
		t.Fatal("desk was disconnected too")
	}
	// Nothing left to revoke: exit 1, saying so.
	if _, errOut, err := gwCLIResult(t, g.key, "token", "revoke", "--connector", "laptop"); err == nil || !strings.Contains(errOut, `no unrevoked token of connector "laptop"`) {
		t.Fatalf("revoking again: %v %s", err, errOut)
	}
	if _, errOut, err := gwCLIResult(t, g.key, "token", "revoke", "nosuchid"); err == nil || !strings.Contains(errOut, `no token with id "nosuchid"`) {
		t.Fatalf("an unknown id: %v %s", err, errOut)
	}
}

// waitLogs waits until p's output holds every line.
func waitLogs(t *testing.T, p *proc, name string, lines ...string) {
	t.Helper()
	for _, line := range lines {
		testkit.WaitUntil(t, fmt.Sprintf("%s to log %q", name, line), func() bool { return strings.Contains(p.logs.String(), line) })
	}
}

// token list shows what was created; revoking every dashboard token logs
// the dashboard out.
func TestTokenListAndDashboardLogout(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	g.connector("laptop", nil)
	extra := createToken(t, g.key, "--dashboard", "--note", "ops team")
	out := gwCLI(t, g.key, "token", "list")
	lines := strings.Split(out, "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(out, extra.ID) || !strings.Contains(out, "ops team") || !strings.Contains(out, "laptop") {
		t.Fatalf("token list:\n%s", out)
	}
	var listed []struct {
		ID, Kind string
		Revoked  *string
	}
	if err := json.Unmarshal([]byte(gwCLI(t, g.key, "token", "list", "--json")), &listed); err != nil || len(listed) != 3 {
		t.Fatalf("token list --json: %v %+v", err, listed)
	}

	// A dashboard session: the cookie login sets.
	login := func() *http.Response {
		req, _ := http.NewRequest("POST", "http://"+g.addr+"/api/gateway/login", strings.NewReader(`{"token":"`+g.dash+`"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := login()
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "uncaged_session" {
			cookie = c
		}
	}
	if resp.StatusCode != 200 || cookie == nil {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	session := func() (int, string, string) {
		req, _ := http.NewRequest("GET", "http://"+g.addr+"/api/gateway/endpoints", nil)
		req.AddCookie(cookie)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Error, Reason string }
		_ = json.NewDecoder(resp.Body).Decode(&body) // a 200 is a list
		return resp.StatusCode, body.Error, body.Reason
	}
	if code, _, _ := session(); code != 200 {
		t.Fatalf("the session: %d", code)
	}
	out = gwCLI(t, g.key, "token", "revoke", "--kind", "dashboard")
	if strings.Count(out, "revoked ") != 2 || !strings.Contains(out, extra.ID) {
		t.Fatalf("revoke --kind dashboard printed %q", out)
	}
	testkit.WaitUntil(t, "the dashboard session to end", func() bool { code, _, _ := session(); return code == 401 })
	if code, msg, reason := session(); code != 401 || msg != "token revoked" || reason != "revoked" {
		t.Fatalf("the session after the revocation: %d %q %q", code, msg, reason)
	}
	resp = login()
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("logging in again with the revoked token: %d", resp.StatusCode)
	}
	if code, reason := refusal(t, g.addr, extra.Token); code != 401 || reason != "revoked" {
		t.Fatalf("the other dashboard token: %d %q", code, reason)
	}
	// The connector's token is not a dashboard token: not revoked.
	if err := json.Unmarshal([]byte(gwCLI(t, g.key, "token", "list", "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	for _, l := range listed {
		if (l.Revoked != nil) != (l.Kind == "dashboard") {
			t.Fatalf("after revoking the dashboard tokens, %s (%s) revoked: %v", l.ID, l.Kind, l.Revoked != nil)
		}
	}
}

// In cluster mode, a revocation made with the CLI on the shared
// PostgreSQL reaches every replica: each disconnects its own connectors
// that used the token.
func TestRevocationInACluster(t *testing.T) {
	t.Parallel()
	ns := natsservertest.RunRandClientPortServer()
	t.Cleanup(ns.Shutdown)
	key := clusterKey(t)
	r1 := startReplica(t, key, ns.ClientURL(), "r1")
	r2 := startReplica(t, key, ns.ClientURL(), "r2")
	dash := gwCLI(t, key, "token", "create", "--dashboard")
	connect := func(name, addr string) (*proc, createdToken) {
		tok := createToken(t, key, "--connector", name)
		p := startProc(t, []string{"UNCAGED_WORKFLOW_STORAGE_ROOT=" + engineRoot(t), "UNCAGED_WORKFLOW_TOKEN=" + tok.Token},
			"uncaged-workflow", "connect", "--name", name, "--gateway", "http://"+addr)
		return p, tok
	}
	alpha, _ := connect("alpha", r1.addr)
	bravo, bravoTok := connect("bravo", r2.addr)
	stopTogether(t, alpha, bravo)
	status := func(addr, name string) string {
		req, _ := http.NewRequest("GET", "http://"+addr+"/api/gateway/endpoints", nil)
		req.Header.Set("Authorization", "Bearer "+dash)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var eps []clusterEndpoint
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&eps) != nil {
			return ""
		}
		for _, e := range eps {
			if e.Name == name {
				return e.Status
			}
		}
		return ""
	}
	for _, addr := range []string{r1.addr, r2.addr} {
		for _, name := range []string{"alpha", "bravo"} {
			testkit.WaitUntil(t, name+" online on "+addr, func() bool { return status(addr, name) == "online" })
		}
	}

	// Revoked by name: r1 closes alpha.
	gwCLI(t, key, "token", "revoke", "--connector", "alpha")
	waitLogs(t, alpha, "alpha", revokedLog...)
	testkit.WaitUntil(t, "r2 to list alpha offline", func() bool { return status(r2.addr, "alpha") != "online" })
	if status(r1.addr, "bravo") != "online" {
		t.Fatal("bravo went offline with alpha")
	}
	// Revoked by id: r2 closes bravo.
	gwCLI(t, key, "token", "revoke", bravoTok.ID)
	waitLogs(t, bravo, "bravo", revokedLog...)
	testkit.WaitUntil(t, "r1 to list bravo offline", func() bool { return status(r1.addr, "bravo") != "online" })
}
