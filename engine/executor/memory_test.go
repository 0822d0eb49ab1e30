package executor

import (
	"context"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/jsrt"
	"github.com/uncaged/workflow/engine/membudget"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/threads"
)

func loadBundle(t *testing.T, file string) *jsrt.Bundle {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "jsrt", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	b, err := jsrt.Load(src, file, jsrt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func setBudget(t *testing.T, e *Executor, budget string) {
	t.Helper()
	err := registry.Update(e.Layout.RegistryFile(), func(r *registry.Registry) error {
		return r.SetConfig(registry.Config{MaxDepth: 3, Providers: map[string]registry.Provider{}, Models: map[string]string{}, MemoryBudget: budget})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestRunawayThreadFailsWithTheBudgetOfWorkflowYAML: the budget comes from
// workflow.yaml; the runaway thread ends failed with a summary that says
// what happened and how to raise it, and a thread running beside it
// completes.
func TestRunawayThreadFailsWithTheBudgetOfWorkflowYAML(t *testing.T) {
	// Serial: measures the process-wide heap.
	const budget = 16 << 20
	e := newExec(t)
	setBudget(t, e, "16MiB")
	mem, ticker := loadBundle(t, "memory.esm.js"), loadBundle(t, "ticker.esm.js")

	// Without a budget the runaway grows until the machine gives out: the
	// test kills it well before.
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	base := heapObjects()
	go func() {
		for ctx.Err() == nil {
			if heapObjects() > base+10*budget {
				cancel(ErrKilled)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	hog := begin(t, e, "HOG")
	hog.Prompt = "hog"
	hogDone := make(chan Result, 1)
	go func() {
		res, err := e.Run(ctx, mem, hog, Env{})
		if err != nil {
			t.Error(err)
		}
		hogDone <- res
	}()
	// Bystanders step until the runaway has ended.
	var res Result
	for n := 0; ; n++ {
		th := begin(t, e, "TICK"+string(rune('A'+n%26))+strings.Repeat("X", n/26))
		th.Prompt = "30"
		got, err := e.Run(context.Background(), ticker, th, Env{})
		if err != nil || got.ReturnCode != 0 {
			t.Fatalf("bystander: %+v, %v", got, err)
		}
		select {
		case res = <-hogDone:
		default:
			continue
		}
		break
	}
	if ctx.Err() != nil {
		t.Fatalf("the runaway was not stopped by its budget of 16MiB: %+v", res)
	}
	const want = "failed: workflow run failed: memory budget exceeded: this thread's JavaScript held about "
	if res.ReturnCode != 1 || !strings.HasPrefix(res.Summary, want) || !strings.Contains(res.Summary, "over its budget of 16MiB") ||
		!strings.Contains(res.Summary, "memoryBudget: 32MiB") {
		t.Fatalf("runaway ended %+v", res)
	}
	if code, summary := endOf(t, e, res.RootHash); code != 1 || summary != res.Summary {
		t.Fatalf("end node %d %q", code, summary)
	}
	end, _ := threads.HeadEnd(e.CAS, res.RootHash)
	if threads.DeriveStatus(threads.SourceHistory, end, threads.NotExecuting) != threads.StatusFailed {
		t.Fatal("status not failed")
	}
	if log := debugLog(t, e, "HOG"); !strings.Contains(log, "memory budget exceeded") {
		t.Fatalf("debug log:\n%s", log)
	}
}

// TestHostFlagOverridesWorkflowYAML: the host's --memory-budget wins over
// workflow.yaml for every thread.
func TestHostFlagOverridesWorkflowYAML(t *testing.T) {
	// Serial: sets the process-wide membudget override.
	e := newExec(t)
	setBudget(t, e, "8MiB")
	mem := loadBundle(t, "memory.esm.js")
	budgetOf := func(id string) string {
		th := begin(t, e, id)
		th.Prompt = "hog"
		res, err := e.Run(context.Background(), mem, th, Env{})
		if err != nil {
			t.Fatal(err)
		}
		_, after, ok := strings.Cut(res.Summary, "over its budget of ")
		if res.ReturnCode != 1 || !ok {
			t.Fatalf("%s ended %+v", id, res)
		}
		return strings.SplitN(after, ".", 2)[0]
	}
	if got := budgetOf("CONFIGURED"); got != "8MiB" {
		t.Fatalf("workflow.yaml says 8MiB, the thread had %s", got)
	}
	membudget.SetOverride(12 << 20)
	defer membudget.ClearOverride()
	if got := budgetOf("OVERRIDDEN"); got != "12MiB" {
		t.Fatalf("the host says 12MiB, the thread had %s", got)
	}
}
