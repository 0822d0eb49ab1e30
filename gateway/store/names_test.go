package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/uncaged/workflow/gateway/store"
)

// bound says whether name has a binding, failing the test on a store
// error.
func bound(t *testing.T, s store.Store, name string) bool {
	t.Helper()
	_, err := s.NameBinding(context.Background(), name)
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

func connectorToken(t *testing.T, s store.Store, id, name string) {
	t.Helper()
	if err := s.CreateToken(context.Background(), store.Token{ID: id, Kind: store.KindConnector, Name: name}); err != nil {
		t.Fatal(err)
	}
}

// A binding is made only by a live connector token for the name, is kept
// across a reopen, and goes only when the name's last unrevoked
// connector token is revoked, whichever revocation does it.
func TestNameBindings(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		connectorToken(t, s, "a1", "alpha")
		if err := s.CreateToken(ctx, store.Token{ID: "d1", Kind: store.KindDashboard}); err != nil {
			t.Fatal(err)
		}
		connectorToken(t, s, "b1", "beta")

		// What binds nothing: each leaves alpha free.
		for _, c := range []struct{ why, name, token string }{
			{"unknown token", "alpha", "nobody"},
			{"a dashboard token", "alpha", "d1"},
			{"another name's token", "alpha", "b1"},
		} {
			if created, err := s.BindName(ctx, c.name, c.token); !errors.Is(err, store.ErrNotFound) || created {
				t.Errorf("%s: %v %v", c.why, created, err)
			}
		}
		if _, err := s.BindName(ctx, "", "a1"); err == nil {
			t.Error("an empty name was bound")
		}
		if bound(t, s, "alpha") {
			t.Fatal("alpha bound by a refused BindName")
		}

		if created, err := s.BindName(ctx, "alpha", "a1"); err != nil || !created {
			t.Fatalf("first bind: %v %v", created, err)
		}
		if created, err := s.BindName(ctx, "alpha", "a1"); err != nil || created {
			t.Fatalf("second bind: %v %v", created, err)
		}
		b, err := s.NameBinding(ctx, "alpha")
		if err != nil || b.TokenID != "a1" || !b.BoundAt.Equal(clk.Now()) {
			t.Fatalf("binding %+v %v", b, err)
		}
		// A token from before tokens had ids binds unchecked.
		if created, err := s.BindName(ctx, "old", ""); err != nil || !created {
			t.Fatalf("id-less bind: %v %v", created, err)
		}
		list, err := s.ListNameBindings(ctx)
		if err != nil || len(list) != 2 || list[0].Name != "alpha" || list[1].Name != "old" {
			t.Fatalf("list %+v %v", list, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = open(t, cfg)
		if !bound(t, s, "alpha") || !bound(t, s, "old") {
			t.Fatal("bindings lost on reopen")
		}

		// A revoked token binds nothing.
		if _, err := s.RevokeToken(ctx, "b1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.BindName(ctx, "beta", "b1"); !errors.Is(err, store.ErrNotFound) || bound(t, s, "beta") {
			t.Fatalf("a revoked token bound beta: %v", err)
		}
	})
}

// Every way of revoking a name's last token releases it, and only that.
func TestRevocationReleasesANameOnlyWithItsLastToken(t *testing.T) {
	revocations := []struct {
		name string
		// revoke revokes every token of "alpha" (a1, a2) in its way.
		revoke func(s store.Store) error
	}{
		{"one by one", func(s store.Store) error {
			for _, id := range []string{"a1", "a2"} {
				if _, err := s.RevokeToken(context.Background(), id); err != nil {
					return err
				}
			}
			return nil
		}},
		{"by connector", func(s store.Store) error {
			_, err := s.RevokeConnectorTokens(context.Background(), "alpha")
			return err
		}},
		{"by kind", func(s store.Store) error {
			_, err := s.RevokeKind(context.Background(), store.KindConnector)
			return err
		}},
	}
	ctx := context.Background()
	for _, b := range backends {
		for _, r := range revocations {
			t.Run(b.name+"/"+r.name, func(t *testing.T) {
				s := open(t, b.cfg(t))
				connectorToken(t, s, "a1", "alpha")
				connectorToken(t, s, "a2", "alpha")
				connectorToken(t, s, "g1", "gamma")
				if err := s.CreateToken(ctx, store.Token{ID: "d1", Kind: store.KindDashboard}); err != nil {
					t.Fatal(err)
				}
				for _, n := range []string{"alpha", "gamma"} {
					if _, err := s.BindName(ctx, n, map[string]string{"alpha": "a1", "gamma": "g1"}[n]); err != nil {
						t.Fatal(err)
					}
				}
				// Revoking another name's, a dashboard's, or one of two
				// tokens keeps alpha bound.
				if _, err := s.RevokeKind(ctx, store.KindDashboard); err != nil {
					t.Fatal(err)
				}
				if _, err := s.RevokeToken(ctx, "a2"); err != nil {
					t.Fatal(err)
				}
				if !bound(t, s, "alpha") {
					t.Fatal("alpha released while a1 is live")
				}
				if err := r.revoke(s); err != nil && !errors.Is(err, store.ErrNotFound) {
					t.Fatal(err)
				}
				if bound(t, s, "alpha") {
					t.Fatal("alpha still bound with every token revoked")
				}
				if wantGamma := r.name != "by kind"; bound(t, s, "gamma") != wantGamma {
					t.Fatalf("gamma bound: %v, want %v", !wantGamma, wantGamma)
				}
			})
		}
	}
}

// A connection binding a name with a token races the token's revocation:
// whichever commits first, no binding outlives the revocation.
func TestABindingNeverOutlivesItsTokensRevocation(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		// Another process, as a `token revoke` beside the gateway.
		other := open(t, cfg)
		for i := range 40 {
			name, id := fmt.Sprintf("race-%d", i), fmt.Sprintf("t%d", i)
			connectorToken(t, s, id, name)
			var wg sync.WaitGroup
			wg.Go(func() {
				if _, err := s.BindName(ctx, name, id); err != nil && !errors.Is(err, store.ErrNotFound) {
					t.Error(err)
				}
			})
			wg.Go(func() {
				if _, err := other.RevokeToken(ctx, id); err != nil {
					t.Error(err)
				}
			})
			wg.Wait()
			if bound(t, s, name) {
				t.Fatalf("round %d: %s bound after its only token was revoked", i, name)
			}
		}
	})
}

// Binding a name is announced to every subscriber; its release comes
// with the revocation.
func TestBindingIsNotified(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := open(t, cfg)
		ch, err := s.Subscribe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		connectorToken(t, s, "a1", "alpha")
		if _, err := s.BindName(ctx, "alpha", "a1"); err != nil {
			t.Fatal(err)
		}
		if c := recv(t, ch); c.Kind != store.ChangeBinding || len(c.IDs) != 1 || c.IDs[0] != "alpha" {
			t.Fatalf("got %+v", c)
		}
		// A bind that changes nothing says nothing: the next change is the
		// revocation.
		if _, err := s.BindName(ctx, "alpha", "a1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RevokeToken(ctx, "a1"); err != nil {
			t.Fatal(err)
		}
		if c := recv(t, ch); c.Kind != store.ChangeRevocation {
			t.Fatalf("got %+v", c)
		}
	})
}
