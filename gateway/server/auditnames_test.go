package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/testkit"
)

// auditedFixture is a gateway keeping its audit log in a SQLite store of
// its own, believing X-Forwarded-For from the test (127.0.0.1).
func auditedFixture(t *testing.T, mutate ...func(*Options)) (*fixture, store.Store) {
	t.Helper()
	st := openSQLite(t, t.TempDir())
	t.Cleanup(func() { _ = st.Close() })
	trust := func(o *Options) { o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")} }
	return newStoreFixture(t, st, testRegistrationKey, append([]func(*Options){trust}, mutate...)...), st
}

// Every connection is an entry naming the credential and the instances
// by fingerprint: a connector that has its name now (connect), the same
// instance reconnecting (replace), another taking it (takeover), and each
// refusal (connect-refused): another instance, the secret on a token's
// name. Never an instance's id or key.
func TestConnectionsAreAudited(t *testing.T) {
	t.Parallel()
	f, st := auditedFixture(t)
	tok, rec := record(t, f.auth, st, auth.RoleConnector, "m1", 0)
	fpA, fpB := rootA.fingerprint(t), rootB.fingerprint(t)
	steps := []struct {
		what   string
		dial   func() error
		action string
		status int
		// target has these, in this order.
		target []string
		secret bool
	}{
		{"the first connection", func() error { _, err := f.dialRootWith("m1", tok, rootA, false); return err },
			ActionConnect, 101, []string{"h2, instance " + fpA}, false},
		{"the same root again", func() error { _, err := f.dialRootWith("m1", tok, rootA, false); return err },
			ActionReplace, 101, []string{"instance " + fpA, "replaced the same instance (token) at 127.0.0.1"}, false},
		{"another root", func() error { _, err := f.dialRootWith("m1", tok, rootB, false); return err },
			ActionConnectRefused, 409, []string{"refused: instance " + fpB, "held by instance " + fpA + " from 127.0.0.1"}, false},
		{"another root taking over", func() error { _, err := f.dialRootWith("m1", tok, rootB, true); return err },
			ActionTakeover, 101, []string{"instance " + fpB, "took the name from instance " + fpA}, false},
		{"the secret", func() error { _, err := f.dialRootWith("m1", "shared-secret", rootA, false); return err },
			ActionConnectRefused, 409, []string{"refused: held by a token-bound connector"}, true},
	}
	for i, s := range steps {
		_ = s.dial() // refusals are expected; what the log says is the test
		p := f.waitAudit(i + 1)
		e := p.Entries[0]
		wantToken, wantActor := rec.ID, rec.Note
		if s.secret {
			wantToken, wantActor = "", store.SharedSecretActor
		}
		if e.Action != s.action || e.Status != s.status || e.Machine != "m1" || e.Source != "127.0.0.1" || e.TokenID != wantToken || e.Actor != wantActor {
			t.Errorf("%s: %+v", s.what, e)
		}
		rest := e.Target
		for _, part := range s.target {
			i := strings.Index(rest, part)
			if i < 0 {
				t.Errorf("%s: target %q lacks %q", s.what, e.Target, part)
				break
			}
			rest = rest[i+len(part):]
		}
	}
	raw, _ := json.Marshal(f.audit("?limit=1000"))
	for _, secret := range []string{rootA.id, rootA.key, rootB.id, rootB.key, tok} {
		if strings.Contains(string(raw), secret) {
			t.Fatalf("the audit log shows %q: %s", secret, raw)
		}
	}
	if p := f.audit("?action=" + ActionTakeover + "&machine=m1"); p.Total != 1 {
		t.Fatalf("takeovers of m1: %+v", p)
	}
}

// Two roots sharing one key (a root copied whole) are one instance and
// replace each other at every reconnection: each replacement is counted,
// the first few are written as they come, and the rest are one summary
// entry, so the flapping shows without flooding the log.
func TestAReplacementStormIsCoalesced(t *testing.T) {
	t.Parallel()
	f, st := auditedFixture(t, func(o *Options) { o.ConnectRate = -1 })
	const reconnections = 4 * auditBurst
	coalesced := func() int { return int(counterValue(f.gw.audit.coalesce.coalesced.WithLabelValues(ActionReplace))) }
	for i := range reconnections + 1 {
		if _, err := f.dialRoot("m1", rootA, false); err != nil {
			t.Fatal(err)
		}
		// Each counted before the next, so each replaces the one before.
		testkit.WaitUntil(t, fmt.Sprintf("connection %d to be audited", i), func() bool { return f.audit("?limit=1000").Total+coalesced() == i+1 })
	}
	if p := f.audit("?limit=1000"); p.Total != 1+auditBurst || coalesced() != reconnections-auditBurst {
		t.Fatalf("%d entries, %d coalesced: %+v", p.Total, coalesced(), p.Entries)
	}
	f.stop() // writes the summary
	page, err := st.ListAudit(context.Background(), store.AuditQuery{Action: ActionReplace})
	if err != nil || page.Total != auditBurst+1 {
		t.Fatalf("replacements: %+v %v", page, err)
	}
	summary := page.Entries[0].Target
	if want := fmt.Sprintf("%d more like this from ", reconnections-auditBurst); !strings.HasPrefix(summary, want) ||
		!strings.Contains(summary, "the last: h2, instance "+rootA.fingerprint(t)+" replaced the same instance") {
		t.Fatalf("summary %q", summary)
	}
}

// refusedCase is one state-changing request refused 401 or 403, and the
// entry it must leave.
type refusedCase struct {
	what         string
	method, path string
	body         string
	header       http.Header
	status       int
	// action and target of the entry; target "" is checked to be empty.
	action, target, machine string
}

// TestRefusedChangesAreAudited: every state-changing request refused 401
// or 403, whatever the route and whatever refused it, is one entry with
// its reason code, method and path (never the query), the machine and the
// client's address; never the credential. Refused reads are not changes.
func TestRefusedChangesAreAudited(t *testing.T) {
	t.Parallel()
	f, st := auditedFixture(t)
	f.connector("laptop", echoAPI("laptop"))
	f.waitAudit(1) // its connection

	revoked, rec := record(t, f.auth, st, auth.RoleDashboard, "", 0)
	if _, err := st.RevokeToken(context.Background(), rec.ID); err != nil {
		t.Fatal(err)
	}
	revokedConnector, crec := record(t, f.auth, st, auth.RoleConnector, "laptop", 0)
	if _, err := st.RevokeToken(context.Background(), crec.ID); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the revocations to take effect", func() bool {
		_, derr := f.auth.Verify(revoked, auth.RoleDashboard, "")
		_, cerr := f.auth.Verify(revokedConnector, auth.RoleConnector, "laptop")
		return auth.ReasonOf(derr) == auth.ReasonRevoked && auth.ReasonOf(cerr) == auth.ReasonRevoked
	})
	expired, err := jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{Role: auth.RoleDashboard, RegisteredClaims: jwt.RegisteredClaims{
		Issuer: "uncaged-gateway", IssuedAt: jwt.NewNumericDate(time.Now().Add(-2 * time.Hour)), ExpiresAt: jwt.NewNumericDate(time.Now().Add(-time.Hour)),
	}}).SignedString([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	stranger, _ := auth.New([]byte(strings.Repeat("x", 32)), "")
	otherKey, _ := stranger.Issue(auth.RoleDashboard, "", time.Hour)
	laptopTok, _ := f.auth.Issue(auth.RoleConnector, "laptop", time.Hour)
	otherTok, _ := f.auth.Issue(auth.RoleConnector, "other", time.Hour)
	credentials := []string{revoked, revokedConnector, expired, otherKey, laptopTok, otherTok, f.dash, "garbage-credential"}

	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	upgrade := func(h http.Header) http.Header {
		h.Set("Upgrade", "websocket")
		h.Set("Connection", "Upgrade")
		h.Set("Sec-WebSocket-Version", "13")
		h.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		return h
	}
	crossSite := http.Header{"Cookie": {auth.CookieName + "=" + f.dash}, "Origin": {"https://evil.example"}, "Sec-Fetch-Site": {"cross-site"}}
	cases := []refusedCase{
		{"no credential", "POST", "/api/clients/laptop/threads", `{}`, http.Header{}, 401, ActionRefused, "POST /api/clients/laptop/threads (missing)", "laptop"},
		{"garbage", "POST", "/api/clients/laptop/threads?key=garbage-credential", `{}`, http.Header{}, 401, ActionRefused, "POST /api/clients/laptop/threads (malformed)", "laptop"},
		{"a revoked token", "POST", "/api/clients/laptop/threads/T1/kill", ``, bearer(revoked), 401, ActionRefused, "POST /api/clients/laptop/threads/T1/kill (revoked)", "laptop"},
		{"an expired token", "DELETE", "/api/agents/laptop/cas/h1", ``, bearer(expired), 401, ActionRefused, "DELETE /api/agents/laptop/cas/h1 (expired)", "laptop"},
		{"another gateway's token", "PUT", "/api/clients/laptop/something", `{}`, bearer(otherKey), 401, ActionRefused, "PUT /api/clients/laptop/something (bad-signature)", "laptop"},
		{"a connector's token", "POST", "/api/clients/laptop/threads", `{}`, bearer(laptopTok), 403, ActionRefused, "POST /api/clients/laptop/threads (wrong-kind)", "laptop"},
		{"the cookie from another site", "POST", "/api/clients/laptop/threads", `{}`, crossSite, 403, ActionRefused, "POST /api/clients/laptop/threads (cross-origin)", "laptop"},
		{"connect without a credential", "GET", "/ws/connect?name=laptop", ``, upgrade(http.Header{}), 401, ActionRefused, "GET /ws/connect (missing)", "laptop"},
		{"connect with another name's token", "GET", "/ws/connect?name=laptop", ``, upgrade(bearer(otherTok)), 403, ActionRefused, "GET /ws/connect (wrong-connector)", "laptop"},
		{"connect with a dashboard token", "GET", "/ws/connect?name=laptop", ``, upgrade(bearer(f.dash)), 403, ActionRefused, "GET /ws/connect (wrong-kind)", "laptop"},
		{"connect with garbage in the query", "GET", "/ws/connect?name=laptop&secret=garbage-credential", ``, upgrade(http.Header{}), 401, ActionRefused, "GET /ws/connect (malformed)", "laptop"},
		{"register with garbage", "POST", "/api/gateway/register", `{"name":"laptop","url":"ws://x","secret":"garbage-credential"}`, http.Header{}, 401, ActionRefused, "POST /api/gateway/register (malformed)", ""},
		{"register with another name's token", "POST", "/api/gateway/register", `{"name":"laptop","url":"ws://x","secret":"` + otherTok + `"}`, http.Header{}, 403, ActionRefused, "POST /api/gateway/register (wrong-connector)", ""},
		{"unregister with a revoked token", "DELETE", "/api/gateway/register/laptop", ``, bearer(revokedConnector), 401, ActionRefused, "DELETE /api/gateway/register/laptop (revoked)", "laptop"},
		{"login with garbage", "POST", "/api/gateway/login", `{"token":"garbage-credential"}`, http.Header{}, 401, ActionLogin, "", ""},
		{"login from another site", "POST", "/api/gateway/login", `{"token":"` + f.dash + `"}`, http.Header{"Origin": {"https://evil.example"}, "Sec-Fetch-Site": {"cross-site"}}, 403, ActionLogin, "", ""},
		{"logout from another site", "POST", "/api/gateway/logout", ``, crossSite, 403, ActionLogout, "", ""},
	}
	reads := []refusedCase{
		{"list without a credential", "GET", "/api/gateway/endpoints", ``, http.Header{}, 401, "", "", ""},
		{"read with garbage", "GET", "/api/clients/laptop/threads", ``, bearer("garbage-credential"), 401, "", "", ""},
		{"head with a revoked token", "HEAD", "/api/clients/laptop/threads", ``, bearer(revoked), 401, "", "", ""},
		{"the audit log with a connector's token", "GET", "/api/gateway/audit", ``, bearer(laptopTok), 403, "", "", ""},
	}
	address := func(i int) string { return fmt.Sprintf("198.51.100.%d", i+1) }
	send := func(i int, c refusedCase) {
		t.Helper()
		req, _ := http.NewRequest(c.method, f.srv.URL+c.path, strings.NewReader(c.body))
		for k, v := range c.header {
			req.Header[k] = v
		}
		req.Header.Set("X-Forwarded-For", address(i))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Fatalf("%s: %d, want %d", c.what, resp.StatusCode, c.status)
		}
	}
	for i, c := range reads {
		send(100+i, c)
	}
	for i, c := range cases {
		send(i, c)
	}
	p := f.waitAudit(1 + len(cases))
	bySource := map[string][]auditEntryJSON{}
	for _, e := range p.Entries {
		bySource[e.Source] = append(bySource[e.Source], e)
	}
	for i, c := range cases {
		got := bySource[address(i)]
		if len(got) != 1 {
			t.Errorf("%s: %d entries: %+v", c.what, len(got), got)
			continue
		}
		e := got[0]
		if e.Action != c.action || e.Status != c.status || e.Target != c.target || e.Machine != c.machine || e.TokenID != "" || e.Actor != "" {
			t.Errorf("%s: %+v", c.what, e)
		}
	}
	raw, _ := json.Marshal(p)
	for _, cred := range credentials {
		if strings.Contains(string(raw), cred) {
			t.Fatalf("a credential in the audit log: %s", raw)
		}
	}
	if strings.Contains(string(raw), "?") {
		t.Fatalf("a query string in the audit log: %s", raw)
	}
}

// However many refusals one address causes, the audit log gets a burst of
// them a minute and a summary counting the rest; other addresses keep
// their own bursts.
func TestRefusalsAreCoalescedPerAddress(t *testing.T) {
	t.Parallel()
	f, st := auditedFixture(t)
	const flood = 10 * auditBurst
	for i := range flood {
		f.doFrom("POST", "/api/clients/laptop/threads", "garbage", "203.0.113.1", strings.NewReader(`{}`))
		if i < 2 {
			f.doFrom("POST", "/api/clients/laptop/threads", "garbage", "203.0.113.2", strings.NewReader(`{}`))
		}
	}
	f.waitAudit(auditBurst + 2)
	if n := counterValue(f.gw.audit.coalesce.coalesced.WithLabelValues(ActionRefused)); n != flood-auditBurst {
		t.Fatalf("coalesced %v", n)
	}
	f.stop()
	page, err := st.ListAudit(context.Background(), store.AuditQuery{Action: ActionRefused, Limit: 1000})
	if err != nil || page.Total != auditBurst+3 {
		t.Fatalf("refusals: %+v %v", page, err)
	}
	if s := page.Entries[0]; s.Source != "203.0.113.1" || !strings.HasPrefix(s.Target, fmt.Sprintf("%d more like this", flood-auditBurst)) {
		t.Fatalf("summary %+v", s)
	}
}

// Registrations with the secret or a token are entries naming the
// credential and the name: new, changed and removed ones, and the
// secret's refusals; a heartbeat that changes nothing is not.
func TestRegistrationsAreAudited(t *testing.T) {
	t.Parallel()
	f, st := auditedFixture(t)
	tok, rec := record(t, f.auth, st, auth.RoleConnector, "old", 0)
	register := func(name, url, cred string) int {
		resp, _ := f.do("POST", "/api/gateway/register", "", strings.NewReader(`{"name":"`+name+`","url":"`+url+`","secret":"`+cred+`"}`))
		return resp.StatusCode
	}
	unregister := func(name, cred string) int {
		resp, _ := f.do("DELETE", "/api/gateway/register/"+name, cred, nil)
		return resp.StatusCode
	}
	type want struct {
		action, machine, tokenID, actor, target string
		status                                  int
	}
	secret := store.SharedSecretActor
	steps := []struct {
		do    func() int
		code  int
		entry *want
	}{
		{func() int { return register("free", "ws://a", "shared-secret") }, 201, &want{ActionRegister, "free", "", secret, "new registration", 201}},
		{func() int { return register("free", "ws://a", "shared-secret") }, 200, nil},
		{func() int { return register("free", "ws://b", "shared-secret") }, 200, &want{ActionRegister, "free", "", secret, "changed: new URL or client token", 200}},
		{func() int { return register("old", "ws://o", tok) }, 201, &want{ActionRegister, "old", rec.ID, rec.Note, "new registration", 201}},
		{func() int { return register("old", "ws://o", "shared-secret") }, 409, &want{ActionRegister, "old", "", secret, "refused: held by a token-bound connector", 409}},
		{func() int { return unregister("old", "shared-secret") }, 409, &want{ActionUnregister, "old", "", secret, "refused: held by a token-bound connector", 409}},
		{func() int { return unregister("free", "shared-secret") }, 200, &want{ActionUnregister, "free", "", secret, "", 200}},
		{func() int { return unregister("old", tok) }, 200, &want{ActionUnregister, "old", rec.ID, rec.Note, "", 200}},
	}
	n := 0
	for i, s := range steps {
		if code := s.do(); code != s.code {
			t.Fatalf("step %d: %d, want %d", i, code, s.code)
		}
		if s.entry == nil {
			continue
		}
		n++
		e := f.waitAudit(n).Entries[0]
		w := s.entry
		if e.Action != w.action || e.Machine != w.machine || e.TokenID != w.tokenID || e.Actor != w.actor || e.Target != w.target || e.Status != w.status {
			t.Errorf("step %d: %+v, want %+v", i, e, *w)
		}
	}
	if bound, _ := f.gw.bindings.state("old"); !bound {
		t.Fatal("registering with a token did not bind the name")
	}
}
