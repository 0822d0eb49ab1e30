// Command storebench measures the storage layer on synthetic data and prints
// each figure next to a baseline measured in the same run, because absolute
// times on shared machines are not evidence:
//
//   - CAS put/get per second vs plain os.WriteFile/os.ReadFile of the same bytes;
//   - `thread list` over N threads vs only reading the index files' bytes;
//   - `cas gc` over M blobs vs only listing the directory and reading every blob once.
//
// Usage: go run ./bench/cmd/storebench -threads 100000 -blobs 1000000
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/uncaged/workflow/connector/cli"
	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/gc"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

func main() {
	nThreads := flag.Int("threads", 100000, "threads for the list benchmark")
	nBlobs := flag.Int("blobs", 1000000, "CAS blobs for the GC benchmark")
	nPut := flag.Int("puts", 3000, "blobs for the put/get benchmark")
	dir := flag.String("dir", "", "work directory (default: a temporary one, removed afterwards)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f := must(os.Create(*cpuProfile))
		must(0, pprof.StartCPUProfile(f))
		defer pprof.StopCPUProfile()
	}

	work := *dir
	if work == "" {
		var err error
		if work, err = os.MkdirTemp("", "storebench-"); err != nil {
			fail(err)
		}
		defer func() { must(0, os.RemoveAll(work)) }()
	}
	fmt.Printf("storebench: %d CPUs, %s, work dir %s\n\n", runtime.NumCPU(), runtime.Version(), work)
	benchPutGet(filepath.Join(work, "putget"), *nPut)
	benchThreadList(filepath.Join(work, "list"), *nThreads)
	benchGC(filepath.Join(work, "gc"), *nBlobs)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "storebench:", err)
	os.Exit(1)
}

func must[T any](v T, err error) T {
	if err != nil {
		fail(err)
	}
	return v
}

func report(name string, ours, base time.Duration, n int, unit string) {
	fmt.Printf("  %-34s %10s  (%9.0f %s/s)   baseline %10s   ratio %.2fx of baseline speed\n",
		name, ours.Round(time.Microsecond), float64(n)/ours.Seconds(), unit, base.Round(time.Microsecond), base.Seconds()/ours.Seconds())
}

// benchPutGet compares the CAS (hash, atomic temp+fsync+rename, dir sync)
// with writing and reading the same bytes naively.
func benchPutGet(root string, n int) {
	fmt.Printf("CAS put/get, %d distinct content nodes\n", n)
	payloads := make([][]byte, n)
	for i := range payloads {
		payloads[i] = must(node.NewContent(fmt.Sprintf("step %d output\n%s", i, strings.Repeat("lorem ipsum ", i%40)), nil).Marshal())
	}
	baseDir := filepath.Join(root, "plain")
	must(0, os.MkdirAll(baseDir, 0o755))
	t0 := time.Now()
	for i, b := range payloads {
		if err := os.WriteFile(filepath.Join(baseDir, fmt.Sprintf("%d.txt", i)), b, 0o644); err != nil {
			fail(err)
		}
	}
	baseWrite := time.Since(t0)

	store := cas.Open(filepath.Join(root, "cas"))
	hashes := make([]string, n)
	t0 = time.Now()
	for i, b := range payloads {
		hashes[i] = must(store.PutBytes(b))
	}
	put := time.Since(t0)
	report("put (new blob, durable)", put, baseWrite, n, "puts")

	t0 = time.Now()
	for _, b := range payloads {
		must(store.PutBytes(b))
	}
	report("put (already stored)", time.Since(t0), baseWrite, n, "puts")

	t0 = time.Now()
	for i := range payloads {
		must(os.ReadFile(filepath.Join(baseDir, fmt.Sprintf("%d.txt", i))))
	}
	baseRead := time.Since(t0)
	t0 = time.Now()
	for _, h := range hashes {
		must(store.Get(h))
	}
	report("get", time.Since(t0), baseRead, n, "gets")
	t0 = time.Now()
	for _, h := range hashes {
		must(store.GetNode(h))
	}
	report("get + parse node", time.Since(t0), baseRead, n, "gets")
	fmt.Println()
}

// benchThreadList builds a root with n threads over 20 workflows (a third
// active, the rest finished over 30 days) and times `thread list`.
func benchThreadList(root string, n int) {
	fmt.Printf("thread list, %d threads in 20 bundles (target <= 200 ms)\n", n)
	l := storage.Layout{Root: root}
	rng := rand.New(rand.NewSource(1))
	reg := registry.New()
	var bundles []string
	for b := 0; b < 20; b++ {
		h := ids.HashString(fmt.Sprintf("bundle %d", b))
		bundles = append(bundles, h)
		reg.Register(fmt.Sprintf("flow-%d", b), h, 1)
	}
	must(0, reg.Save(l.RegistryFile()))
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	active := make(map[string]threads.Index)
	history := make(map[string]*bytes.Buffer)
	casDir := l.CASDir()
	must(0, os.MkdirAll(casDir, 0o755))
	for i := 0; i < n; i++ {
		b := bundles[rng.Intn(len(bundles))]
		id := ids.NewThreadID(now.Add(time.Duration(i) * time.Second))
		at := now.Add(-time.Duration(rng.Intn(30*24)) * time.Hour).UnixMilli()
		// Every head and start is a real node, as in a real root: a list
		// reports a thread whose head is not in the CAS as damaged.
		head, start := threadNodes(casDir, id, i%3 != 0)
		if i%3 == 0 {
			if active[b] == nil {
				active[b] = threads.Index{}
			}
			active[b][id] = threads.Entry{Head: head, Start: start, UpdatedAt: at}
			continue
		}
		key := b + "/" + time.UnixMilli(at).UTC().Format("2006-01-02")
		if history[key] == nil {
			history[key] = &bytes.Buffer{}
		}
		fmt.Fprintf(history[key], `{"threadId":%q,"head":%q,"start":%q,"completedAt":%d}`+"\n", id, head, start, at)
	}
	for b, idx := range active {
		must(0, threads.Modify(l.BundleDir(b), func(cur threads.Index) (bool, error) {
			for id, e := range idx {
				cur[id] = e
			}
			return true, nil
		}))
	}
	for key, buf := range history {
		b, day, _ := strings.Cut(key, "/")
		p := filepath.Join(threads.HistoryDir(l.BundleDir(b)), day+".jsonl")
		must(0, os.MkdirAll(filepath.Dir(p), 0o755))
		must(0, os.WriteFile(p, buf.Bytes(), 0o644))
	}

	// Baseline: only reading every index file's bytes.
	base := timeMedian(5, func() {
		must(0, filepath.WalkDir(l.BundlesDir(), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".json") || strings.HasSuffix(p, ".jsonl")) {
				must(os.ReadFile(p))
			}
			return err
		}))
	})
	env := cli.Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string {
		if k == storage.EnvRoot {
			return root
		}
		return ""
	}}
	ours := timeMedian(5, func() {
		if code := cli.Run([]string{"thread", "list"}, env); code != 0 {
			fail(fmt.Errorf("thread list exited %d", code))
		}
	})
	report("thread list (median of 5)", ours, base, n, "threads")
	fmt.Println()
}

// benchGC builds a CAS of about n blobs — thread chains of 10 to 40 steps,
// a tenth of them from removed threads (garbage) — and times one collection.
func benchGC(root string, n int) {
	fmt.Printf("cas gc, ~%d blobs (target <= 10 s at 1M)\n", n)
	l := storage.Layout{Root: root}
	casDir := l.CASDir()
	must(0, os.MkdirAll(casDir, 0o755))
	put := func(nd node.Node) string {
		b := must(nd.Marshal())
		h := ids.HashBytes(b)
		must(0, os.WriteFile(filepath.Join(casDir, h+".txt"), b, 0o644))
		return h
	}
	rng := rand.New(rand.NewSource(2))
	blobs, garbage, thread := 0, 0, 0
	idx := threads.Index{}
	t0 := time.Now()
	for blobs < n {
		id := fmt.Sprintf("T%08d", thread)
		thread++
		prompt := put(node.NewContent("prompt of "+id, nil))
		start := put(node.NewStart(node.StartPayload{Name: "flow", Hash: "BENCH", Depth: 0}, prompt))
		blobs += 2
		head, anc := "", []string{}
		steps := 10 + rng.Intn(31)
		for s := 0; s < steps; s++ {
			c := put(node.NewContent(fmt.Sprintf("%s step %d\n%s", id, s, strings.Repeat("output ", 10+s%20)), nil))
			p := node.StatePayload{Role: "coder", Meta: canonyaml.Map{{Key: "step", Value: s}}, Start: start, Content: c, Ancestors: node.Ancestors(head, anc), Timestamp: int64(s)}
			head, anc = put(node.NewState(p)), p.Ancestors
			blobs += 2
		}
		if rng.Intn(10) == 0 {
			garbage += 2 + 2*steps
			continue // a removed thread: its chain is garbage
		}
		idx[id] = threads.Entry{Head: head, Start: start, UpdatedAt: 1}
		if thread%500 == 0 {
			fmt.Fprintf(os.Stderr, "\r  generating: %d blobs", blobs)
		}
	}
	fmt.Fprintf(os.Stderr, "\r\x1b[K")
	must(0, threads.Modify(l.BundleDir("BENCH"), func(cur threads.Index) (bool, error) {
		for k, v := range idx {
			cur[k] = v
		}
		return true, nil
	}))
	fmt.Printf("  generated %d blobs (%d garbage) for %d threads in %s\n", blobs, garbage, len(idx), time.Since(t0).Round(time.Millisecond))

	// Baseline: list the directory and read every blob once, sequentially.
	t0 = time.Now()
	entries := must(os.ReadDir(casDir))
	for _, e := range entries {
		must(os.ReadFile(filepath.Join(casDir, e.Name())))
	}
	base := time.Since(t0)

	// First collection: the store has no refs index yet (as one the original
	// wrote), so every reachable blob is read; it writes the index.
	t0 = time.Now()
	res := must(gc.Collect(context.Background(), l, cas.Open(casDir), gc.Options{}))
	ours := time.Since(t0)
	fmt.Printf("  %s\n", res.String())
	if res.DeletedEntries != garbage {
		fail(fmt.Errorf("gc deleted %d blobs, want exactly the %d garbage ones", res.DeletedEntries, garbage))
	}
	report("cas gc, first (reads every blob)", ours, base, blobs, "blobs")

	// Remove a tenth of the threads, then collect again with the index.
	removed := 0
	must(0, threads.Modify(l.BundleDir("BENCH"), func(cur threads.Index) (bool, error) {
		for id := range cur {
			if removed*10 < len(idx) {
				delete(cur, id)
				removed++
			}
		}
		return true, nil
	}))
	t0 = time.Now()
	phases := map[gc.Phase]time.Duration{}
	res = must(gc.Collect(context.Background(), l, cas.Open(casDir), gc.Options{Progress: func(p gc.Phase, n int) {
		phases[p] = time.Since(t0) // the last report of each phase: when it ended
	}}))
	ours = time.Since(t0)
	fmt.Printf("  %s (after removing %d threads)\n", res.String(), removed)
	fmt.Printf("  phases: listing + roots %s, mark %s, sweep %s, index rewrite %s\n",
		phases[gc.PhaseRoots].Round(time.Millisecond), (phases[gc.PhaseMark] - phases[gc.PhaseRoots]).Round(time.Millisecond),
		(phases[gc.PhaseSweep] - phases[gc.PhaseMark]).Round(time.Millisecond), (ours - phases[gc.PhaseSweep]).Round(time.Millisecond))
	report("cas gc, with refs index", ours, base, blobs-garbage, "blobs")
	fmt.Println()
}

// threadNodes writes a thread's prompt, start and head node into the CAS
// at casDir (plain writes: a benchmark's setup needs no durability) and
// returns the head and start: an __end__ state when ended, else a step.
func threadNodes(casDir, id string, ended bool) (head, start string) {
	put := func(nd node.Node) string {
		b := must(nd.Marshal())
		h := ids.HashBytes(b)
		must(0, os.WriteFile(filepath.Join(casDir, h+".txt"), b, 0o644))
		return h
	}
	prompt := put(node.NewContent("prompt of "+id, nil))
	start = put(node.NewStart(node.StartPayload{Name: "flow", Hash: "BENCH"}, prompt))
	p := node.StatePayload{Role: "coder", Start: start, Content: prompt}
	if ended {
		p.Role, p.Meta = node.RoleEnd, canonyaml.Map{{Key: "returnCode", Value: 0}, {Key: "summary", Value: "done"}}
	}
	return put(node.NewState(p)), start
}

func timeMedian(runs int, fn func()) time.Duration {
	var ds []time.Duration
	for i := 0; i < runs; i++ {
		t0 := time.Now()
		fn()
		ds = append(ds, time.Since(t0))
	}
	for i := range ds {
		for j := i + 1; j < len(ds); j++ {
			if ds[j] < ds[i] {
				ds[i], ds[j] = ds[j], ds[i]
			}
		}
	}
	return ds[len(ds)/2]
}
