package e2e

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// auditEntry is one entry of GET /api/gateway/audit.
type auditEntry struct {
	ID      int64  `json:"id"`
	Time    string `json:"time"`
	TokenID string `json:"tokenId"`
	Actor   string `json:"actor"`
	Source  string `json:"source"`
	Action  string `json:"action"`
	Machine string `json:"machine"`
	Target  string `json:"target"`
	Status  int    `json:"status"`
}

// audit reads the gateway's audit log with query.
func (g *gatewayEnv) audit(query string) ([]auditEntry, int) {
	g.t.Helper()
	resp, body := g.do("GET", "/api/gateway/audit"+query, "")
	var page struct {
		Entries []auditEntry `json:"entries"`
		Total   int          `json:"total"`
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &page) != nil {
		g.t.Fatalf("audit%s: %d %s", query, resp.StatusCode, body)
	}
	return page.Entries, page.Total
}

// jti is a JWT's id, read from its payload ("" if it has none).
func jti(t *testing.T, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		ID string `json:"jti"`
	}
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatal(err)
	}
	return claims.ID
}

// TestAuditLogThroughTheGateway: starting and killing a thread on a real
// connector, a refused kill, a login and a logout are each an entry
// naming the dashboard token by id (never the token), the client's
// address, the machine, the target and the result; the entries outlive a
// gateway restart, and the log is searchable by action and machine.
func TestAuditLogThroughTheGateway(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	_, root := g.connector("laptop", map[string]string{"slow": "slow.esm.js"})
	resp, body := g.do("POST", "/api/clients/laptop/threads", `{"workflow":"slow","prompt":"audit me"}`)
	var started struct{ ThreadID string }
	if resp.StatusCode != 201 || json.Unmarshal([]byte(body), &started) != nil {
		t.Fatalf("start: %d %s", resp.StatusCode, body)
	}
	if resp, body := g.do("POST", "/api/clients/laptop/threads/"+started.ThreadID+"/kill", ""); resp.StatusCode != 200 {
		t.Fatalf("kill: %d %s", resp.StatusCode, body)
	}
	finished(t, root, started.ThreadID)
	if resp, _ := g.do("POST", "/api/clients/laptop/threads/no-such-thread/kill", ""); resp.StatusCode != 404 {
		t.Fatalf("kill of an unknown thread: %d", resp.StatusCode)
	}
	login, err := http.Post("http://"+g.front+"/api/gateway/login", "application/json", strings.NewReader(`{"token":"`+g.dash+`"}`))
	if err != nil || login.StatusCode != 200 {
		t.Fatalf("login: %v %v", login, err)
	}
	login.Body.Close()
	var session string
	for _, c := range login.Cookies() {
		session = c.Value
	}
	req, _ := http.NewRequest("POST", "http://"+g.front+"/api/gateway/logout", nil)
	req.Header.Set("Cookie", "uncaged_session="+session)
	logout, err := http.DefaultClient.Do(req)
	if err != nil || logout.StatusCode != 200 {
		t.Fatalf("logout: %v %v", logout, err)
	}
	logout.Body.Close()

	want := []auditEntry{
		{Action: "logout", Status: 200},
		{Action: "login", Status: 200},
		{Action: "kill", Machine: "laptop", Target: "no-such-thread", Status: 404},
		{Action: "kill", Machine: "laptop", Target: started.ThreadID, Status: 200},
		{Action: "start", Machine: "laptop", Target: started.ThreadID, Status: 201},
	}
	check := func(when string) {
		t.Helper()
		// The tokens' own entries (token-create by the CLI) are the token
		// commands' to test, the connector's connections names_test.go's.
		var entries []auditEntry
		testkit.WaitUntil(t, "the audit entries "+when, func() bool {
			all, _ := g.audit("?limit=1000")
			entries = entries[:0]
			for _, e := range all {
				if !strings.HasPrefix(e.Action, "token-") && e.Action != "connect" && e.Action != "replace" {
					entries = append(entries, e)
				}
			}
			return len(entries) >= len(want)
		})
		if len(entries) != len(want) {
			t.Fatalf("%s: %d entries: %+v", when, len(entries), entries)
		}
		for i, w := range want {
			e := entries[i]
			if e.Action != w.Action || e.Machine != w.Machine || e.Target != w.Target || e.Status != w.Status ||
				e.TokenID != jti(t, g.dash) || e.Source != "127.0.0.1" || e.Time == "" {
				t.Errorf("%s: entry %d: %+v, want %+v", when, i, e, w)
			}
		}
		_, body := g.do("GET", "/api/gateway/audit", "")
		if strings.Contains(body, g.dash) || strings.Contains(body, "eyJ") {
			t.Fatalf("%s: a credential in the audit log: %s", when, body)
		}
	}
	check("before the restart")
	g.restart()
	check("after the restart")

	if kills, total := g.audit("?action=kill&machine=laptop&limit=1"); total != 2 || len(kills) != 1 || kills[0].Target != "no-such-thread" {
		t.Fatalf("kills: %d %+v", total, kills)
	}
	if resp, body := g.do("GET", "/api/gateway/audit?limit=many", ""); resp.StatusCode != 400 || !strings.Contains(body, "limit") {
		t.Fatalf("bad limit: %d %s", resp.StatusCode, body)
	}
}
