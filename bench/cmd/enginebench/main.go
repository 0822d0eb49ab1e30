// Command enginebench measures the engine and prints each figure next to a
// baseline measured in the same run:
//
//   - per-step overhead of a 200-step deterministic workflow run in goja,
//     against the same 200 steps from a workflow written in Go (what is left
//     is the JavaScript runtime's share; the rest is the store), with the
//     fsyncs of a step, and the Go workflow's steps against the same files
//     written one durable replace after another (the disk's baseline);
//   - esbuild's transform (first load of a bundle) against a cached load;
//   - `run` → first step written, with the engine host already up and with
//     a cold start, against starting the binary for `version`;
//   - the start of `version` and `workflow list` against a hello-world Go
//     binary, with the package initialisers that cost the most;
//   - steps/s of K = 1, 8 and 32 threads of one workflow together, as
//     ratios to K = 1, beside what the disk alone gives K writers of new
//     durable files, and a step's cost with 10,000 active threads (scale);
//   - step written → event at a client reading the live stream through a
//     real gateway, p50/p95/max, and the CPU of 100 open live streams on
//     idle threads, each against the polling fallback (live).
//
// Usage: go run ./bench/cmd/enginebench [-steps 200] [-runs 5] [-dir /dev/shm] [-only cli|steps|run|scale|live]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/uncaged/workflow/engine/atomicfile"
	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/executor"
	"github.com/uncaged/workflow/engine/jsrt"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/workflow"
	"github.com/uncaged/workflow/shared/testkit"
)

func main() {
	steps := flag.Int("steps", 200, "steps per thread")
	runs := flag.Int("runs", 5, "repetitions per figure (the median is reported)")
	dir := flag.String("dir", "", "parent of the work directory (default: the system temp dir; /dev/shm takes the disk out of the per-step figure)")
	only := flag.String("only", "", "run one section: cli (CLI start), steps (bundle load and per-step overhead), run (the real binary's `run`), scale (threads of one workflow together) or live (live-stream latency and idle CPU)")
	cliRounds := flag.Int("cli-rounds", 21, "rounds of the CLI start figures")
	flag.Parse()
	// Nothing it starts reads or writes the home of whoever runs it.
	defer testkit.PrivateHomeFor("enginebench")()
	switch *only {
	case "", "cli", "steps", "run", "scale", "live":
	default:
		check(fmt.Errorf("-only %q: want cli, steps, run, scale or live", *only))
	}
	work, err := os.MkdirTemp(*dir, "enginebench-")
	check(err)
	defer func() { check(os.RemoveAll(work)) }()

	src := bundleSource(*steps)
	fmt.Printf("enginebench: %s\n\n", work)
	if *only == "" || *only == "cli" {
		cliStart(work, *cliRounds)
	}
	if *only == "" || *only == "steps" {
		stepOverhead(work, src, *steps, *runs)
	}
	if *only == "" || *only == "run" {
		firstStepLatency(work, src, *runs)
	}
	if *only == "" || *only == "scale" {
		scale(work, *runs)
	}
	if *only == "" || *only == "live" {
		liveLatency(work)
	}
}

// stepOverhead prints the bundle load and per-step figures.
func stepOverhead(work, src string, steps, runs int) {

	fmt.Println("bundle load")
	uncached := median(runs, func(i int) {
		// A distinct source each time defeats the transform cache.
		_, err := jsrt.Load([]byte(src+fmt.Sprintf("\n// run %d\n", i)), "steps.esm.js", jsrt.Options{})
		check(err)
	})
	check2(jsrt.Load([]byte(src), "steps.esm.js", jsrt.Options{}))
	cached := median(runs, func(int) { check2(jsrt.Load([]byte(src), "steps.esm.js", jsrt.Options{})) })
	fmt.Printf("  load with esbuild transform   %10s\n  load, transform cached        %10s   (esbuild's share: %s)\n\n",
		uncached.Round(time.Microsecond), cached.Round(time.Microsecond), (uncached - cached).Round(time.Microsecond))

	fmt.Printf("per-step overhead, %d deterministic steps\n", steps)
	bundle, err := jsrt.Load([]byte(src), "steps.esm.js", jsrt.Options{})
	check(err)
	var goSyncs, jsSyncs float64
	// The baseline of the disk's speed, in the same run and interleaved
	// with the Go workflow's runs: the files of each step written one
	// durable replace after another (content node, state node,
	// threads.json; 6 fsyncs), as steps were written before their nodes
	// shared a directory sync and the index overlapped the state node. On
	// a busy machine an fsync's latency varies tenfold from minute to
	// minute; the ratio to this baseline does not.
	var goTimes, baseTimes []time.Duration
	for i := range runs {
		t0 := time.Now()
		goSyncs = runThread(filepath.Join(work, fmt.Sprintf("go-%d", i)), goSteps{n: steps}, steps)
		goTimes = append(goTimes, time.Since(t0))
		t0 = time.Now()
		durableWrites(filepath.Join(work, fmt.Sprintf("base-%d", i)), steps)
		baseTimes = append(baseTimes, time.Since(t0))
	}
	goTime, baseTime := medianOf(goTimes), medianOf(baseTimes)
	jsTime := median(runs, func(i int) { jsSyncs = runThread(filepath.Join(work, fmt.Sprintf("js-%d", i)), bundle, steps) })
	goStep, baseStep := goTime/time.Duration(steps), baseTime/time.Duration(steps)
	fmt.Printf("  fsyncs per step               %10.2f (Go), %.2f (JS)\n", goSyncs, jsSyncs)
	fmt.Printf("  a step's files, each durable  %10s per step (6 fsyncs in turn: the disk's baseline)\n", baseStep.Round(time.Microsecond))
	fmt.Printf("  Go workflow                   %10s  %8.0f steps/s   %s per step = %.2fx the baseline\n",
		goTime.Round(time.Microsecond), float64(steps)/goTime.Seconds(), goStep.Round(time.Microsecond), goStep.Seconds()/baseStep.Seconds())
	fmt.Printf("  JS bundle in goja             %10s  %8.0f steps/s   ratio %.2fx of the Go workflow's speed; goja's share per step %s\n\n",
		jsTime.Round(time.Microsecond), float64(steps)/jsTime.Seconds(), goTime.Seconds()/jsTime.Seconds(),
		((jsTime - goTime) / time.Duration(steps)).Round(time.Microsecond))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "enginebench:", err)
		os.Exit(1)
	}
}

func check2[T any](_ T, err error) { check(err) }

func median(n int, fn func(i int)) time.Duration {
	ds := make([]time.Duration, n)
	for i := range ds {
		t0 := time.Now()
		fn(i)
		ds[i] = time.Since(t0)
	}
	sort.Slice(ds, func(a, b int) bool { return ds[a] < ds[b] })
	return ds[n/2]
}

// bundleSource is a workflow whose one role runs until the thread has n steps.
func bundleSource(n int) string {
	return fmt.Sprintf(`import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";
const more = { name: "more", description: "fewer than %[1]d steps", check: (ctx) => ctx.steps.length < %[1]d };
const definition = {
  description: "%[1]d deterministic steps",
  roles: { step: { description: "counts", systemPrompt: "", schema: { type: "object" } } },
  table: { [START]: [{ condition: "FALLBACK", role: "step" }], step: [{ condition: more, role: "step" }, { condition: "FALLBACK", role: END }] },
};
export const descriptor = buildDescriptor(definition);
export const run = createWorkflow(definition, { adapter: () => async (ctx) => ({ meta: { n: ctx.steps.length + 1 }, childThread: null }), overrides: null });
`, n)
}

// durableWrites writes, steps times, a step's files as separate durable
// replaces: a content node, a state node naming it, threads.json naming
// the state.
func durableWrites(root string, steps int) {
	l := storage.Layout{Root: root}
	store := cas.Open(l.CASDir())
	for i := range steps {
		content, err := store.Put(fmt.Sprintf(`{"n":%d}`, i))
		check(err)
		state, err := store.Put(fmt.Sprintf("type: state\npayload:\n  role: step\n  content: %s\nrefs: []\n", content))
		check(err)
		check(threads.Upsert(l.BundleDir("BENCHAAAAAAAA"), "BENCH", threads.Entry{Head: state, Start: state, UpdatedAt: int64(i)}))
	}
}

// goSteps is the Go workflow: the same steps, produced by Go.
type goSteps struct{ n int }

func (g goSteps) Descriptor() workflow.Descriptor { return workflow.Descriptor{} }

func (g goSteps) Start(_ context.Context, tc workflow.ThreadContext, h workflow.Host) (workflow.Run, error) {
	return &goRun{n: g.n, h: h}, nil
}

type goRun struct {
	n, i int
	h    workflow.Host
}

func (r *goRun) Next(context.Context) (*workflow.Output, *workflow.Completion, error) {
	if r.i == r.n {
		return nil, &workflow.Completion{Summary: "completed: moderator returned END"}, nil
	}
	r.i++
	meta := canonyaml.Map{{Key: "n", Value: r.i}}
	b, _ := meta.MarshalJSON()
	h, err := r.h.CAS().Put(string(b))
	if err != nil {
		return nil, nil, err
	}
	return &workflow.Output{Role: "step", ContentHash: h, Meta: meta, Refs: []string{h}}, nil, nil
}

func (r *goRun) Close() error { return nil }

// runThread runs wf to its end on a fresh root and returns the fsyncs a
// role step made, on average.
func runThread(root string, wf workflow.Workflow, steps int) float64 {
	e := executor.New(storage.Layout{Root: root})
	t := executor.Thread{ID: "BENCH", BundleHash: "BENCHAAAAAAAA", WorkflowName: "steps", Prompt: "count"}
	check(e.Begin(&t))
	// OnStep runs after each published state, __end__ included: the
	// syncs between the first role step's and the last one's are those of
	// steps-1 whole steps.
	var marks []uint64
	env := executor.Env{OnStep: func(string) { marks = append(marks, atomicfile.Syncs()) }}
	res, err := e.Run(context.Background(), wf, t, env)
	check(err)
	if res.ReturnCode != 0 {
		check(fmt.Errorf("thread ended %d: %s", res.ReturnCode, res.Summary))
	}
	frames, err := threads.Walk(e.CAS, res.RootHash)
	check(err)
	if len(frames) != steps+1 {
		check(fmt.Errorf("%d frames, want %d", len(frames), steps+1))
	}
	return float64(marks[steps-1]-marks[0]) / float64(steps-1)
}

// firstStepLatency builds the binary and times `run` until the first step
// is in threads.json, with a cold and a warm engine host.
func firstStepLatency(work, src string, runs int) {
	fmt.Println("run → first step written (real binary)")
	bin := buildCLI(work)
	root := filepath.Join(work, "latency-root")
	bundle := filepath.Join(work, "steps.esm.js")
	check(os.WriteFile(bundle, []byte(src), 0o644))
	env := append(os.Environ(), storage.EnvRoot+"="+root)
	cli := func(args ...string) string {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.Output()
		check(err)
		return strings.TrimSpace(string(out))
	}
	cli("workflow", "add", "steps", bundle)
	firstStep := func() {
		id := cli("run", "steps")
		l := storage.Layout{Root: root}
		for {
			if r, err := threads.Resolve(l, id); err == nil && r.Head != r.Start {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	// stop ends the engine host, if one runs, and waits until its lock is
	// free, so the next run starts a host of its own. Only a host holding
	// its lock is signalled: the pid an exited one left may be another
	// process's by now. Its exit, not its reaping (the host is no child
	// of this process, and init may take seconds), is what counts.
	lock := filepath.Join(root, "engine.lock")
	stop := func() {
		if !atomicfile.Held(lock) {
			return
		}
		b, err := os.ReadFile(lock)
		check(err)
		var pid int
		check2(fmt.Sscan(string(b), &pid))
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			check(err)
		}
		for i := 0; atomicfile.Held(lock); i++ {
			if i == 2000 {
				check(fmt.Errorf("the engine host %d still runs 20 s after SIGTERM", pid))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	base := median(runs, func(int) { cli("version") })
	var colds []time.Duration
	for i := 0; i < runs; i++ {
		stop() // not timed: only the start that follows is
		t0 := time.Now()
		firstStep()
		colds = append(colds, time.Since(t0))
	}
	sort.Slice(colds, func(a, b int) bool { return colds[a] < colds[b] })
	cold := colds[len(colds)/2]
	warm := median(runs, func(int) { firstStep() })
	// A whole thread of two role steps, from `run` until it is in the
	// history: process start, the host's request, Begin, both steps and
	// the end, every write durable.
	two := filepath.Join(work, "two.esm.js")
	check(os.WriteFile(two, []byte(bundleSource(2)), 0o644))
	cli("workflow", "add", "two", two)
	completed := median(runs, func(int) {
		id := cli("run", "two")
		l := storage.Layout{Root: root}
		for {
			if r, err := threads.Resolve(l, id); err == nil && r.Source == threads.SourceHistory {
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
	stop()
	fmt.Printf("  `version` (process start)     %10s\n", base.Round(time.Microsecond))
	fmt.Printf("  cold (host started on demand) %10s   %.1fx of process start\n", cold.Round(time.Microsecond), cold.Seconds()/base.Seconds())
	fmt.Printf("  warm (host already up)        %10s   %.1fx of process start\n", warm.Round(time.Microsecond), warm.Seconds()/base.Seconds())
	fmt.Printf("run → a 2-step thread completed (real binary)\n  warm (host already up)        %10s   %.1fx of process start\n", completed.Round(time.Microsecond), completed.Seconds()/base.Seconds())
}
