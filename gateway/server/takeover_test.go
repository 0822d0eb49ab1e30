package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/internal/natstest"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/tunnel"
)

// logged returns a fixture option that logs to buf.
func logged(buf *testkit.Buffer) func(*Options) {
	return func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(buf, nil)) }
}

func TestTheSharedSecretCannotTakeATokenBoundName(t *testing.T) {
	t.Parallel()
	var logs testkit.Buffer
	f := newFixture(t, time.Hour, logged(&logs))
	stopAlpha := f.connector("alpha", echoAPI("alpha"))

	// Neither kind of connector takes alpha with the secret: 409, JSON.
	_, err := tunnel.Dial(context.Background(), f.srv.URL, "alpha", "shared-secret", nil)
	var rej *tunnel.RejectedError
	if !errors.As(err, &rej) || rej.Status != 409 || !strings.Contains(rej.Message, `"error":"connector name \"alpha\" is held by a token-bound connector`) {
		t.Fatalf("h2 with the secret: %v", err)
	}
	_, resp, err := f.dialLegacy("alpha", "shared-secret")
	if err == nil || resp == nil || resp.StatusCode != 409 {
		t.Fatalf("legacy with the secret: %v %v", resp, err)
	}
	body, _ := io.ReadAll(resp.Body)
	var answer map[string]string
	if json.Unmarshal(body, &answer) != nil || !strings.Contains(answer["error"], "held by a token-bound connector") {
		t.Fatalf("legacy refusal body %q", body)
	}
	// Another name's token is refused as before.
	other, _ := f.auth.Issue(auth.RoleConnector, "beta", time.Hour)
	if _, err := tunnel.Dial(context.Background(), f.srv.URL, "alpha", other, nil); !errors.As(err, &rej) || rej.Status != 403 {
		t.Fatalf("another name's token: %v", err)
	}
	// Every dashboard request still reaches alpha.
	for i := range 20 {
		if resp, body := f.do("GET", "/api/clients/alpha/workflows", f.dash, nil); resp.StatusCode != 200 || !strings.Contains(body, `"machine":"alpha"`) {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	if _, body := f.do("GET", "/api/gateway/endpoints", f.dash, nil); !strings.Contains(body, `"credential":"token"`) {
		t.Fatalf("endpoints: %s", body)
	}
	// Offline, the name is still alpha's.
	stopAlpha()
	f.waitStatus("alpha", presence.Offline)
	if _, err := tunnel.Dial(context.Background(), f.srv.URL, "alpha", "shared-secret", nil); !errors.As(err, &rej) || rej.Status != 409 {
		t.Fatalf("the secret while alpha is offline: %v", err)
	}
	if n := strings.Count(logs.String(), `msg="connector refused" connector=alpha reason="held by a token-bound connector"`); n != 3 {
		t.Fatalf("%d refusals logged:\n%s", n, logs.String())
	}
}

func TestATokenReplacesTheSharedSecret(t *testing.T) {
	t.Parallel()
	var logs testkit.Buffer
	f := newFixture(t, time.Hour, logged(&logs))
	ws, _, err := f.dialLegacy("beta", "shared-secret")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ws.CloseNow() }()
	f.waitStatus("beta", presence.Online)

	f.connector("beta", echoAPI("beta"))
	// The secret holder is told why it lost the name.
	ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitBound)
	defer cancel()
	if _, _, err := ws.Read(ctx); websocket.CloseStatus(err) != websocket.StatusGoingAway || !strings.Contains(err.Error(), "replaced by a newer connection for beta") {
		t.Fatalf("the secret holder read %v", err)
	}
	if resp, body := f.do("GET", "/api/clients/beta/x", f.dash, nil); resp.StatusCode != 200 || !strings.Contains(body, `"machine":"beta"`) {
		t.Fatalf("after the replacement: %d %s", resp.StatusCode, body)
	}
	// The old connection is closed before the replacement is logged, so the
	// line may still be on its way.
	testkit.WaitUntil(t, "the replacement to be logged", func() bool {
		return strings.Contains(logs.String(), `msg="connector replaced" connector=beta address=127.0.0.1 credential=token replaced_address=127.0.0.1 replaced_credential=secret`)
	})
	// And the secret cannot take it back.
	if _, resp, err := f.dialLegacy("beta", "shared-secret"); err == nil || resp == nil || resp.StatusCode != 409 {
		t.Fatalf("the secret again: %v %v", resp, err)
	}

	// The secret replaces the secret, and a token its own name, as before.
	for _, cred := range []string{"shared-secret", "shared-secret"} {
		ws, _, err := f.dialLegacy("gamma", cred)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = ws.CloseNow() }()
	}
	f.connector("delta", echoAPI("delta-1"))
	f.connector("delta", echoAPI("delta-2"))
	// delta is online from the first connection already: wait for the
	// second to take its requests.
	testkit.WaitUntil(t, "the second delta to take its requests", func() bool {
		resp, body := f.do("GET", "/api/clients/delta/x", f.dash, nil)
		return resp.StatusCode == 200 && strings.Contains(body, `"machine":"delta-2"`)
	})
	for _, want := range []string{"connector=gamma address=127.0.0.1 credential=secret replaced_address=127.0.0.1 replaced_credential=secret", "connector=delta address=127.0.0.1 credential=token replaced_address=127.0.0.1 replaced_credential=token"} {
		// The line is written just after the new connection takes over.
		testkit.WaitUntil(t, "the replacement to be logged: "+want, func() bool {
			return strings.Contains(logs.String(), `msg="connector replaced" `+want)
		})
	}
}

// TestTheSharedSecretCannotTakeATokenBoundNameOnAnotherReplica: in cluster
// mode the replica the secret dials refuses a name a token-bound connector
// holds on another replica, as the endpoints list shows it.
func TestTheSharedSecretCannotTakeATokenBoundNameOnAnotherReplica(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t)
	r1, r2 := newReplica(t, ns.ClientURL(), "r1"), newReplica(t, ns.ClientURL(), "r2")
	r1.connector("alpha", echoAPI("alpha"))
	r2.waitHeld("alpha", "r1")
	if e := r2.clusterEndpoints()["alpha"]; e.Credential != presence.CredentialToken {
		t.Fatalf("r2 lists alpha as %+v", e)
	}
	var rej *tunnel.RejectedError
	if _, err := tunnel.Dial(context.Background(), r2.srv.URL, "alpha", "shared-secret", nil); !errors.As(err, &rej) || rej.Status != 409 {
		t.Fatalf("the secret on r2: %v", err)
	}
	if resp, body := r2.do("GET", "/api/clients/alpha/x", r2.dash, nil); resp.StatusCode != 200 || !strings.Contains(body, `"machine":"alpha"`) {
		t.Fatalf("alpha via r2: %d %s", resp.StatusCode, body)
	}
}

func TestTheSharedSecretCannotRegisterATokenBoundName(t *testing.T) {
	t.Parallel()
	var logs testkit.Buffer
	f := newFixture(t, time.Hour, logged(&logs))
	f.connector("alpha", echoAPI("alpha"))
	f.waitStatus("alpha", presence.Online)

	// A registration names the client token sent with every request to
	// alpha: the secret must not replace it, nor remove it.
	resp, body := f.do("POST", "/api/gateway/register", "", strings.NewReader(`{"name":"alpha","url":"ws://x","secret":"shared-secret","clientToken":"stolen"}`))
	if resp.StatusCode != 409 || !strings.Contains(body, "held by a token-bound connector") {
		t.Fatalf("register with the secret: %d %s", resp.StatusCode, body)
	}
	if tok := f.gw.registrations.ClientToken("alpha"); tok != "" {
		t.Fatalf("the secret's client token was recorded: %q", tok)
	}
	if resp, body := f.do("DELETE", "/api/gateway/register/alpha", "shared-secret", nil); resp.StatusCode != 409 {
		t.Fatalf("unregister with the secret: %d %s", resp.StatusCode, body)
	}
	// alpha's own token registers, and the secret still registers free names.
	tok, _ := f.auth.Issue(auth.RoleConnector, "alpha", time.Hour)
	if resp, body := f.do("POST", "/api/gateway/register", "", strings.NewReader(`{"name":"alpha","url":"ws://x","secret":"`+tok+`","clientToken":"own"}`)); resp.StatusCode != 201 {
		t.Fatalf("register with alpha's token: %d %s", resp.StatusCode, body)
	}
	if resp, body := f.do("POST", "/api/gateway/register", "", strings.NewReader(`{"name":"free","url":"ws://x","secret":"shared-secret"}`)); resp.StatusCode != 201 {
		t.Fatalf("register a free name with the secret: %d %s", resp.StatusCode, body)
	}
	if !strings.Contains(logs.String(), `msg="registration refused" connector=alpha`) {
		t.Fatalf("refusal not logged:\n%s", logs.String())
	}
}
