package server

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/testkit/pgtest"
	"github.com/uncaged/workflow/shared/tunnel"
)

// storeBackends open, for a test, stores on one fresh database of each
// kind: every call of the returned func is another process's handle on
// the same database.
var storeBackends = []struct {
	name string
	open func(t *testing.T) func() store.Store
}{
	{"sqlite", func(t *testing.T) func() store.Store {
		cfg := store.Config{DataDir: t.TempDir()}
		return func() store.Store { return openStoreT(t, cfg) }
	}},
	{"postgres", func(t *testing.T) func() store.Store {
		cfg := store.Config{DatabaseURL: pgtest.URL(t)}
		return func() store.Store { return openStoreT(t, cfg) }
	}},
}

func openStoreT(t *testing.T, cfg store.Config) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// connectWith connects name with the credential cred (h2, no instance)
// serving h; the returned func disconnects it and waits for the end.
func (f *fixture) connectWith(name, cred string, h http.Handler) (disconnect func(), err error) {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ws, err := tunnel.Dial(ctx, f.srv.URL, name, cred, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = tunnel.Serve(ctx, ws, h, tunnel.ServeOptions{}) }()
	stop := func() { cancel(); <-done }
	f.t.Cleanup(stop)
	return stop, nil
}

// secretUses are every way the shared secret may use a name, each
// returning the status the gateway answered and its body.
var secretUses = []struct {
	name string
	use  func(f *fixture, name string) (int, string)
}{
	{"h2 connect", func(f *fixture, name string) (int, string) {
		_, err := f.connectWith(name, "shared-secret", echoAPI("intruder"))
		var rej *tunnel.RejectedError
		if errors.As(err, &rej) {
			return rej.Status, rej.Message
		}
		if err != nil {
			f.t.Fatal(err)
		}
		return http.StatusSwitchingProtocols, ""
	}},
	{"legacy connect", func(f *fixture, name string) (int, string) {
		ws, resp, err := f.dialLegacy(name, "shared-secret")
		if err == nil {
			f.t.Cleanup(func() { _ = ws.CloseNow() })
			return http.StatusSwitchingProtocols, ""
		}
		if resp == nil {
			f.t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}},
	{"register", func(f *fixture, name string) (int, string) {
		resp, body := f.do("POST", "/api/gateway/register", "", strings.NewReader(`{"name":"`+name+`","url":"ws://x","secret":"shared-secret","clientToken":"stolen"}`))
		return resp.StatusCode, body
	}},
	{"unregister", func(f *fixture, name string) (int, string) {
		resp, body := f.do("DELETE", "/api/gateway/register/"+name, "shared-secret", nil)
		return resp.StatusCode, body
	}},
}

// TestATokenBoundNameSurvivesARestart is the case: a connector
// token held alpha, went offline, and the gateway restarted. The shared
// secret can still neither connect (either protocol), register nor
// unregister alpha; the endpoints list and the machines list both show it
// offline and bound to a token; revoking alpha's tokens (from another
// process) releases it.
func TestATokenBoundNameSurvivesARestart(t *testing.T) {
	t.Parallel()
	for _, b := range storeBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			open := b.open(t)
			st := open()
			f := newStoreFixture(t, st, testRegistrationKey)
			tok, _ := record(t, f.auth, st, auth.RoleConnector, "alpha", 0)
			disconnect, err := f.connectWith("alpha", tok, echoAPI("alpha"))
			if err != nil {
				t.Fatal(err)
			}
			f.waitStatus("alpha", presence.Online)
			disconnect()
			f.waitStatus("alpha", presence.Offline)
			f.stop()

			f2 := newStoreFixture(t, open(), testRegistrationKey)
			for _, u := range secretUses {
				if code, body := u.use(f2, "alpha"); code != http.StatusConflict || !strings.Contains(body, "held by a token-bound connector") ||
					!strings.Contains(body, "token revoke --connector alpha") {
					t.Errorf("%s with the secret after the restart: %d %s", u.name, code, body)
				}
			}
			// One story: both lists know alpha, offline, bound.
			var eps []presence.Endpoint
			if resp, body := f2.do("GET", "/api/gateway/endpoints", f2.dash, nil); resp.StatusCode != 200 || json.Unmarshal([]byte(body), &eps) != nil ||
				len(eps) != 1 || eps[0].Name != "alpha" || eps[0].Status != presence.Offline || eps[0].Credential != presence.CredentialToken || eps[0].LastHeartbeat == 0 {
				t.Fatalf("endpoints after the restart: %d %s", resp.StatusCode, body)
			}
			var ms struct{ Machines []FleetMachine }
			if resp, body := f2.do("GET", "/api/gateway/machines", f2.dash, nil); resp.StatusCode != 200 || json.Unmarshal([]byte(body), &ms) != nil ||
				len(ms.Machines) != 1 || ms.Machines[0].Name != "alpha" || ms.Machines[0].Online || ms.Machines[0].Credential != presence.CredentialToken {
				t.Fatalf("machines after the restart: %d %s", resp.StatusCode, body)
			}
			// The token itself still connects.
			if _, err := f2.connectWith("alpha", tok, echoAPI("alpha")); err != nil {
				t.Fatalf("the token after the restart: %v", err)
			}
			f2.waitStatus("alpha", presence.Online)

			// `token revoke --connector alpha`, from another process,
			// releases the name everywhere.
			if _, err := open().RevokeConnectorTokens(context.Background(), "alpha"); err != nil {
				t.Fatal(err)
			}
			testkit.WaitUntil(t, "alpha to be released", func() bool { bound, _ := f2.gw.bindings.state("alpha"); return !bound })
			f2.waitStatus("alpha", presence.Offline) // the revoked token's tunnel is closed
			for _, u := range []int{2, 3, 0} {       // register, unregister, then connect
				if code, body := secretUses[u].use(f2, "alpha"); code >= 300 && code != http.StatusSwitchingProtocols {
					t.Errorf("%s with the secret once released: %d %s", secretUses[u].name, code, body)
				}
			}
		})
	}
}

// A name bound through one gateway is bound in every gateway on the
// store, though none of them ever saw its connector; and released in
// every one by a revocation.
func TestABindingReachesEveryGatewayOnTheStore(t *testing.T) {
	t.Parallel()
	open := storeBackends[1].open(t)
	st1 := open()
	f1 := newStoreFixture(t, st1, testRegistrationKey)
	f2 := newStoreFixture(t, open(), testRegistrationKey)
	tok, rec := record(t, f1.auth, st1, auth.RoleConnector, "alpha", 0)
	if _, err := f1.connectWith("alpha", tok, echoAPI("alpha")); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "f2 to learn alpha's binding", func() bool { bound, _ := f2.gw.bindings.state("alpha"); return bound })
	if _, _, known := f2.gw.presence.Get("alpha"); known {
		t.Fatal("f2 saw the connector")
	}
	if code, body := secretUses[0].use(f2, "alpha"); code != http.StatusConflict {
		t.Fatalf("the secret on f2: %d %s", code, body)
	}
	if _, err := st1.RevokeToken(context.Background(), rec.ID); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "f2 to learn alpha's release", func() bool { bound, _ := f2.gw.bindings.state("alpha"); return !bound })
	if code, body := secretUses[0].use(f2, "alpha"); code != http.StatusSwitchingProtocols {
		t.Fatalf("the secret on f2 once released: %d %s", code, body)
	}
}

// Until the bindings are read, nobody knows which names are a token's:
// the secret is refused every name (503, saying why), and a token cannot
// connect either while its binding cannot be saved. Once the store
// answers, both go on, without a restart.
func TestTheSecretWaitsForTheBindings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := openStoreT(t, store.Config{DataDir: dir})
	// Another program's connection, waiting for the gateway's writes (its
	// audit entries) as any writer beside it must.
	side, err := sql.Open("sqlite", "file:"+filepath.Join(dir, store.SQLiteFile)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = side.Close() }()
	if _, err := side.Exec(`ALTER TABLE name_bindings RENAME TO name_bindings_away`); err != nil {
		t.Fatal(err)
	}
	var logs testkit.Buffer
	f := newStoreFixture(t, st, testRegistrationKey, logged(&logs))
	for _, u := range secretUses {
		if code, body := u.use(f, "free"); code != http.StatusServiceUnavailable || !strings.Contains(body, "cannot tell yet whether this name belongs to a connector token") {
			t.Errorf("%s with the secret: %d %s", u.name, code, body)
		}
	}
	tok, _ := record(t, f.auth, st, auth.RoleConnector, "alpha", 0)
	var rej *tunnel.RejectedError
	if _, err := f.connectWith("alpha", tok, echoAPI("alpha")); !errors.As(err, &rej) || rej.Status != http.StatusServiceUnavailable || !strings.Contains(rej.Message, "binding") {
		t.Fatalf("a token while bindings cannot be saved: %v", err)
	}
	if !strings.Contains(logs.String(), "name bindings not loaded") {
		t.Fatalf("not logged:\n%s", logs.String())
	}
	if _, err := side.Exec(`ALTER TABLE name_bindings_away RENAME TO name_bindings`); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the bindings to be loaded", func() bool { _, known := f.gw.bindings.state("free"); return known })
	if code, body := secretUses[0].use(f, "free"); code != http.StatusSwitchingProtocols {
		t.Fatalf("the secret once loaded: %d %s", code, body)
	}
	if _, err := f.connectWith("alpha", tok, echoAPI("alpha")); err != nil {
		t.Fatalf("the token once loaded: %v", err)
	}
}

// Without a store the bindings live as long as the process: a name a
// token held stays closed to the secret while the connector is away.
func TestBindingsWithoutAStore(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	stop := f.connector("alpha", echoAPI("alpha"))
	stop()
	f.waitStatus("alpha", presence.Offline)
	for _, u := range secretUses {
		if code, body := u.use(f, "alpha"); code != http.StatusConflict {
			t.Errorf("%s: %d %s", u.name, code, body)
		}
	}
}
