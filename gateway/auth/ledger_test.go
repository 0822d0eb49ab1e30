package auth

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/testkit/pgtest"
)

// TestMain stops the PostgreSQL server the cross-process tests start.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func openStore(t *testing.T, cfg store.Config) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return st
}

// mint signs and records a token, as `token create` does.
func mint(t *testing.T, a *Authority, st store.Store, role, name string, ttl time.Duration, note string) (string, store.Token) {
	t.Helper()
	tok, rec, err := a.Mint(role, name, ttl, note)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateToken(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	return tok, rec
}

// wantRefusal fails unless err refuses for reason with status; it returns
// the refusal (as a value: errcheck would take a returned error for one to
// check).
func wantRefusal(t *testing.T, what string, err error, reason string, status int) Refusal {
	t.Helper()
	var r *Refusal
	if !errors.As(err, &r) || r.Reason != reason || Status(err) != status {
		t.Fatalf("%s: %v (reason %q, status %d), want reason %q, status %d", what, err, ReasonOf(err), Status(err), reason, status)
	}
	return *r
}

// Every way a credential is refused has its own reason, and no message
// quotes the credential.
func TestRefusalReasons(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, store.Config{DataDir: t.TempDir()})
	a := newAuthority(t, "")
	if err := a.Load(ctx, st); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a.now = func() time.Time { return now.Add(-2 * time.Hour) }
	expired, _ := mint(t, a, st, RoleDashboard, "", time.Hour, "old")
	a.now = func() time.Time { return now }
	dash, _ := mint(t, a, st, RoleDashboard, "", time.Hour, "ann")
	conn, _ := mint(t, a, st, RoleConnector, "alpha", 0, "")
	revoked, rec := mint(t, a, st, RoleDashboard, "", 0, "gone")
	if _, err := st.RevokeToken(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if err := a.Load(ctx, st); err != nil {
		t.Fatal(err)
	}
	unrecorded, _, err := a.Mint(RoleDashboard, "", time.Hour, "")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := New([]byte(strings.Repeat("x", 32)), "")
	other.now = a.now
	foreign, _, _ := other.Mint(RoleDashboard, "", time.Hour, "")

	for _, c := range []struct {
		what, cred, role, name, reason string
		status                         int
	}{
		{"nothing", "", RoleDashboard, "", ReasonMissing, 401},
		{"expired", expired, RoleDashboard, "", ReasonExpired, 401},
		{"revoked", revoked, RoleDashboard, "", ReasonRevoked, 401},
		{"connector token to log in", conn, RoleDashboard, "", ReasonWrongKind, 403},
		{"dashboard token to connect", dash, RoleConnector, "alpha", ReasonWrongKind, 403},
		{"another connector's token", conn, RoleConnector, "beta", ReasonWrongConnector, 403},
		{"garbage", "garbage-credential", RoleDashboard, "", ReasonMalformed, 401},
		{"truncated", dash[:len(dash)/2], RoleDashboard, "", ReasonMalformed, 401},
		{"none alg", "eyJhbGciOiJub25lIn0.eyJyb2xlIjoiZGFzaGJvYXJkIn0.", RoleDashboard, "", ReasonMalformed, 401},
		{"another key", foreign, RoleDashboard, "", ReasonBadSignature, 401},
		{"tampered", dash[:len(dash)-3] + "xyz", RoleDashboard, "", ReasonBadSignature, 401},
		{"not recorded", unrecorded, RoleDashboard, "", ReasonUnknown, 401},
	} {
		_, err := a.Verify(c.cred, c.role, c.name)
		r := wantRefusal(t, c.what, err, c.reason, c.status)
		if c.cred != "" && strings.Contains(r.Message, c.cred) {
			t.Errorf("%s: the message quotes the credential", c.what)
		}
	}
	_, err = a.Verify(expired, RoleDashboard, "")
	if r := wantRefusal(t, "expired", err, ReasonExpired, 401); !strings.Contains(r.Message, "2026-03-01T11:00:00Z") {
		t.Errorf("expired: %q does not say when", r.Message)
	}
	_, err = a.Verify(conn, RoleConnector, "beta")
	if r := wantRefusal(t, "wrong connector", err, ReasonWrongConnector, 403); !strings.Contains(r.Message, `"alpha"`) {
		t.Errorf("wrong connector: %q does not name the token's connector", r.Message)
	}
	p, err := a.Verify(dash, RoleDashboard, "")
	if err != nil || p.Note != "ann" || p.TokenID == "" {
		t.Fatalf("a live token: %+v, %v", p, err)
	}
}

// A token created after Load (by `token create` in another process) is
// looked up once, then known; one the store lacks stays unknown for a
// while without asking again.
func TestLookupOfNewTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, store.Config{DataDir: t.TempDir()})
	counting := &countingTokens{Tokens: st}
	a := newAuthority(t, "")
	if err := a.Load(ctx, counting); err != nil {
		t.Fatal(err)
	}
	tok, _ := mint(t, a, st, RoleConnector, "alpha", 0, "new")
	for range 3 {
		if p, err := a.Verify(tok, RoleConnector, "alpha"); err != nil || p.Note != "new" {
			t.Fatalf("new token: %+v, %v", p, err)
		}
		a.mu.Lock()
		clear(a.verified) // not the cache's answer: the ledger's
		a.mu.Unlock()
	}
	if counting.gets != 1 {
		t.Fatalf("%d lookups of one new token, want 1", counting.gets)
	}
	lost, _, _ := a.Mint(RoleConnector, "alpha", 0, "")
	for range 3 {
		_, err := a.Verify(lost, RoleConnector, "alpha")
		wantRefusal(t, "unrecorded", err, ReasonUnknown, 401)
	}
	if counting.gets != 2 {
		t.Fatalf("%d lookups after an unknown token asked 3 times, want 2", counting.gets)
	}
}

type countingTokens struct {
	Tokens
	gets int
}

func (c *countingTokens) GetToken(ctx context.Context, id string) (store.Token, error) {
	c.gets++
	return c.Tokens.GetToken(ctx, id)
}

// A token without an id (issued before tokens were recorded) is accepted
// with one warning, which never holds the token.
func TestTokensWithoutID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, store.Config{DataDir: t.TempDir()})
	a := newAuthority(t, "")
	var logs testkit.Buffer
	a.SetLogger(slog.New(slog.NewTextHandler(&logs, nil)))
	if err := a.Load(ctx, st); err != nil {
		t.Fatal(err)
	}
	old, _ := a.Issue(RoleConnector, "alpha", 0)
	for range 2 {
		a.mu.Lock()
		clear(a.verified)
		a.mu.Unlock()
		if p, err := a.Verify(old, RoleConnector, "alpha"); err != nil || p.TokenID != "" {
			t.Fatalf("token without an id: %+v, %v", p, err)
		}
	}
	got := logs.String()
	if strings.Count(got, "cannot be revoked") != 1 || strings.Contains(got, old) {
		t.Fatalf("want one warning without the token; logs:\n%s", got)
	}
}

// A revocation applied to the authority is refused at once, even for a
// token whose verification is cached.
func TestRevocationBeatsTheCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, store.Config{DataDir: t.TempDir()})
	a := newAuthority(t, "")
	if err := a.Load(ctx, st); err != nil {
		t.Fatal(err)
	}
	tok, rec := mint(t, a, st, RoleDashboard, "", time.Hour, "")
	if _, err := a.Verify(tok, RoleDashboard, ""); err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(ctx, store.Change{Kind: store.ChangeRevocation, IDs: []string{rec.ID}}); err != nil {
		t.Fatal(err)
	}
	_, err := a.Verify(tok, RoleDashboard, "")
	wantRefusal(t, "revoked while cached", err, ReasonRevoked, 401)
	// A reload that reads the store keeps it revoked (the store never
	// recorded this revocation: the set only grows).
	if err := a.Apply(ctx, store.Change{Kind: store.ChangeReload}); err != nil {
		t.Fatal(err)
	}
	_, err = a.Verify(tok, RoleDashboard, "")
	wantRefusal(t, "revoked after a reload", err, ReasonRevoked, 401)
}

// follow applies st's changes to a until the test ends, as the gateway
// does.
func follow(t *testing.T, a *Authority, st store.Store) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := st.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Load(ctx, st); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range ch {
			if err := a.Apply(ctx, c); err != nil && ctx.Err() == nil {
				t.Errorf("apply %+v: %v", c, err)
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// revocationReaches revokes through one store a token that an authority
// following another store (another process, another replica) has
// accepted; that authority must refuse it soon after.
func revocationReaches(t *testing.T, cfg store.Config) {
	ctx := context.Background()
	gateway := openStore(t, cfg)
	cli := openStore(t, cfg)
	a := newAuthority(t, "")
	follow(t, a, gateway)
	b := newAuthority(t, "")
	tok, rec := mint(t, b, cli, RoleConnector, "alpha", 0, "laptop")
	p, err := a.Verify(tok, RoleConnector, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	// What the token opened there ends there too.
	var opened ends
	a.Hold(p, opened.end)
	if _, err := cli.RevokeToken(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the revocation to reach the other authority", func() bool {
		_, err := a.Verify(tok, RoleConnector, "alpha")
		return ReasonOf(err) == ReasonRevoked
	})
	testkit.WaitUntil(t, "what the token opened to end", func() bool { return opened.n.Load() == 1 })
}

// SQLite: the CLI's store commits, the gateway's notices data_version.
func TestRevocationAcrossProcessesSQLite(t *testing.T) {
	t.Parallel()
	revocationReaches(t, store.Config{DataDir: t.TempDir()})
}

// PostgreSQL: the revocation arrives by NOTIFY.
func TestRevocationAcrossReplicasPostgres(t *testing.T) {
	t.Parallel()
	revocationReaches(t, store.Config{DatabaseURL: pgtest.URL(t)})
}

// Minted ids are distinct and the record says what the token says.
func TestMintRecord(t *testing.T) {
	t.Parallel()
	a := newAuthority(t, "")
	tok, rec, err := a.Mint(RoleConnector, "alpha", 90*time.Minute, "ci")
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Verify(tok, RoleConnector, "alpha")
	if err != nil || p.TokenID != rec.ID || len(rec.ID) != 26 {
		t.Fatalf("verify: %+v, %v; record %+v", p, err, rec)
	}
	if rec.Kind != store.KindConnector || rec.Name != "alpha" || rec.Note != "ci" || rec.ExpiresAt == nil || rec.ExpiresAt.Sub(rec.CreatedAt) > 90*time.Minute {
		t.Fatalf("record %+v", rec)
	}
	_, rec2, _ := a.Mint(RoleDashboard, "", 0, "")
	if rec2.ID == rec.ID || rec2.ExpiresAt != nil {
		t.Fatalf("second record %+v", rec2)
	}
	if _, _, err := a.Mint(RoleDashboard, "x", 0, ""); err == nil {
		t.Fatal("a dashboard token with a name")
	}
	if strings.ToLower(rec.ID) != rec.ID {
		t.Fatal("ids are lower case")
	}
}

// listFails is a store whose list cannot be read but whose lookups work.
type listFails struct{ Tokens }

func (listFails) ListTokens(context.Context, store.TokenFilter) ([]store.Token, error) {
	return nil, errors.New("database busy")
}

// A ledger that could not be loaded is still in force: a revoked token
// is looked up and refused, never let in for want of the list.
func TestLedgerInForceWhenLoadFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, store.Config{DataDir: t.TempDir()})
	a := newAuthority(t, "")
	tok, rec := mint(t, a, st, RoleConnector, "alpha", 0, "")
	if _, err := st.RevokeToken(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if err := a.Load(ctx, listFails{st}); err == nil {
		t.Fatal("Load reported no error")
	}
	_, err := a.Verify(tok, RoleConnector, "alpha")
	wantRefusal(t, "revoked, with no list loaded", err, ReasonRevoked, 401)
}
