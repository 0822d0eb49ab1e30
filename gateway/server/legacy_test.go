package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/legacy"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/testkit/pgtest"
)

// dialLegacy opens a WebSocket the way the original TypeScript client does:
// GET /ws/connect?name=<n>&secret=<s>, no subprotocol, no headers.
func (f *fixture) dialLegacy(name, secret string) (*websocket.Conn, *http.Response, error) {
	u := "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/ws/connect?" + url.Values{"name": {name}, "secret": {secret}}.Encode()
	ws, resp, err := websocket.Dial(context.Background(), u, nil)
	if err == nil {
		ws.SetReadLimit(64 << 20)
	}
	return ws, resp, err
}

// legacyConnector connects an original-protocol client serving h; the
// returned func disconnects it.
func (f *fixture) legacyConnector(name string, h http.Handler) context.CancelFunc {
	f.t.Helper()
	ws, _, err := f.dialLegacy(name, "shared-secret")
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	// Serve ends with the test (or the gateway's close): nothing to report.
	go func() { defer close(done); _ = legacy.Serve(ctx, ws, h); _ = ws.CloseNow() }()
	f.t.Cleanup(func() { cancel(); <-done })
	f.waitStatus(name, presence.Online)
	return func() { cancel(); <-done }
}

// rawLegacy connects an original-protocol client whose frames the test
// reads and writes itself.
func (f *fixture) rawLegacy(name string) *websocket.Conn {
	f.t.Helper()
	ws, _, err := f.dialLegacy(name, "shared-secret")
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = ws.CloseNow() })
	f.waitStatus(name, presence.Online)
	return ws
}

func (f *fixture) legacyConn(name string) *legacy.Conn {
	f.t.Helper()
	c, _, _ := f.gw.Presence().Get(name)
	lc, ok := c.(*tracked).Conn.(*legacy.Conn)
	if !ok {
		f.t.Fatalf("%s is not a legacy connection: %T", name, c)
	}
	return lc
}

func readFrame(t *testing.T, ws *websocket.Conn) legacy.RequestFrame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitBound)
	defer cancel()
	_, data, err := ws.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := legacy.ParseRequest(data)
	if err != nil {
		t.Fatal(err)
	}
	return fr
}

func writeFrame(t *testing.T, ws *websocket.Conn, s string) {
	t.Helper()
	if err := ws.Write(context.Background(), websocket.MessageText, []byte(s)); err != nil {
		t.Fatal(err)
	}
}

// goDo runs a dashboard request in the background.
func (f *fixture) goDo(ctx context.Context, method, path string, body io.Reader) <-chan [2]string {
	out := make(chan [2]string, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, method, f.srv.URL+path, body)
		req.Header.Set("Authorization", "Bearer "+f.dash)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- [2]string{"error", err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		out <- [2]string{fmt.Sprint(resp.StatusCode), string(b)}
	}()
	return out
}

func waitResult(t *testing.T, ch <-chan [2]string) [2]string {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(testkit.WaitBound):
		t.Fatal("request did not finish")
		return [2]string{}
	}
}

// originalAPI answers like the original client's local API: it requires
// the X-Client-Token its process registered.
func originalAPI(token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("X-Client-Token") != token {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"Unauthorized"}`)
			return
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, `{"machine":"old","method":%q,"uri":%q,"body":%q,"auth":%q}`, r.Method, r.URL.RequestURI(), body, r.Header.Get("Authorization"))
	})
}

func TestLegacyClientThroughTheGateway(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	f.connector("new-box", echoAPI("new-box"))
	f.legacyConnector("old", originalAPI("tok-123"))

	// Before it registers its client token, its API refuses.
	resp, body := f.do("GET", "/api/clients/old/workflows", f.dash, nil)
	if resp.StatusCode != 401 || body != `{"error":"Unauthorized"}` {
		t.Fatalf("unregistered: %d %s", resp.StatusCode, body)
	}
	reg := `{"name":"old","url":"ws://old","secret":"shared-secret","clientToken":"tok-123"}`
	if resp, body := f.do("POST", "/api/gateway/register", "", strings.NewReader(reg)); resp.StatusCode != 201 || body != "{\"registered\":\"old\"}\n" {
		t.Fatalf("register: %d %s", resp.StatusCode, body)
	}
	for _, prefix := range []string{"/api/clients/", "/api/agents/"} {
		resp, body = f.do("GET", prefix+"old/threads?workflow=solve&key=secret-in-query", f.dash, nil)
		if resp.StatusCode != 200 || body != `{"machine":"old","method":"GET","uri":"/api/threads?workflow=solve","body":"","auth":""}` {
			t.Fatalf("GET %s: %d %s", prefix, resp.StatusCode, body)
		}
	}
	resp, body = f.do("POST", "/api/clients/old/threads", f.dash, strings.NewReader(`{"workflow":"w","prompt":"héllo"}`))
	if resp.StatusCode != 200 || !strings.Contains(body, `"body":"{\"workflow\":\"w\",\"prompt\":\"héllo\"}"`) {
		t.Fatalf("POST: %d %s", resp.StatusCode, body)
	}
	if _, body := f.do("GET", "/api/clients/new-box/x", f.dash, nil); !strings.Contains(body, `"machine":"new-box"`) {
		t.Fatalf("the h2 connector beside it: %s", body)
	}

	// Both kinds are listed online, each with its protocol.
	resp, body = f.do("GET", "/api/gateway/endpoints", f.dash, nil)
	var eps []presence.Endpoint
	if err := json.Unmarshal([]byte(body), &eps); err != nil || len(eps) != 2 {
		t.Fatalf("endpoints: %d %s", resp.StatusCode, body)
	}
	got := map[string]string{}
	for _, e := range eps {
		if e.Status != presence.Online {
			t.Fatalf("%s is %s", e.Name, e.Status)
		}
		got[e.Name] = e.Protocol
	}
	if got["new-box"] != "h2" || got["old"] != "legacy-json" || !strings.Contains(body, `"protocol":"legacy-json"`) {
		t.Fatalf("protocols: %v", got)
	}

	// The heartbeat (the same register call) answers 200; unregistering
	// forgets the token, and, as in the original, the name leaves the
	// endpoints and its requests are 404 while its socket is still up.
	if resp, body := f.do("POST", "/api/gateway/register", "", strings.NewReader(reg)); resp.StatusCode != 200 || !strings.Contains(body, `"registered":"old"`) {
		t.Fatalf("re-register: %d %s", resp.StatusCode, body)
	}
	if resp, body := f.do("DELETE", "/api/gateway/register/old", "shared-secret", nil); resp.StatusCode != 200 || body != "{\"unregistered\":\"old\"}\n" {
		t.Fatalf("unregister: %d %s", resp.StatusCode, body)
	}
	if tok := f.gw.registrations.ClientToken("old"); tok != "" {
		t.Fatalf("client token kept: %q", tok)
	}
	if resp, body := f.do("GET", "/api/clients/old/workflows", f.dash, nil); resp.StatusCode != 404 || !strings.Contains(body, "connector not found: old") {
		t.Fatalf("after unregister: %d %s", resp.StatusCode, body)
	}
	if _, body := f.do("GET", "/api/gateway/endpoints", f.dash, nil); strings.Contains(body, `"old"`) || !strings.Contains(body, `"new-box"`) {
		t.Fatalf("endpoints after unregister: %s", body)
	}
	// Registering again brings it back.
	if resp, _ := f.do("POST", "/api/gateway/register", "", strings.NewReader(reg)); resp.StatusCode != 201 {
		t.Fatalf("register again: %d", resp.StatusCode)
	}
	if resp, body := f.do("GET", "/api/clients/old/workflows", f.dash, nil); resp.StatusCode != 200 || !strings.Contains(body, `"machine":"old"`) {
		t.Fatalf("after registering again: %d %s", resp.StatusCode, body)
	}
}

func TestLegacyConcurrentRequestsAnsweredOutOfOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	const n = 8
	var mu sync.Mutex
	release := map[string]chan struct{}{}
	arrived := make(chan string, n)
	for i := range n {
		release[fmt.Sprint(i)] = make(chan struct{})
	}
	f.legacyConnector("old", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := strings.TrimPrefix(r.URL.Path, "/api/n/")
		mu.Lock()
		ch := release[i]
		mu.Unlock()
		arrived <- i
		<-ch
		fmt.Fprintf(w, "answer %s", i)
	}))
	results := make([]<-chan [2]string, n)
	for i := range n {
		results[i] = f.goDo(context.Background(), "GET", fmt.Sprintf("/api/clients/old/n/%d", i), nil)
	}
	for range n {
		<-arrived
	}
	for i := n - 1; i >= 0; i-- { // the last asked is answered first
		close(release[fmt.Sprint(i)])
		if r := waitResult(t, results[i]); r != [2]string{"200", fmt.Sprintf("answer %d", i)} {
			t.Fatalf("request %d: %v", i, r)
		}
	}
}

func TestLegacyCancellationForgetsTheRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	ws := f.rawLegacy("old")
	ctx, cancel := context.WithCancel(context.Background())
	res := f.goDo(ctx, "GET", "/api/clients/old/slow", nil)
	fr := readFrame(t, ws)
	if fr.Method != "GET" || fr.Path != "/api/slow" || fr.Body != nil {
		t.Fatalf("frame %+v", fr)
	}
	lc := f.legacyConn("old")
	if lc.Pending() != 1 {
		t.Fatalf("pending %d", lc.Pending())
	}
	cancel()
	waitResult(t, res)
	testkit.WaitUntil(t, "the cancelled request to be forgotten", func() bool { return lc.Pending() == 0 })
	// The answer that comes too late is dropped; the socket lives on.
	writeFrame(t, ws, `{"id":"`+fr.ID+`","status":200,"headers":{},"body":"late"}`)
	res = f.goDo(context.Background(), "GET", "/api/clients/old/next", nil)
	fr = readFrame(t, ws)
	writeFrame(t, ws, `{"id":"`+fr.ID+`","status":200,"headers":{"content-type":"text/plain"},"body":"next"}`)
	if r := waitResult(t, res); r != [2]string{"200", "next"} {
		t.Fatalf("after a cancel: %v", r)
	}
}

func TestLegacySocketCloseFailsPendingWith502(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	ws := f.rawLegacy("old")
	res := []<-chan [2]string{
		f.goDo(context.Background(), "GET", "/api/clients/old/a", nil),
		f.goDo(context.Background(), "POST", "/api/clients/old/b", strings.NewReader("x")),
	}
	readFrame(t, ws)
	readFrame(t, ws)
	if err := ws.Close(websocket.StatusNormalClosure, "shutdown"); err != nil {
		t.Fatal(err)
	}
	for _, ch := range res {
		r := waitResult(t, ch)
		var e struct{ Error string }
		if r[0] != "502" || json.Unmarshal([]byte(r[1]), &e) != nil || !strings.Contains(e.Error, "connector unreachable") {
			t.Fatalf("pending request after the socket closed: %v", r)
		}
	}
	f.waitStatus("old", presence.Offline)
	if resp, body := f.do("GET", "/api/clients/old/a", f.dash, nil); resp.StatusCode != 503 || !strings.Contains(body, "connector offline") {
		t.Fatalf("after close: %d %s", resp.StatusCode, body)
	}
}

func TestLegacyInvalidFramesAreIgnored(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	ws := f.rawLegacy("old")
	res := f.goDo(context.Background(), "GET", "/api/clients/old/x", nil)
	fr := readFrame(t, ws)
	for _, junk := range []string{
		`garbage`, `{}`, `{"id":"` + fr.ID + `","status":"200","headers":{},"body":""}`,
		`{"id":"` + fr.ID + `","status":200,"headers":[],"body":""}`,
		`{"id":"` + fr.ID + `","status":200,"headers":{},"body":null}`,
		`{"id":"someone-else","status":200,"headers":{},"body":""}`,
	} {
		writeFrame(t, ws, junk)
	}
	if err := ws.Write(context.Background(), websocket.MessageBinary, []byte("bin")); err != nil {
		t.Fatal(err)
	}
	writeFrame(t, ws, `{"id":"`+fr.ID+`","status":404.2,"headers":{"content-type":"application/json"},"body":"{\"error\":\"Thread not found\"}"}`)
	if r := waitResult(t, res); r != [2]string{"404", `{"error":"Thread not found"}`} {
		t.Fatalf("answer after junk: %v", r)
	}
	if n := f.legacyConn("old").Dropped(); n != 7 {
		t.Fatalf("dropped %d frames, want 7", n)
	}
	// An answer with a status HTTP has no place for is a 502.
	res = f.goDo(context.Background(), "GET", "/api/clients/old/y", nil)
	fr = readFrame(t, ws)
	writeFrame(t, ws, `{"id":"`+fr.ID+`","status":42,"headers":{},"body":""}`)
	if r := waitResult(t, res); r[0] != "502" || !strings.Contains(r[1], "invalid status 42") {
		t.Fatalf("status 42: %v", r)
	}
}

func TestLegacyConnectAuthAndLimits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour, func(o *Options) { o.WSReadLimit = 1 << 10; o.MaxBody = 100 })
	if _, resp, err := f.dialLegacy("old", "wrong"); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("wrong secret: %v %v", resp, err)
	}
	ciTok, _ := f.auth.Issue(auth.RoleConnector, "ci-box", time.Hour)
	if _, resp, err := f.dialLegacy("old", ciTok); err == nil || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("another name's token: %v %v", resp, err)
	}
	// A connector token for the name works as the secret, too.
	oldTok, _ := f.auth.Issue(auth.RoleConnector, "old", time.Hour)
	ws, _, err := f.dialLegacy("old", oldTok)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ws.CloseNow() }()
	f.waitStatus("old", presence.Online)

	// A body over MaxBody that does not say its length up front is 413.
	res := f.goDo(context.Background(), "POST", "/api/clients/old/cas", io.MultiReader(strings.NewReader(strings.Repeat("x", 200))))
	if r := waitResult(t, res); r[0] != "413" || !strings.Contains(r[1], "too large") {
		t.Fatalf("big body: %v", r)
	}
	// A frame over the read limit ends the connection.
	res = f.goDo(context.Background(), "GET", "/api/clients/old/big", nil)
	fr := readFrame(t, ws)
	writeFrame(t, ws, `{"id":"`+fr.ID+`","status":200,"headers":{},"body":"`+strings.Repeat("y", 2<<10)+`"}`)
	if r := waitResult(t, res); r[0] != "502" {
		t.Fatalf("oversized answer: %v", r)
	}
	f.waitStatus("old", presence.Offline)

	// A plain GET is told to upgrade, as the original gateway did.
	resp, body := f.do("GET", "/ws/connect?name=old&secret=shared-secret", "", nil)
	if resp.StatusCode != 426 || body != "{\"error\":\"expected WebSocket upgrade\"}\n" {
		t.Fatalf("no upgrade: %d %s", resp.StatusCode, body)
	}
}

func TestRegisterRoutes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	post := func(body string) (int, string) {
		resp, b := f.do("POST", "/api/gateway/register", "", strings.NewReader(body))
		return resp.StatusCode, b
	}
	oldTok, _ := f.auth.Issue(auth.RoleConnector, "old", time.Hour)
	ciTok, _ := f.auth.Issue(auth.RoleConnector, "ci-box", time.Hour)
	cases := []struct {
		body string
		code int
		want string
	}{
		{`not json`, 400, `"error":"body must be a JSON object`},
		{`{"url":"ws://x","secret":"shared-secret"}`, 400, `{"error":"name and url required"}`},
		{`{"name":"old","secret":"shared-secret"}`, 400, `{"error":"name and url required"}`},
		{`{"name":"old","url":"ws://old"}`, 401, `{"error":"missing credentials","reason":"missing"}`},
		// The refusals' wording is gateway/auth's (and tested there).
		{`{"name":"old","url":"ws://old","secret":"nope"}`, 401, `{"error":"`},
		{`{"name":"old","url":"ws://old","secret":"` + ciTok + `"}`, 403, `{"error":"`},
		{`{"name":"Bad_Name","url":"ws://x","secret":"shared-secret"}`, 400, `invalid connector name`},
		{`{"name":"old","url":"ws://old/","secret":"` + oldTok + `","clientToken":"t1"}`, 201, `{"registered":"old"}`},
		{`{"name":"old","url":"ws://old","secret":"` + oldTok + `"}`, 200, `{"registered":"old"}`},
		// A token has held old: the secret may not register it now.
		{`{"name":"old","url":"ws://old","secret":"shared-secret"}`, 409, `held by a token-bound connector`},
	}
	for _, c := range cases {
		if code, body := post(c.body); code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s", c.body, code, body)
		}
	}
	// A heartbeat without clientToken keeps the one known.
	if tok := f.gw.registrations.ClientToken("old"); tok != "t1" {
		t.Fatalf("client token %q", tok)
	}
	for _, c := range []struct {
		token string
		code  int
	}{{"", 401}, {"nope", 401}, {ciTok, 403}, {oldTok, 200}} {
		if resp, body := f.do("DELETE", "/api/gateway/register/old", c.token, nil); resp.StatusCode != c.code || !strings.HasPrefix(body, "{") {
			t.Errorf("DELETE with %.8q: %d %s", c.token, resp.StatusCode, body)
		}
	}
	if tok := f.gw.registrations.ClientToken("old"); tok != "" {
		t.Fatalf("token survived unregister: %q", tok)
	}
}

func TestLegacyClientAnswersHeartbeats(t *testing.T) {
	t.Parallel()
	// A ping's timeout is the interval, and two missed pings drop the
	// client: at 50 ms a loaded machine dropped it before one came back.
	f := newFixture(t, time.Second)
	f.legacyConnector("old", originalAPI(""))
	before := f.gw.Presence().List()[0].LastHeartbeat
	// Three heartbeat intervals on, the client has answered the pings since.
	testkit.WaitUntil(t, "heartbeats three intervals on", func() bool { return f.gw.Presence().List()[0].LastHeartbeat >= before+3000 })
	if e := f.gw.Presence().List()[0]; e.Status != presence.Online {
		t.Fatalf("after three heartbeats: %+v (before %d)", e, before)
	}
}

// registrationKey is the key the store tests seal client tokens with.
var testRegistrationKey = []byte(strings.Repeat("r", 32))

// openSQLite opens a SQLite store in dir; the test closes it.
func openSQLite(t *testing.T, dir string) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// newStoreFixture is a fixture whose gateway keeps its state in st,
// sealing registrations with key.
func newStoreFixture(t *testing.T, st store.Store, key []byte, mutate ...func(*Options)) *fixture {
	t.Helper()
	f := newFixture(t, time.Hour, append([]func(*Options){func(o *Options) { o.Store, o.RegistrationKey = st, key }}, mutate...)...)
	// Before the store closes: cleanups run last registered first.
	t.Cleanup(func() { _ = f.gw.closeAudit(context.Background()) })
	return f
}

// stop stops a fixture's gateway as Run does, before its store is closed.
func (f *fixture) stop() {
	f.gw.Shutdown()
	f.srv.Close()
	if err := f.gw.closeAudit(context.Background()); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) registerLegacy(name, token string) {
	f.t.Helper()
	reg := `{"name":"` + name + `","url":"http://10.0.0.5:3000/","secret":"shared-secret","clientToken":"` + token + `"}`
	if resp, body := f.do("POST", "/api/gateway/register", "", strings.NewReader(reg)); resp.StatusCode != 201 && resp.StatusCode != 200 {
		f.t.Fatalf("register %s: %d %s", name, resp.StatusCode, body)
	}
}

// TestRegistrationsSurviveARestart: a registration is kept, its client
// token sealed, and a gateway started on the same store forwards the
// original client's first request with that token: no 401 until the
// client's next heartbeat.
func TestRegistrationsSurviveARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := openSQLite(t, dir)
	f := newStoreFixture(t, st, testRegistrationKey)
	f.registerLegacy("old", "tok-restart")
	kept, err := st.GetRegistration(context.Background(), "old")
	if err != nil || kept.URL != "http://10.0.0.5:3000" || kept.RegisteredAt.IsZero() || !kept.LastHeartbeat.Equal(kept.RegisteredAt) {
		t.Fatalf("kept: %+v %v", kept, err)
	}
	if strings.Contains(string(kept.TokenSealed), "tok-restart") {
		t.Fatal("the client token is kept in clear")
	}
	f.stop()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st2 := openSQLite(t, dir)
	t.Cleanup(func() { _ = st2.Close() })
	f2 := newStoreFixture(t, st2, testRegistrationKey)
	if tok := f2.gw.registrations.ClientToken("old"); tok != "tok-restart" {
		t.Fatalf("client token after the restart: %q", tok)
	}
	f2.legacyConnector("old", originalAPI("tok-restart"))
	if resp, body := f2.do("GET", "/api/clients/old/workflows", f2.dash, nil); resp.StatusCode != 200 || !strings.Contains(body, `"machine":"old"`) {
		t.Fatalf("first request after the restart: %d %s", resp.StatusCode, body)
	}
	// Its first register after the restart is a heartbeat: 200, the same
	// registration time.
	reg := `{"name":"old","url":"http://10.0.0.5:3000","secret":"shared-secret"}`
	if resp, _ := f2.do("POST", "/api/gateway/register", "", strings.NewReader(reg)); resp.StatusCode != 200 {
		t.Fatalf("heartbeat after the restart: %d", resp.StatusCode)
	}
	again, err := st2.GetRegistration(context.Background(), "old")
	if err != nil || !again.RegisteredAt.Equal(kept.RegisteredAt) || !again.LastHeartbeat.After(kept.LastHeartbeat) {
		t.Fatalf("after the heartbeat: %+v (was %+v) %v", again, kept, err)
	}
}

// TestRegistrationChangesAreSaved: a new URL or client token is saved; a
// heartbeat without a client token keeps the saved one.
func TestRegistrationChangesAreSaved(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, t.TempDir())
	t.Cleanup(func() { _ = st.Close() })
	f := newStoreFixture(t, st, testRegistrationKey)
	f.registerLegacy("old", "tok-1")
	f.registerLegacy("old", "tok-2")
	reg := `{"name":"old","url":"http://10.0.0.6:3000","secret":"shared-secret"}`
	if resp, _ := f.do("POST", "/api/gateway/register", "", strings.NewReader(reg)); resp.StatusCode != 200 {
		t.Fatalf("heartbeat: %d", resp.StatusCode)
	}
	kept, err := st.GetRegistration(context.Background(), "old")
	if err != nil || kept.URL != "http://10.0.0.6:3000" {
		t.Fatalf("kept: %+v %v", kept, err)
	}
	if tok, err := legacy.OpenToken(testRegistrationKey, "old", kept.TokenSealed); err != nil || tok != "tok-2" {
		t.Fatalf("kept token: %q %v", tok, err)
	}
}

// TestUnregisterDeletesTheKeptRegistration: DELETE removes the entry from
// the store, the name leaves the endpoints and is 404, and a restarted
// gateway does not bring it back.
func TestUnregisterDeletesTheKeptRegistration(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := openSQLite(t, dir)
	f := newStoreFixture(t, st, testRegistrationKey)
	f.legacyConnector("old", originalAPI("tok-del"))
	f.registerLegacy("old", "tok-del")
	if resp, _ := f.do("GET", "/api/clients/old/x", f.dash, nil); resp.StatusCode != 200 {
		t.Fatalf("registered: %d", resp.StatusCode)
	}
	// Refusals change nothing.
	if resp, _ := f.do("DELETE", "/api/gateway/register/old", "wrong-secret", nil); resp.StatusCode != 401 {
		t.Fatalf("unregister with a wrong secret: %d", resp.StatusCode)
	}
	if _, err := st.GetRegistration(context.Background(), "old"); err != nil {
		t.Fatalf("a refused unregister deleted: %v", err)
	}
	if resp, body := f.do("DELETE", "/api/gateway/register/old", "shared-secret", nil); resp.StatusCode != 200 {
		t.Fatalf("unregister: %d %s", resp.StatusCode, body)
	}
	if _, err := st.GetRegistration(context.Background(), "old"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("still kept: %v", err)
	}
	if resp, _ := f.do("GET", "/api/clients/old/x", f.dash, nil); resp.StatusCode != 404 {
		t.Fatalf("after unregister: %d", resp.StatusCode)
	}
	if _, body := f.do("GET", "/api/gateway/endpoints", f.dash, nil); strings.Contains(body, `"old"`) {
		t.Fatalf("endpoints after unregister: %s", body)
	}
	f.stop()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2 := openSQLite(t, dir)
	t.Cleanup(func() { _ = st2.Close() })
	f2 := newStoreFixture(t, st2, testRegistrationKey)
	if tok := f2.gw.registrations.ClientToken("old"); tok != "" {
		t.Fatalf("an unregistered client came back: %q", tok)
	}
}

// TestRegistrationNotSavedIsRefused: when the store fails, the client is
// answered 503 (it retries at its next heartbeat) and nothing changes.
func TestRegistrationNotSavedIsRefused(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, t.TempDir())
	f := newStoreFixture(t, st, testRegistrationKey)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	reg := `{"name":"old","url":"http://x","secret":"shared-secret","clientToken":"t"}`
	if resp, body := f.do("POST", "/api/gateway/register", "", strings.NewReader(reg)); resp.StatusCode != 503 || !strings.Contains(body, "registration not saved") {
		t.Fatalf("register on a closed store: %d %s", resp.StatusCode, body)
	}
	if tok := f.gw.registrations.ClientToken("old"); tok != "" {
		t.Fatalf("kept in memory though not saved: %q", tok)
	}
}

// TestRegistrationSealedWithAnotherKeyIsSkipped: a kept registration
// whose token does not open (the key changed) is left out with a warning;
// the client's next heartbeat brings its token again.
func TestRegistrationSealedWithAnotherKeyIsSkipped(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, t.TempDir())
	t.Cleanup(func() { _ = st.Close() })
	sealed, err := legacy.SealToken([]byte(strings.Repeat("o", 32)), "old", "tok")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := st.PutRegistration(context.Background(), store.Registration{Name: "old", URL: "http://x", TokenSealed: sealed, RegisteredAt: now, LastHeartbeat: now}); err != nil {
		t.Fatal(err)
	}
	var logs testkit.Buffer
	f := newStoreFixture(t, st, testRegistrationKey, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	if tok := f.gw.registrations.ClientToken("old"); tok != "" {
		t.Fatalf("opened with the wrong key: %q", tok)
	}
	if !strings.Contains(logs.String(), `msg="registration not loaded" connector=old`) {
		t.Fatalf("logs: %s", logs.String())
	}
	f.registerLegacy("old", "tok-new")
	if tok := f.gw.registrations.ClientToken("old"); tok != "tok-new" {
		t.Fatalf("after the heartbeat: %q", tok)
	}
}

// TestRegistrationsReachOtherProcesses: two gateways on one PostgreSQL
// database (two replicas) learn of each other's registrations and
// unregistrations through the store's notifications.
func TestRegistrationsReachOtherProcesses(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	open := func() store.Store {
		st, err := store.Open(context.Background(), store.Config{DatabaseURL: url})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	f1 := newStoreFixture(t, open(), testRegistrationKey)
	f2 := newStoreFixture(t, open(), testRegistrationKey)
	f2.legacyConnector("old", originalAPI("tok-pg"))
	f1.registerLegacy("old", "tok-pg")
	testkit.WaitUntil(t, "the other gateway to learn the client token", func() bool { return f2.gw.registrations.ClientToken("old") == "tok-pg" })
	if resp, _ := f2.do("GET", "/api/clients/old/x", f2.dash, nil); resp.StatusCode != 200 {
		t.Fatalf("through the other gateway: %d", resp.StatusCode)
	}
	if resp, _ := f1.do("DELETE", "/api/gateway/register/old", "shared-secret", nil); resp.StatusCode != 200 {
		t.Fatalf("unregister: %d", resp.StatusCode)
	}
	testkit.WaitUntil(t, "the other gateway to learn the removal", func() bool { return f2.gw.registrations.Removed("old") })
	if resp, _ := f2.do("GET", "/api/clients/old/x", f2.dash, nil); resp.StatusCode != 404 {
		t.Fatalf("through the other gateway after unregister: %d", resp.StatusCode)
	}
}

// TestRegistrationKey: the key sealing kept client tokens is the one
// given, else derived from the cluster key, else the data directory's own,
// made once; with PostgreSQL and neither, there is none.
func TestRegistrationKey(t *testing.T) {
	t.Parallel()
	given := []byte(strings.Repeat("g", 32))
	if k := registrationKey(Config{Options: Options{RegistrationKey: given}, SigningKey: []byte("c")}); string(k) != string(given) {
		t.Fatalf("given: %q", k)
	}
	signing := []byte(strings.Repeat("c", 32))
	k1 := registrationKey(Config{SigningKey: signing, Store: store.Config{DatabaseURL: "postgres://x"}})
	k2 := registrationKey(Config{SigningKey: signing, Store: store.Config{DataDir: t.TempDir()}})
	if len(k1) != 32 || string(k1) != string(k2) || string(k1) == string(signing) || string(k1) != string(RegistrationKeyFrom(signing)) {
		t.Fatalf("from the signing key: %x %x", k1, k2)
	}
	if k := registrationKey(Config{Store: store.Config{DatabaseURL: "postgres://x"}}); k != nil {
		t.Fatalf("without a signing key: %x", k)
	}
}

// TestRegistrationsReloadFromAnotherProcess: on SQLite another process's
// commit reaches the gateway as a reload; the registrations it put and
// deleted are then the gateway's too.
func TestRegistrationsReloadFromAnotherProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := openSQLite(t, dir)
	t.Cleanup(func() { _ = st.Close() })
	f := newStoreFixture(t, st, testRegistrationKey)
	f.registerLegacy("old", "tok-old")
	other := openSQLite(t, dir)
	t.Cleanup(func() { _ = other.Close() })
	sealed, err := legacy.SealToken(testRegistrationKey, "new", "tok-new")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := other.PutRegistration(context.Background(), store.Registration{Name: "new", URL: "http://y", TokenSealed: sealed, RegisteredAt: now, LastHeartbeat: now}); err != nil {
		t.Fatal(err)
	}
	if err := other.DeleteRegistration(context.Background(), "old"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the gateway to reload", func() bool {
		return f.gw.registrations.ClientToken("new") == "tok-new" && f.gw.registrations.Removed("old")
	})
}
