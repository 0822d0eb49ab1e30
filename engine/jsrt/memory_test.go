package jsrt

import (
	"context"
	"errors"
	"fmt"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/membudget"
)

// budgetHost is a fake host that gives its runs a memory budget, as the
// executor does.
type budgetHost struct {
	*fakeHost
	budget int64
}

func (h budgetHost) MemoryBudget() int64 { return h.budget }

func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestRunawayFailsWithinItsBudget is the runaway role beside two others: one
// that keeps stepping (JavaScript running at the same time) and one that
// waits on a timer the whole time. The runaway fails with an error that
// says what happened and how to raise the budget; the others finish.
func TestRunawayFailsWithinItsBudget(t *testing.T) {
	// Serial: measures the process-wide heap.
	const budget = 16 << 20
	mem := loadTestdata(t, "memory.esm.js")
	h := newFakeHost(t)
	hog, err := mem.Start(context.Background(), threadFor(mem, "hog"), budgetHost{h, budget})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hog.Close() }()
	// A guard for the test itself: without a budget the runaway would grow
	// until the machine gives out; stop it well before.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base := liveHeap()
	go func() {
		for ctx.Err() == nil {
			if liveHeap() > base+10*budget {
				cancel()
			}
			time.Sleep(time.Millisecond)
		}
	}()
	hogErr := make(chan error, 1)
	go func() {
		_, _, err := hog.Next(ctx)
		hogErr <- err
	}()

	// The waiting bystander: a step that awaits a timer the runaway outlives.
	waiter := loadTestdata(t, "host_apis.esm.js")
	wh := newFakeHost(t)
	waiting, wcancel, werrc := startKillable(t, waiter, wh, threadFor(waiter, "timers"))
	_ = waiting
	_ = wcancel

	// The stepping bystander: ticks until the runaway has been dealt with.
	ticker := loadTestdata(t, "ticker.esm.js")
	th := newFakeHost(t)
	var got error
	steps := 0
	for got == nil {
		r, err := ticker.Start(context.Background(), threadFor(ticker, "20"), budgetHost{th, budget})
		if err != nil {
			t.Fatal(err)
		}
		for {
			_, done, err := r.Next(context.Background())
			if err != nil {
				t.Fatalf("the bystander failed: %v", err)
			}
			steps++
			if done != nil {
				break
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case got = <-hogErr:
		default:
		}
	}
	t.Logf("the bystander stepped %d times while the runaway ran", steps)
	if ctx.Err() != nil {
		t.Fatalf("the runaway was not stopped by its budget of %s (the heap grew by %d MiB): %v", membudget.FormatSize(budget), (liveHeap()-base)>>20, got)
	}
	var over *membudget.ExceededError
	if !errors.As(got, &over) || over.Budget != budget {
		t.Fatalf("runaway: %v", got)
	}
	for _, want := range []string{"workflow run failed: memory budget exceeded", "over its budget of 16MiB", "memoryBudget: 32MiB", "--memory-budget 32MiB"} {
		if !strings.Contains(got.Error(), want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	if logged := strings.Join(h.logged("ERROR"), "\n"); !strings.Contains(logged, "memory budget exceeded") {
		t.Errorf("the debug log lacks the reason: %q", logged)
	}
	// The runaway's run stays failed.
	if _, _, err := hog.Next(context.Background()); !errors.Is(err, membudget.ErrExceeded) {
		t.Fatalf("next Next: %v", err)
	}
	if err := <-werrc; err != nil {
		t.Fatalf("the waiting bystander failed: %v", err)
	}
}

// TestMemoryWithinBudgetIsLeftAlone: a role that keeps 12 MiB and makes
// eight times as much garbage finishes within a 32 MiB budget.
func TestMemoryWithinBudgetIsLeftAlone(t *testing.T) {
	// Serial: measures the process-wide heap.
	mem := loadTestdata(t, "memory.esm.js")
	h := newFakeHost(t)
	r, err := mem.Start(context.Background(), threadFor(mem, "hold 12 96"), budgetHost{h, 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	out, _, err := r.Next(context.Background())
	if err != nil {
		t.Fatalf("interrupted within its budget: %v", err)
	}
	if held, _ := out.Meta.Get("held"); fmt.Sprint(held) != "12" {
		t.Fatalf("meta = %v", out.Meta)
	}
	if _, done, err := r.Next(context.Background()); err != nil || done == nil || done.Summary != "held 12 MiB" {
		t.Fatalf("completion: %+v, %v", done, err)
	}
}

// TestBundleTopLevelHasABudget: the top level runs in the host at every
// load, so it is held to a budget too.
func TestBundleTopLevelHasABudget(t *testing.T) {
	// Serial: sets the process-wide membudget override.
	membudget.SetOverride(16 << 20)
	defer membudget.ClearOverride()
	src := `const keep = []; for (;;) keep.push(new Array(1 << 20));
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
export const run = async function* () {};`
	_, err := Load([]byte(src), "hog-at-load.esm.js", Options{ValidationTimeout: 20 * time.Second})
	if !errors.Is(err, membudget.ErrExceeded) || !strings.HasPrefix(err.Error(), "failed to import bundle: evaluating the top level: memory budget exceeded") {
		t.Fatalf("Load: %v", err)
	}
}
