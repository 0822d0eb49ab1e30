package gc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/executor"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/workflow"
)

// TestRandomDamageNeverCostsANamedNode damages a real storage root at
// random — bytes flipped, files cut short, hashes in index and history
// lines edited, files and directories swapped for links (that lead
// somewhere, nowhere, or in a loop), for directories, files or FIFOs,
// deleted, added, closed to their owner — then runs a collection and a
// thread removal through the code the CLI runs. After each, either the
// command refused and the root is as it was, byte for byte, or every node
// reachable from a line valid before the damage is still there, except:
// a node whose own file the damage deleted; the removed thread's own
// nodes; and those of a thread the damage left no record of at all (its
// lines' files and its debug log all gone: nothing can tell it from a
// thread that never was).
//
// STORAGE_DAMAGE_CASES sets how many cases run (default 24, a few seconds;
// `make fuzz` runs 1,000) and STORAGE_DAMAGE_SEED the first case's seed
// (default 1; "random" picks one). A failure names its case's seed: run
// it alone with STORAGE_DAMAGE_SEED=<seed> STORAGE_DAMAGE_CASES=1.
func TestRandomDamageNeverCostsANamedNode(t *testing.T) {
	t.Parallel()
	cases, seed := 24, uint64(1)
	if v := os.Getenv("STORAGE_DAMAGE_CASES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("STORAGE_DAMAGE_CASES=%q: want a number of cases", v)
		}
		cases = n
	}
	switch v := os.Getenv("STORAGE_DAMAGE_SEED"); v {
	case "":
	case "random":
		seed = uint64(time.Now().UnixNano())
		t.Logf("first seed %d", seed)
	default:
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("STORAGE_DAMAGE_SEED=%q: want a number or \"random\"", v)
		}
		seed = s
	}
	template := buildDamageTemplate(t)
	var (
		mu      sync.Mutex
		refused int
		kinds   = map[string]int{}
	)
	// The cases run side by side (up to -parallel at once): each waits
	// on the filesystem more than on the CPU.
	t.Run("cases", func(t *testing.T) {
		for i := 0; i < cases; i++ {
			s := seed + uint64(i)
			t.Run(fmt.Sprint("seed=", s), func(t *testing.T) {
				t.Parallel()
				r := runDamageCase(t, template, s)
				mu.Lock()
				defer mu.Unlock()
				refused += r.refused
				for _, k := range r.kinds {
					kinds[k]++
				}
			})
		}
	})
	t.Logf("%d cases, %d refusals; damage applied: %v", cases, refused, kinds)
}

// damageTemplate is a storage root built by the executor, to be copied
// for each case.
type damageTemplate struct {
	root string
	// lines are the threads' records as read before any damage.
	lines []threads.Record
}

// scriptFlow is a workflow in Go: its roles in order, each storing a
// content node; a role named "link" records childThread as a child
// thread's result, so that threads share nodes as parents and children do.
type scriptFlow struct {
	roles       []string
	childThread string
}

func (f scriptFlow) Descriptor() workflow.Descriptor { return workflow.Descriptor{} }

func (f scriptFlow) Start(ctx context.Context, tc workflow.ThreadContext, h workflow.Host) (workflow.Run, error) {
	return &scriptRun{f: f, h: h, done: len(tc.Steps), prompt: tc.Start.Content}, nil
}

type scriptRun struct {
	f      scriptFlow
	h      workflow.Host
	done   int
	prompt string
}

func (r *scriptRun) Next(ctx context.Context) (*workflow.Output, *workflow.Completion, error) {
	if r.done >= len(r.f.roles) {
		return nil, &workflow.Completion{Summary: "done"}, nil
	}
	role := r.f.roles[r.done]
	c, err := r.h.CAS().Put(fmt.Sprintf("%s of %q (step %d)", role, r.prompt, r.done))
	if err != nil {
		return nil, nil, err
	}
	r.done++
	out := &workflow.Output{Role: role, ContentHash: c, Meta: canonyaml.Map{{Key: "step", Value: r.done}}}
	if role == "link" {
		out.ChildThread = r.f.childThread
	}
	return out, nil, nil
}

func (r *scriptRun) Close() error { return nil }

// buildDamageTemplate runs twelve threads over three bundles through the
// executor: finished ones, one that links another's end as its child,
// forks sharing a prefix, and ones left interrupted mid-way; adds orphan
// blobs and a damaged file a repair kept aside.
func buildDamageTemplate(t *testing.T) damageTemplate {
	t.Helper()
	root := filepath.Join(t.TempDir(), "template")
	l := storage.Layout{Root: root}
	e := executor.New(l)
	clock := time.Date(2026, 5, 9, 12, 0, 0, 0, time.UTC)
	e.Now = func() time.Time {
		clock = clock.Add(time.Minute)
		return clock
	}
	ctx := context.Background()
	for b, bundle := range []string{"BNDLA00000000", "BNDLB00000000", "BNDLC00000000"} {
		var finished threads.Record
		for i := 0; i < 4; i++ {
			id := fmt.Sprintf("T%d%d000000000000000000000", b, i)
			flow := scriptFlow{roles: []string{"plan", "code", "review"}}
			th := executor.Thread{ID: id, BundleHash: bundle, WorkflowName: "demo", Prompt: fmt.Sprintf("task %d of %s", i, bundle)}
			env := executor.Env{}
			runCtx, cancel := context.WithCancelCause(ctx)
			switch i {
			case 1:
				flow = scriptFlow{roles: []string{"plan", "link", "review"}, childThread: finished.Head}
			case 2:
				// Interrupted after its first step: an active thread.
				env.OnStep = func(string) { cancel(executor.ErrShutdown) }
			case 3:
				// A fork of the finished thread, from its last role.
				forked, err := e.PrepareFork(finished, id, "")
				if err == nil {
					err = e.List(forked)
				}
				if err != nil {
					t.Fatal(err)
				}
				th = forked
			}
			if i != 3 {
				if err := e.Begin(&th); err != nil {
					t.Fatal(err)
				}
			}
			_, err := e.Run(runCtx, flow, th, env)
			cancel(nil)
			if err != nil && !errors.Is(err, executor.ErrLeftRunning) {
				t.Fatal(err)
			}
			if i == 0 {
				if finished, err = threads.Resolve(l, id); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	store := cas.Open(l.CASDir())
	for i := 0; i < 5; i++ {
		if _, err := store.Put(fmt.Sprintf("an orphan, %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	lines, err := threads.List(l)
	if err != nil {
		t.Fatal(err)
	}
	// A history file a repair set aside: what it names is kept.
	kept := threads.KeptAsideName(filepath.Join(threads.HistoryDir(l.BundleDir(lines[0].BundleHash)), "2026-05-09.jsonl"), clock)
	line := fmt.Sprintf(`{"threadId":"GONE","head":"%s","start":"%s","complet`, lines[0].Head, lines[0].Start)
	if err := os.WriteFile(kept, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 12 {
		t.Fatalf("the template holds %d threads, want 12", len(lines))
	}
	return damageTemplate{root: root, lines: lines}
}

// damageCase is what one case did.
type damageCase struct {
	refused int
	kinds   []string
}

// runDamageCase copies the template, damages it as seed says, runs a
// collection and a removal, and checks each.
func runDamageCase(t *testing.T, tpl damageTemplate, seed uint64) damageCase {
	t.Helper()
	var out damageCase
	root := filepath.Join(t.TempDir(), "root")
	if err := os.CopyFS(root, os.DirFS(tpl.root)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reopen(root) })
	l := storage.Layout{Root: root}
	store := cas.Open(l.CASDir())
	// What every thread reached before the damage.
	reach := map[string]map[string]bool{}
	for _, rec := range tpl.lines {
		reach[rec.ThreadID] = reachableFrom(store, rec.Head, rec.Start)
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	d := &damager{t: t, rng: rng, l: l, elsewhere: t.TempDir(), deleted: map[string]bool{}}
	for n := 1 + rng.IntN(3); n > 0; n-- {
		out.kinds = append(out.kinds, d.apply())
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("seed %d (damage: %s): %s\nreplay: STORAGE_DAMAGE_SEED=%d STORAGE_DAMAGE_CASES=1 go test -run TestRandomDamageNeverCostsANamedNode ./engine/gc",
			seed, strings.Join(d.log, "; "), fmt.Sprintf(format, args...), seed)
	}
	check := func(op string, err error, before map[string]string, removed string) {
		t.Helper()
		after := snapshotData(t, root)
		unchanged := slicesEqualMaps(before, after)
		if errors.Is(err, ErrNotRemoved) || (op == "cas gc" && errors.Is(err, ErrRefused)) {
			out.refused++
			if !unchanged {
				fail("%s refused (%v) but changed the root: %s", op, err, diffMaps(before, after))
			}
			return
		}
		if unchanged {
			return
		}
		for _, rec := range tpl.lines {
			if rec.ThreadID == removed {
				continue
			}
			for h := range reach[rec.ThreadID] {
				p := filepath.Join(l.CASDir(), h+".txt")
				if _, err := os.Lstat(p); err == nil || d.deletedByDamage(p) {
					continue
				}
				if !d.anyRecordLeft(rec) {
					continue
				}
				fail("after %s (%v), node %s of thread %s is gone", op, err, h, rec.ThreadID)
				return
			}
		}
	}

	before := snapshotData(t, root)
	_, err := Collect(context.Background(), l, store, Options{})
	check("cas gc", err, before, "")

	victim := tpl.lines[rng.IntN(len(tpl.lines))]
	before = snapshotData(t, root)
	rec, err := threads.ResolveRef(l, victim.ThreadID)
	if err == nil {
		_, err = RemoveThread(context.Background(), l, store, rec, RemoveOptions{
			RemoveLines: func(rec threads.Record) error { return host.RemoveLines(l, rec, false) },
		})
		check("thread rm "+victim.ThreadID, err, before, victim.ThreadID)
	} else if !slicesEqualMaps(before, snapshotData(t, root)) {
		fail("resolving thread %s changed the root", victim.ThreadID)
	}
	return out
}

// reachableFrom returns every node reachable from roots, read from the
// blobs themselves.
func reachableFrom(store *cas.Store, roots ...string) map[string]bool {
	seen := map[string]bool{}
	var walk func(h string)
	walk = func(h string) {
		if seen[h] {
			return
		}
		b, err := store.Get(h)
		if err != nil {
			return
		}
		seen[h] = true
		for _, r := range node.RefsOf(b) {
			walk(r)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	return seen
}

// damager applies random damage to a root and remembers what it deleted.
type damager struct {
	t         *testing.T
	rng       *rand.Rand
	l         storage.Layout
	elsewhere string // outside the root: where moved things go
	moves     int
	deleted   map[string]bool // paths whose content the damage removed
	log       []string
}

// paths lists everything under the root, without following links.
func (d *damager) paths(keep func(p string, e fs.DirEntry) bool) []string {
	var out []string
	_ = filepath.WalkDir(d.l.Root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == d.l.Root {
			return nil
		}
		if keep(p, e) {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

func (d *damager) pick(list []string) string {
	if len(list) == 0 {
		return ""
	}
	return list[d.rng.IntN(len(list))]
}

func (d *damager) file() string {
	return d.pick(d.paths(func(_ string, e fs.DirEntry) bool { return e.Type().IsRegular() }))
}

func (d *damager) any() string {
	return d.pick(d.paths(func(string, fs.DirEntry) bool { return true }))
}

func (d *damager) indexFile() string {
	return d.pick(d.paths(func(p string, e fs.DirEntry) bool {
		return e.Type().IsRegular() && strings.Contains(p, string(filepath.Separator)+"bundles"+string(filepath.Separator)) && !strings.HasSuffix(p, ".lock")
	}))
}

func (d *damager) note(format string, args ...any) {
	d.log = append(d.log, fmt.Sprintf(format, args...))
}

// gone records that the content at p is no longer there.
func (d *damager) gone(p string) { d.deleted[p] = true }

// deletedByDamage says whether p, or a directory on its way, lost its
// content to the damage.
func (d *damager) deletedByDamage(p string) bool {
	for q := p; len(q) > len(d.l.Root); q = filepath.Dir(q) {
		if d.deleted[q] {
			return true
		}
	}
	return false
}

// anyRecordLeft says whether the damage left anything that says thread
// rec existed: a line in the listing, damage reported in its bundle (which
// may be its line), a kept-aside file naming its nodes, or its debug log.
func (d *damager) anyRecordLeft(rec threads.Record) bool {
	recs, damaged, err := threads.ListTolerant(d.l)
	if err != nil {
		return true
	}
	for _, r := range recs {
		if r.ThreadID == rec.ThreadID {
			return true
		}
	}
	for _, dmg := range damaged {
		if strings.Contains(dmg.Path, rec.BundleHash) {
			return true
		}
	}
	if kept, _ := threads.KeptAside(d.l.BundleDir(rec.BundleHash)); len(kept) > 0 {
		for _, p := range kept {
			if b, err := threads.ReadKeptAside(p); err == nil && strings.Contains(string(b), rec.Head) {
				return true
			}
		}
	}
	_, err = os.Stat(d.l.InfoLog(rec.BundleHash, rec.ThreadID))
	return err == nil
}

const damageAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZabcdefghjkmnpqrstvwxyz{}\":, \n"

// apply applies one random damage and names its kind.
func (d *damager) apply() string {
	kinds := []string{"flip", "truncate", "hash", "link", "delete", "extra", "closed", "swap"}
	kind := kinds[d.rng.IntN(len(kinds))]
	switch kind {
	case "flip":
		p := d.file()
		if p == "" {
			return kind
		}
		b, _ := os.ReadFile(p)
		if len(b) == 0 {
			return kind
		}
		for n := 1 + d.rng.IntN(2); n > 0; n-- {
			i := d.rng.IntN(len(b))
			if d.rng.IntN(2) == 0 {
				b[i] ^= 1 << d.rng.IntN(8)
			} else {
				b[i] = damageAlphabet[d.rng.IntN(len(damageAlphabet))]
			}
		}
		d.write(p, b)
		d.note("flipped bytes of %s", d.rel(p))
	case "truncate":
		p := d.file()
		if p == "" {
			return kind
		}
		b, _ := os.ReadFile(p)
		n := 0
		if len(b) > 0 {
			n = d.rng.IntN(len(b))
		}
		if d.rng.IntN(2) == 0 {
			// At a line's end: what a crash or a careless copy leaves.
			if i := strings.LastIndexByte(string(b[:n]), '\n'); i >= 0 {
				n = i + 1
			}
		}
		d.write(p, b[:n])
		d.note("cut %s to %d bytes", d.rel(p), n)
	case "hash":
		p := d.indexFile()
		if p == "" {
			return kind
		}
		b, _ := os.ReadFile(p)
		tokens := HashLikeTokens(b)
		if len(tokens) == 0 {
			return kind
		}
		old := tokens[d.rng.IntN(len(tokens))]
		blobs, _ := cas.Open(d.l.CASDir()).List()
		edits := []string{old[:12], old + "0", "", strings.ToLower(old), "U" + old[1:], old[:6] + string(damageAlphabet[d.rng.IntN(32)]) + old[7:]}
		if len(blobs) > 0 {
			edits = append(edits, blobs[d.rng.IntN(len(blobs))])
		}
		edit := edits[d.rng.IntN(len(edits))]
		d.write(p, []byte(strings.Replace(string(b), old, edit, 1)))
		d.note("in %s, %s became %q", d.rel(p), old, edit)
	case "link":
		p := d.any()
		if p == "" {
			return kind
		}
		switch d.rng.IntN(3) {
		case 0: // moved elsewhere and linked: read through
			d.moves++
			moved := filepath.Join(d.elsewhere, fmt.Sprint(d.moves))
			if err := os.Rename(p, moved); err != nil {
				d.t.Fatal(err)
			}
			d.symlink(moved, p)
			d.note("moved %s elsewhere and linked it", d.rel(p))
		case 1:
			d.remove(p)
			d.symlink(filepath.Join(d.elsewhere, "nothing"), p)
			d.note("made %s a link to nothing", d.rel(p))
		default:
			d.remove(p)
			d.symlink(p, p)
			d.note("made %s a link to itself", d.rel(p))
		}
	case "delete":
		p := d.any()
		if p == "" {
			return kind
		}
		d.remove(p)
		d.note("deleted %s", d.rel(p))
	case "extra":
		dirs := []string{d.l.BundlesDir(), d.l.CASDir(), d.l.Root}
		dirs = append(dirs, d.paths(func(p string, e fs.DirEntry) bool { return e.IsDir() })...)
		dir := d.pick(dirs)
		blobs, _ := cas.Open(d.l.CASDir()).List()
		names := []string{"notes.txt", "EXTRA", "0123456789ABC.txt", "2026-01-01.jsonl", "threads.json.damaged-20260101T000000Z", "x.tmp.1"}
		name := names[d.rng.IntN(len(names))]
		var content string
		switch {
		case strings.HasSuffix(name, ".jsonl") && len(blobs) > 0:
			content = fmt.Sprintf(`{"threadId":"EXTRA","head":"%s","start":"%s","completedAt":1}`+"\n", d.pick(blobs), d.pick(blobs))
		default:
			content = "type: content\npayload: extra\nrefs: []\n"
		}
		p := filepath.Join(dir, name)
		if _, err := os.Lstat(p); err == nil {
			return kind
		}
		if d.rng.IntN(4) == 0 {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return kind
			}
		} else if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return kind
		}
		d.note("added %s", d.rel(p))
	case "closed":
		p := d.any()
		if p == "" {
			return kind
		}
		mode := []os.FileMode{0, 0o200, 0o111}[d.rng.IntN(3)]
		if err := os.Chmod(p, mode); err != nil {
			return kind
		}
		d.note("set %s's mode to %v", d.rel(p), mode)
	case "swap":
		p := d.any()
		if p == "" {
			return kind
		}
		st, err := os.Lstat(p)
		if err != nil {
			return kind
		}
		d.remove(p)
		switch {
		case st.IsDir():
			d.write(p, []byte("{}\n"))
			d.note("replaced directory %s by a file", d.rel(p))
		case d.rng.IntN(2) == 0:
			if err := os.MkdirAll(filepath.Join(p, "inside"), 0o755); err != nil {
				d.t.Fatal(err)
			}
			d.note("replaced %s by a directory", d.rel(p))
		default:
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				d.t.Fatal(err)
			}
			d.note("replaced %s by a FIFO", d.rel(p))
		}
	}
	return kind
}

func (d *damager) rel(p string) string {
	r, err := filepath.Rel(d.l.Root, p)
	if err != nil {
		return p
	}
	return r
}

func (d *damager) write(p string, b []byte) {
	_ = os.Chmod(p, 0o644)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		d.t.Fatalf("damaging %s: %v", p, err)
	}
}

func (d *damager) remove(p string) {
	reopen(p)
	if err := os.RemoveAll(p); err != nil {
		d.t.Fatalf("removing %s: %v", p, err)
	}
	d.gone(p)
}

func (d *damager) symlink(target, p string) {
	if err := os.Symlink(target, p); err != nil {
		d.t.Fatalf("linking %s: %v", p, err)
	}
}

// reopen gives the owner back every permission under p, so that it can be
// removed.
func reopen(p string) {
	_ = filepath.WalkDir(p, func(q string, e fs.DirEntry, err error) error {
		if e != nil && e.Type()&fs.ModeSymlink == 0 {
			_ = os.Chmod(q, 0o755)
		}
		return nil
	})
	_ = os.Chmod(p, 0o755)
}

// snapshotData is snapshot without lock files, which hold no data.
func snapshotData(t *testing.T, root string) map[string]string {
	t.Helper()
	snap := snapshot(t, root)
	for p := range snap {
		if strings.HasSuffix(p, ".lock") {
			delete(snap, p)
		}
	}
	return snap
}

func slicesEqualMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// diffMaps names what differs between two snapshots.
func diffMaps(a, b map[string]string) string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			out = append(out, "gone: "+k)
		} else if w != v {
			out = append(out, "changed: "+k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, "new: "+k)
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
