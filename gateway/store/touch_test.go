package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/store"
)

// machinesByName lists the store's machines keyed by name.
func machinesByName(t *testing.T, s store.Store) map[string]store.Machine {
	t.Helper()
	ms, err := s.ListMachines(context.Background())
	if err != nil {
		t.Fatalf("ListMachines: %v", err)
	}
	out := make(map[string]store.Machine, len(ms))
	for _, m := range ms {
		out[m.Name] = m
	}
	return out
}

func TestTouchMachines(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		first := clk.Now()
		for _, name := range []string{"known", "idle"} {
			if _, err := s.TouchMachine(ctx, name); err != nil {
				t.Fatal(err)
			}
		}

		clk.Add(time.Minute)
		// A repeated name counts once (PostgreSQL refuses an upsert meeting
		// a row twice), and known and new names mix in one call.
		if err := s.TouchMachines(ctx, []string{"new-b", "known", "new-a", "known"}); err != nil {
			t.Fatalf("TouchMachines: %v", err)
		}
		ms := machinesByName(t, s)
		if len(ms) != 4 {
			t.Fatalf("machines = %+v, want known, idle, new-a, new-b", ms)
		}
		if m := ms["known"]; !m.FirstSeen.Equal(first) || !m.LastSeen.Equal(clk.Now()) {
			t.Errorf("known = %+v: first seen must stay %v, last seen become %v", m, first, clk.Now())
		}
		if m := ms["idle"]; !m.LastSeen.Equal(first) {
			t.Errorf("idle, not named, = %+v: last seen must stay %v", m, first)
		}
		for _, name := range []string{"new-a", "new-b"} {
			if m := ms[name]; !m.FirstSeen.Equal(clk.Now()) || !m.LastSeen.Equal(clk.Now()) {
				t.Errorf("%s = %+v: first and last seen must be %v", name, m, clk.Now())
			}
		}

		// Nothing to mark is no error and changes nothing.
		clk.Add(time.Minute)
		for _, names := range [][]string{nil, {}} {
			if err := s.TouchMachines(ctx, names); err != nil {
				t.Errorf("TouchMachines(%#v): %v", names, err)
			}
		}
		if got := machinesByName(t, s); fmt.Sprint(got) != fmt.Sprint(ms) {
			t.Errorf("an empty TouchMachines changed the machines:\n%v\nwas\n%v", got, ms)
		}
	})
}

func TestTouchMachinesRefusesBadNames(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		if _, err := s.TouchMachine(ctx, "known"); err != nil {
			t.Fatal(err)
		}
		before := machinesByName(t, s)
		clk.Add(time.Minute)
		for name, bad := range map[string]string{
			"empty":        "",
			"invalid utf8": "bad\xff",
			"nul":          "a\x00b",
		} {
			// The bad name comes last: the good ones before it must not be
			// written either.
			err := s.TouchMachines(ctx, []string{"known", "fresh", bad})
			if err == nil {
				t.Errorf("TouchMachines with a name that is %s succeeded", name)
			}
		}
		if got := machinesByName(t, s); fmt.Sprint(got) != fmt.Sprint(before) {
			t.Errorf("a refused TouchMachines changed the machines:\n%v\nwas\n%v", got, before)
		}
	})
}

// TestTouchMachinesMany marks more machines than one statement may name
// (the backends bound a statement's parameters), as a gateway with 10,000
// connectors does each round.
func TestTouchMachinesMany(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		const n = 10_000
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("machine-%05d", i)
		}
		if _, err := s.TouchMachine(ctx, names[n/2]); err != nil {
			t.Fatal(err)
		}
		first := clk.Now()
		clk.Add(time.Minute)
		if err := s.TouchMachines(ctx, names); err != nil {
			t.Fatalf("TouchMachines(%d names): %v", n, err)
		}
		ms := machinesByName(t, s)
		if len(ms) != n {
			t.Fatalf("%d machines stored, want %d", len(ms), n)
		}
		for _, name := range names {
			if m := ms[name]; !m.LastSeen.Equal(clk.Now()) {
				t.Fatalf("%s = %+v, want last seen %v", name, m, clk.Now())
			}
		}
		if m := ms[names[n/2]]; !m.FirstSeen.Equal(first) {
			t.Errorf("a known machine's first seen moved: %+v, want %v", m, first)
		}
	})
}

// BenchmarkTouchRound is the fleet's minute round at 2,000 connected
// machines, all known: "one-by-one" is a TouchMachine (a transaction)
// each, as every reader did on its own ticker; "batch" is the one
// TouchMachines the gateway makes now. Compare the two of one run.
func BenchmarkTouchRound(b *testing.B) {
	const n = 2000
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("machine-%05d", i)
	}
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			ctx := context.Background()
			s := open(b, be.cfg(b))
			if err := s.TouchMachines(ctx, names); err != nil {
				b.Fatal(err)
			}
			b.Run("one-by-one", func(b *testing.B) {
				for b.Loop() {
					for _, name := range names {
						if _, err := s.TouchMachine(ctx, name); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
			b.Run("batch", func(b *testing.B) {
				for b.Loop() {
					if err := s.TouchMachines(ctx, names); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
