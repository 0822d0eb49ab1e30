package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/jsrt"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/workflow"
)

// scaleSteps is the length of the workflow whose threads the scale
// section runs side by side.
const scaleSteps = 20

// scaleBundle is the bundle hash the scale section registers its
// workflow under (the Load function below serves it, so no bundle file
// is needed).
const scaleBundle = "BENCHSCA1EAAA"

// scaleIdle is how many threads the large-index figure lists as active
// (running nowhere) beside the one it runs.
const scaleIdle = 10000

// scale prints how the steps of K threads of one workflow, run at once
// through an engine host on the real disk, compare with one thread's: the
// threads' index (threads.json) is rewritten at every step of every
// thread, so its writes are what K threads share. Then the cost of one
// step when the index lists 10,000 active threads.
func scale(work string, runs int) {
	fmt.Printf("threads of one workflow at once, %d deterministic steps each (engine host, %s)\n", scaleSteps, work)
	bundle, err := jsrt.Load([]byte(bundleSource(scaleSteps)), "steps.esm.js", jsrt.Options{})
	check(err)
	ks := []int{1, 8, 32}
	rates, disk := map[int][]float64{}, map[int][]float64{}
	// Interleaved, so that a minute of a slow disk weighs on every K
	// alike; the median of each K is reported. Each run of the engine is
	// followed by the disk alone doing the same number of writers' new
	// files: what the disk gives K writers at once is the ceiling the
	// engine's ratio is to be read against.
	for i := range runs {
		for _, k := range ks {
			d := runThreadsAtOnce(filepath.Join(work, fmt.Sprintf("scale-%d-%d", k, i)), bundle, k, 0)
			rates[k] = append(rates[k], float64(k*scaleSteps)/d.Seconds())
			disk[k] = append(disk[k], durableFilesAtOnce(filepath.Join(work, fmt.Sprintf("disk-%d-%d", k, i)), k))
		}
	}
	one, diskOne := medianRate(rates[1]), medianRate(disk[1])
	for _, k := range ks {
		r := medianRate(rates[k])
		fmt.Printf("  K=%-3d %8.0f steps/s   %5.2fx K=1   %8s per step per thread\n",
			k, r, r/one, (time.Duration(float64(time.Second) * float64(k) / r)).Round(time.Microsecond))
	}
	fmt.Println("  the disk alone: K writers each making new small files durable (create, write, fsync, then the directory's fsync)")
	for _, k := range ks {
		r := medianRate(disk[k])
		fmt.Printf("  K=%-3d %8.0f files/s   %5.2fx K=1\n", k, r, r/diskOne)
	}

	fmt.Printf("\none step with %d other threads active in the same index\n", scaleIdle)
	var small, large []time.Duration
	var indexBytes int64
	for i := range runs {
		small = append(small, runThreadsAtOnce(filepath.Join(work, fmt.Sprintf("idx-small-%d", i)), bundle, 1, 0)/scaleSteps)
		root := filepath.Join(work, fmt.Sprintf("idx-large-%d", i))
		large = append(large, runThreadsAtOnce(root, bundle, 1, scaleIdle)/scaleSteps)
		st, err := os.Stat(threads.IndexFile(storage.Layout{Root: root}.BundleDir(scaleBundle)))
		check(err)
		indexBytes = st.Size()
	}
	s, l := medianOf(small), medianOf(large)
	fmt.Printf("  1 thread, index of 1 thread    %10s per step\n", s.Round(time.Microsecond))
	fmt.Printf("  1 thread, index of %d     %10s per step   %.2fx; threads.json is %d bytes\n",
		scaleIdle+1, l.Round(time.Microsecond), l.Seconds()/s.Seconds(), indexBytes)
	var large32 []float64
	for i := range runs {
		d := runThreadsAtOnce(filepath.Join(work, fmt.Sprintf("idx-large32-%d", i)), bundle, 32, scaleIdle)
		large32 = append(large32, float64(32*scaleSteps)/d.Seconds())
	}
	r := medianRate(large32)
	fmt.Printf("  32 threads, index of %d   %8.0f steps/s   %5.2fx K=1 with a small index\n\n", scaleIdle+32, r, r/one)
}

// runThreadsAtOnce opens an engine host on a fresh root with the workflow
// registered, lists idle made-up threads in its index, starts k threads
// at once and returns how long they took until all were in the history.
func runThreadsAtOnce(root string, wf workflow.Workflow, k, idle int) time.Duration {
	check(os.MkdirAll(root, 0o700))
	l := storage.Layout{Root: root}
	check(registry.Update(l.RegistryFile(), func(r *registry.Registry) error {
		r.Register("steps", scaleBundle, 1)
		return nil
	}))
	if idle > 0 {
		check(threads.Modify(l.BundleDir(scaleBundle), func(idx threads.Index) (bool, error) {
			for i := range idle {
				id := fmt.Sprintf("06EZ%022d", i)
				idx[id] = threads.Entry{Head: ids.HashString(id), Start: ids.HashString(id + "s"), UpdatedAt: int64(1778000000000 + i)}
			}
			return true, nil
		}))
	}
	h, err := host.Open(host.Options{Layout: l, MaxThreads: k, Load: func(string) (workflow.Workflow, error) { return wf, nil }})
	check(err)
	defer h.Close()
	t0 := time.Now()
	started := make([]string, k)
	var wg sync.WaitGroup
	for i := range k {
		wg.Go(func() {
			id, err := h.Run(host.RunRequest{Workflow: "steps", Prompt: "count"})
			check(err)
			started[i] = id
		})
	}
	wg.Wait()
	for len(h.List()) > 0 {
		time.Sleep(200 * time.Microsecond)
	}
	d := time.Since(t0)
	for _, id := range started {
		rec, err := threads.Resolve(l, id)
		check(err)
		if rec.Source != threads.SourceHistory {
			check(fmt.Errorf("thread %s did not finish", id))
		}
		frames, err := threads.Walk(cas.Open(l.CASDir()), rec.Head)
		check(err)
		if len(frames) != scaleSteps+1 {
			check(fmt.Errorf("thread %s has %d frames, want %d", id, len(frames), scaleSteps+1))
		}
	}
	return d
}

func medianRate(rs []float64) float64 {
	s := append([]float64(nil), rs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// diskFiles is how many files durableFilesAtOnce makes in all.
const diskFiles = 640

// durableFilesAtOnce has k writers make diskFiles new 300-byte files in
// dir between them, each file written, fsynced and its directory fsynced
// before the writer's next, as a step's node is; it returns files/s.
func durableFilesAtOnce(dir string, k int) float64 {
	check(os.MkdirAll(dir, 0o700))
	d, err := os.Open(dir)
	check(err)
	defer func() { _ = d.Close() }() // read-only
	data := make([]byte, 300)
	t0 := time.Now()
	var wg sync.WaitGroup
	for w := range k {
		wg.Go(func() {
			for i := range diskFiles / k {
				f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("w%d-%d", w, i)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
				check(err)
				_, err = f.Write(data)
				check(err)
				check(f.Sync())
				check(f.Close())
				check(d.Sync())
			}
		})
	}
	wg.Wait()
	return float64(diskFiles/k*k) / time.Since(t0).Seconds()
}
