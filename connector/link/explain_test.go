package link

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/tunnel"
)

func TestCheckGatewayRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                           "no gateway URL",
		"gw.example.com":             `has no scheme: write https://gw.example.com`,
		"localhost:8080":             `has no scheme: write https://localhost:8080`,
		"ftp://gw.example.com":       `unsupported scheme "ftp"`,
		"http://":                    "has no host",
		"http://[::1":                "does not parse",
		"https://gw.example.com":     "",
		"http://127.0.0.1:8080/base": "",
		"wss://gw.example.com":       "",
	} {
		err := CheckGateway(in)
		if want == "" {
			if err != nil {
				t.Errorf("%q: %v", in, err)
			}
			continue
		}
		var perm *PermanentError
		if !errors.As(err, &perm) || perm.Kind != KindConfig || !strings.Contains(perm.Message, want) {
			t.Errorf("%q: %v, want a config error with %q", in, err, want)
		}
	}
}

// fakeToken is an unsigned token carrying the claims connect reads.
func fakeToken(sub, role string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"HS256"}`)) + "." + enc([]byte(fmt.Sprintf(`{"sub":%q,"role":%q}`, sub, role))) + ".sig"
}

// runOnce runs a link against gateway until it gives up or prints a retry
// line, and returns its output and error.
func runOnce(t *testing.T, gateway, token string) (string, error) {
	t.Helper()
	out := &testkit.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Gateway: gateway, Name: "laptop", Token: token, Out: out, Handler: http.NotFoundHandler(),
			MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond})
	}()
	testkit.WaitUntil(t, "the link to give up or retry twice", func() bool {
		select {
		case err := <-done:
			done <- err
			return true
		default:
			return strings.Count(out.String(), "retrying in") >= 2
		}
	})
	cancel()
	return out.String(), <-done
}

// Each answer that can never become the tunnel ends the link with its
// kind and a message saying what to change.
func TestPermanentFailuresEndTheLink(t *testing.T) {
	t.Parallel()
	answer := func(status int, contentType, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", contentType)
			w.WriteHeader(status)
			fmt.Fprint(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	tlsSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	for _, c := range []struct {
		what, gateway, token string
		kind                 Kind
		want                 []string
	}{
		{"a web page", answer(200, "text/html", "<!doctype html><title>app</title>"), "", KindNotTunnel,
			[]string{"this URL answers with a web page, not the gateway's tunnel: check the path and that the proxy forwards WebSocket upgrades", "answered 200, text/html"}},
		{"a 404 from the gateway", answer(404, "application/json", `{"error":"not found"}`), "", KindNotTunnel,
			[]string{"no gateway tunnel at ws://", "/ws/connect?name=laptop: the gateway answers 404", "Check the path in --gateway"}},
		{"a 404 page", answer(404, "text/html", "<html>nope</html>"), "", KindNotTunnel, []string{"a web page answers 404"}},
		{"a proxy without upgrades", answer(426, "application/json", `{"error":"expected WebSocket upgrade"}`), "", KindNotTunnel,
			[]string{"does not forward WebSocket upgrades"}},
		{"a revoked token", answer(401, "application/json", `{"error":"token revoked","reason":"revoked"}`), fakeToken("laptop", "connector"), KindCredential,
			[]string{`gateway refused the connection (401): token revoked [revoked]; the token is for connector "laptop"; make a new one with ` + "`uncaged-gateway token create --connector laptop`"}},
		{"another connector's token", answer(403, "application/json", `{"error":"this token is for connector \"desk\", not \"laptop\"","reason":"wrong-connector"}`), fakeToken("desk", "connector"), KindCredential,
			[]string{"gateway refused the connection (403)", `[wrong-connector]; connect with --name desk, or use a token for "laptop"`}},
		{"a dashboard token", answer(403, "application/json", `{"error":"token not valid for this use","reason":"wrong-kind"}`), fakeToken("", "dashboard"), KindCredential,
			[]string{"this is a dashboard token, and connect needs a connector token"}},
		{"an expired token", answer(401, "application/json", `{"error":"token expired at 2026-01-02T03:04:05Z","reason":"expired"}`), fakeToken("laptop", "connector"), KindCredential,
			[]string{"token expired at 2026-01-02T03:04:05Z [expired]"}},
		{"a name held elsewhere", answer(409, "application/json", `{"error":"connector name \"laptop\" is held by instance x from 10.0.0.2 since 2026-01-02T03:04:05Z","reason":"instance-conflict"}`), "", KindNameTaken,
			[]string{`gateway refused the connection (409): connector name "laptop" is held by instance x from 10.0.0.2`}},
		{"a bad request", answer(400, "application/json", `{"error":"invalid connector name"}`), "", KindConfig, []string{"invalid connector name"}},
		{"an untrusted certificate", tlsSrv.URL, "", KindTLS, []string{"TLS verification of 127.0.0.1:", "certificate signed by unknown authority", "SSL_CERT_FILE"}},
		{"http to an https port", strings.Replace(tlsSrv.URL, "https://", "http://", 1), "", KindConfig, []string{"speaks HTTPS: use https://"}},
	} {
		out, err := runOnce(t, c.gateway, c.token)
		var perm *PermanentError
		if !errors.As(err, &perm) || perm.Kind != c.kind {
			t.Errorf("%s: %v, want kind %d; output:\n%s", c.what, err, c.kind, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(perm.Message, w) {
				t.Errorf("%s: %q lacks %q", c.what, perm.Message, w)
			}
		}
		if strings.Contains(out, perm.Message) {
			t.Errorf("%s: the link printed its error, which its caller reports:\n%s", c.what, out)
		}
		if strings.Contains(out, "retrying") {
			t.Errorf("%s: retried:\n%s", c.what, out)
		}
	}
}

// A gateway that is down, a TLS URL for a plain port and a proxy's 502
// are retried, and every retry line says why: the first in full, the
// repeats shortened.
func TestRetryLinesSayWhy(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	plain := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(plain.Close)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "bad gateway", http.StatusBadGateway) }))
	t.Cleanup(proxy.Close)
	for gateway, cause := range map[string]string{
		"http://" + down: "cannot reach the gateway at " + down + ": connection refused (is it running, and on that port?)",
		strings.Replace(plain.URL, "http://", "https://", 1): "does not speak TLS (an https:// URL for a plain-HTTP port?)",
		proxy.URL: "the proxy in front of the gateway answered 502",
	} {
		out, err := runOnce(t, gateway, "")
		if err != nil {
			t.Errorf("%s: gave up: %v", gateway, err)
			continue
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) < 2 || !strings.HasPrefix(lines[0], "retrying in ") || !strings.Contains(lines[0], cause) {
			t.Errorf("%s: first retry line %q lacks %q", gateway, lines[0], cause)
			continue
		}
		if !strings.Contains(lines[1], " (same: "+clip(lines[0][strings.Index(lines[0], ": ")+2:], sameCauseWidth)+")") {
			t.Errorf("%s: repeat %q", gateway, lines[1])
		}
	}
}

// A connector whose name another instance took over with --takeover
// stops; its dials carried its instance id.
func TestTakenOverStopsReconnecting(t *testing.T) {
	t.Parallel()
	seen := make(chan http.Header, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		ws, err := tunnel.Accept(w, r)
		if err != nil {
			return
		}
		c, err := tunnel.NewClient(ws)
		if err != nil {
			return
		}
		_ = c.Close("replaced by instance other from 10.0.0.9 (--takeover)")
	}))
	t.Cleanup(srv.Close)
	out := &testkit.Buffer{}
	err := Run(context.Background(), Options{Gateway: srv.URL, Name: "laptop", Out: out, Handler: http.NotFoundHandler(),
		Instance: "mine", Takeover: true, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond})
	var perm *PermanentError
	if !errors.As(err, &perm) || perm.Kind != KindTakenOver || !strings.Contains(perm.Message, "replaced by instance other from 10.0.0.9 (--takeover); not reconnecting") ||
		strings.Contains(out.String(), perm.Message) {
		t.Fatalf("%v\n%s", err, out)
	}
	h := <-seen
	if h.Get(tunnel.InstanceHeader) != "mine" || h.Get(tunnel.TakeoverHeader) != "1" {
		t.Fatalf("dialed with %v", h)
	}
}
