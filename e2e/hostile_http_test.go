package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
)

// loopbackDialer dials from the loopback address ip: on Linux all of
// 127.0.0.0/8 is the machine itself, so one test can be several clients
// (and a proxy apart from them). Where that is not so, the test is skipped.
func loopbackDialer(t *testing.T, ip string) *net.Dialer {
	t.Helper()
	probe, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Skipf("loopback address %s is not usable here: %v", ip, err)
	}
	if err := probe.Close(); err != nil {
		t.Fatal(err)
	}
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
}

// clientAt is an HTTP client whose connections come from ip.
func clientAt(t *testing.T, ip string) *http.Client {
	tr := &http.Transport{DialContext: loopbackDialer(t, ip).DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// status sends req and returns the status and body.
func status(t *testing.T, c *http.Client, req *http.Request) (int, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// connectAttempts makes n connection attempts (no token: 401, or 429 once
// the address is over its rate limit) from client through the front,
// each claiming another X-Forwarded-For, and counts the 429s.
func connectAttempts(t *testing.T, g *gatewayEnv, client *http.Client, n int) (limited int) {
	t.Helper()
	for i := range n {
		req, _ := http.NewRequest("GET", "http://"+g.front+"/ws/connect?name=laptop", nil)
		forged := fmt.Sprintf("203.0.113.%d", i+1)
		req.Header.Set("X-Forwarded-For", forged)
		req.Header.Set("X-Real-IP", forged)
		code, body := status(t, client, req)
		switch code {
		case http.StatusTooManyRequests:
			limited++
		case http.StatusUnauthorized:
		default:
			t.Fatalf("connect attempt: %d %s", code, body)
		}
	}
	return limited
}

// clientAddressesThroughProxy checks, with a reverse proxy in front of a
// gateway that trusts it, that the gateway sees each client's own address
// and none it made up: the request log shows the address the proxy saw,
// and rotating X-Forwarded-For does not get a client past the connect
// rate limit, while a client at another address has its own.
func clientAddressesThroughProxy(t *testing.T, g *gatewayEnv) {
	t.Helper()
	alice, bob := clientAt(t, "127.0.0.2"), clientAt(t, "127.0.0.3")
	req, _ := http.NewRequest("GET", "http://"+g.front+"/api/gateway/endpoints", nil)
	req.Header.Set("Authorization", "Bearer "+g.dash)
	req.Header.Set("X-Forwarded-For", "203.0.113.66")
	req.Header.Set("X-Real-IP", "203.0.113.66")
	req.Header.Set("X-Request-Id", "e2e-client-address")
	if code, body := status(t, alice, req); code != 200 {
		t.Fatalf("endpoints from 127.0.0.2: %d %s", code, body)
	}
	var line map[string]any
	testkit.WaitUntil(t, "the request's log line", func() bool {
		for _, l := range strings.Split(g.gw.logs.String(), "\n") {
			if strings.Contains(l, `"request_id":"e2e-client-address"`) {
				return json.Unmarshal([]byte(l), &line) == nil
			}
		}
		return false
	})
	if line["address"] != "127.0.0.2" {
		t.Fatalf("the gateway logged address %v for a client at 127.0.0.2 (which claimed 203.0.113.66): %v", line["address"], line)
	}
	// The default burst is 20 attempts.
	if limited := connectAttempts(t, g, alice, 30); limited < 5 {
		t.Fatalf("%d of 30 connect attempts with rotating X-Forwarded-For were rate limited", limited)
	}
	if limited := connectAttempts(t, g, bob, 1); limited != 0 {
		t.Fatal("another client behind the same proxy was rate limited too")
	}
}

// TestHostileHTTPClients runs what the reports did against the gateway
// binary, with a real connector behind it:
//
//   - 420 connections from one address, each sending login headers that
//     announce 100 bytes of body and then one byte, with the gateway's
//     descriptors limited to 400: /healthz kept failing for over a minute.
//     Now one address holds at most --max-conns-per-ip connections, the
//     rest are closed at once, and the held ones get 408 and are closed
//     within --body-timeout;
//   - Expect: 100-continue (curl adds it for bodies over 1 MB) on a thread
//     start for an unknown workflow and a CAS put: 200 for both, now the
//     connector's 404 and 201;
//   - the session cookie on a POST from another origin: started a thread,
//     now 403;
//   - rotating X-Forwarded-For with no proxy in front: never rate limited,
//     now the peer's address is the client's.
func TestHostileHTTPClients(t *testing.T) {
	t.Parallel()
	const bodyTimeout = 2 * time.Second
	attacker := loopbackDialer(t, "127.0.0.2")
	// The limit of the report this test reproduces.
	g := newGateway(t, nil, 400, "--body-timeout", bodyTimeout.String())
	g.connector("alpha", nil)

	// Expect: 100-continue.
	for _, c := range []struct {
		path, body string
		want       int
		contains   string
	}{
		{"/api/clients/alpha/threads", `{"workflow":"nope","prompt":"x"}`, 404, `"error":"workflow not found: nope"`},
		{"/api/clients/alpha/cas", `{"content":"` + strings.Repeat("x", 512<<10) + `"}`, 201, `"hash":`},
	} {
		req, _ := http.NewRequest("POST", "http://"+g.front+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+g.dash)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Expect", "100-continue")
		if code, body := status(t, g.client, req); code != c.want || !strings.Contains(body, c.contains) {
			t.Errorf("POST %s with Expect: 100-continue: %d %.200s, want %d", c.path, code, body, c.want)
		}
	}

	// The session cookie from another origin, then from the dashboard's.
	login, _ := http.NewRequest("POST", "http://"+g.front+"/api/gateway/login", strings.NewReader(`{"token":"`+g.dash+`"}`))
	login.Header.Set("Origin", "http://"+g.front)
	login.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := g.client.Do(login)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %d %v", resp.StatusCode, resp.Cookies())
	}
	cookie := resp.Cookies()[0]
	for origin, want := range map[string]int{"http://evil.example": 403, "http://" + g.front: 201} {
		req, _ := http.NewRequest("POST", "http://"+g.front+"/api/clients/alpha/cas", strings.NewReader(`{"content":"from `+origin+`"}`))
		req.AddCookie(cookie)
		req.Header.Set("Origin", origin)
		if code, body := status(t, g.client, req); code != want {
			t.Errorf("cookie POST from %s: %d %s, want %d", origin, code, body, want)
		}
	}

	// Rotating X-Forwarded-For from a client the gateway does not trust.
	if limited := connectAttempts(t, g, clientAt(t, "127.0.0.3"), 30); limited < 5 {
		t.Errorf("%d of 30 connect attempts with rotating X-Forwarded-For were rate limited", limited)
	}

	// Slow bodies.
	const slow = 420
	conns := make([]net.Conn, 0, slow)
	defer func() {
		for _, c := range conns {
			// Most were closed by the gateway already; this only
			// frees this process's end.
			_ = c.Close()
		}
	}()
	for range slow {
		c, err := attacker.Dial("tcp", g.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		// Written before the server may have closed it: a failed write is
		// a refused connection, which the read below sees too.
		_, _ = io.WriteString(c, "POST /api/gateway/login HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	}
	health := &http.Client{Timeout: 5 * time.Second}
	for i := range 3 {
		resp, err := health.Get("http://" + g.addr + "/healthz")
		if err != nil {
			t.Fatalf("/healthz (%d) while %d slow bodies hang: %v", i, slow, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("/healthz: %d", resp.StatusCode)
		}
	}
	timedOut, refused := 0, 0
	for _, c := range conns {
		if err := c.SetReadDeadline(time.Now().Add(10 * bodyTimeout)); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(c)
		switch got := string(b); {
		case errors.Is(err, os.ErrDeadlineExceeded):
			t.Fatalf("a slow body's connection is still open after %s (got %q)", 10*bodyTimeout, got)
		case got == "":
			refused++
		case strings.HasPrefix(got, "HTTP/1.1 408 ") && strings.Contains(got, "request body not received in time"):
			timedOut++
		default:
			t.Fatalf("a slow body got %q", got)
		}
	}
	t.Logf("%d slow bodies cut off with 408, %d connections refused over the per-address limit", timedOut, refused)
	if timedOut == 0 {
		t.Fatalf("%d timed out, %d refused", timedOut, refused)
	}
	// Still serving, and the connector is still there.
	if resp, body := g.do("GET", "/api/clients/alpha/workflows", ""); resp.StatusCode != 200 {
		t.Fatalf("after the flood: %d %s", resp.StatusCode, body)
	}
}
