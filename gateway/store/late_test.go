package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/testkit/pgtest"
)

// What the gateway writes late — queued through a database outage, and
// maybe written twice when an answer was lost or a spill file replayed —
// is in the store once, and what it says about a machine's times does not
// go back.

// An audit entry with a key is appended once however often it is
// written; entries without one (the token commands') are each their own.
func TestAnAuditEntryWithAKeyIsAppendedOnce(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		e := store.AuditEntry{Action: "kill", Machine: "laptop", Target: "T1", Status: 200, Time: clk.Now(), Key: "k-1"}
		first, err := s.AppendAudit(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			again, err := s.AppendAudit(ctx, e)
			if err != nil || again != first {
				t.Fatalf("written again: id %d (first %d), %v", again, first, err)
			}
		}
		for range 2 {
			if _, err := s.AppendAudit(ctx, store.AuditEntry{Action: "token-create", Target: "id"}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.AppendAudit(ctx, store.AuditEntry{Action: "kill", Key: strings.Repeat("k", store.MaxAuditKey+1)}); err == nil {
			t.Fatal("a key past its bound was taken")
		}
		page, err := s.ListAudit(ctx, store.AuditQuery{})
		if err != nil || page.Total != 3 {
			t.Fatalf("%d entries, want 3: %+v %v", page.Total, page.Entries, err)
		}
	})
}

// Sightings written late never move a machine's last seen back, nor its
// first seen forward, whichever method wrote them and in whatever order.
func TestAMachinesTimesNeverGoBack(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		start := clk.Now()
		clk.Add(time.Hour)
		if _, err := s.TouchMachine(ctx, "laptop"); err != nil {
			t.Fatal(err)
		}
		// Heard during an outage an hour ago, written now.
		if err := s.TouchMachinesAt(ctx, []string{"laptop", "gone"}, start); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SyncThreadsAt(ctx, "laptop", start.Add(time.Minute), []store.Thread{thread("T1", start)}); err != nil {
			t.Fatal(err)
		}
		ms := machinesByName(t, s)
		if m := ms["laptop"]; !m.LastSeen.Equal(clk.Now()) || !m.FirstSeen.Equal(start) {
			t.Errorf("laptop = %+v: last seen must stay %v, first seen become %v", m, clk.Now(), start)
		}
		if m := ms["gone"]; !m.LastSeen.Equal(start) || !m.FirstSeen.Equal(start) {
			t.Errorf("gone = %+v: first and last seen must be when it was heard, %v", m, start)
		}
		th, err := s.GetThread(ctx, "laptop", "T1")
		if err != nil || !th.UpdatedAt.Equal(start) {
			t.Fatalf("a thread heard late: %+v %v", th, err)
		}
		// Its times are bounded from when it was heard: a thread an hour
		// ahead of that is corrected, though not ahead of now.
		res, err := s.SyncThreadsAt(ctx, "laptop", start, []store.Thread{thread("T2", start.Add(store.MaxClockSkew+time.Hour))})
		if err != nil || res.Cut[store.FieldUpdatedAt] == 0 {
			t.Fatalf("a time ahead of when it was heard: %+v %v", res, err)
		}
	})
}

// What a store's methods answer while its PostgreSQL server is stopped
// says so (Unavailable), both for the first statement on a session the
// shutdown ended and for a new connection the stopped server refuses;
// the database's answers to what was asked (a missing token, a bad
// entry) do not.
func TestUnavailableTellsAnOutageFromARefusal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.NewServer(t)
	s := open(t, store.Config{DatabaseURL: srv.URL(t)})
	if _, err := s.GetToken(ctx, "nobody"); !errors.Is(err, store.ErrNotFound) || store.Unavailable(err) {
		t.Fatalf("a missing token: %v", err)
	}
	if _, err := s.AppendAudit(ctx, store.AuditEntry{}); err == nil || store.Unavailable(err) {
		t.Fatalf("an entry without an action: %v", err)
	}
	if store.Unavailable(nil) || !store.Unavailable(fmt.Errorf("x: %w", store.ErrUnreachable)) {
		t.Fatal("nil, or ErrUnreachable")
	}
	srv.Stop(t)
	for i, call := range []func() error{
		func() error { _, err := s.AppendAudit(ctx, store.AuditEntry{Action: "kill", Key: "k"}); return err },
		func() error { _, err := s.SearchThreads(ctx, store.ThreadQuery{}); return err },
		func() error { return s.TouchMachinesAt(ctx, []string{"laptop"}, time.Now()) },
		func() error {
			_, err := s.SyncThreadsAt(ctx, "laptop", time.Now(), []store.Thread{thread("T", time.Now())})
			return err
		},
		func() error { _, err := s.ListMachines(ctx); return err },
		func() error {
			_, err := s.ThreadStats(ctx, store.StatsQuery{By: store.StatsByMachine, Since: time.Now().Add(-time.Hour), Until: time.Now()})
			return err
		},
		func() error { _, err := s.ListAudit(ctx, store.AuditQuery{}); return err },
		func() error { return s.Check(ctx) },
	} {
		err := call()
		if err == nil || !store.Unavailable(err) {
			t.Errorf("call %d with the server stopped: %v, not unavailable", i, err)
		}
	}
	srv.Start(t)
	if _, err := s.AppendAudit(ctx, store.AuditEntry{Action: "kill", Key: "k"}); err != nil {
		t.Fatalf("after the server came back: %v", err)
	}
}
