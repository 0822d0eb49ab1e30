package gc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// FindingKind says what part of a storage root a Finding is about.
type FindingKind string

// Kinds of finding.
const (
	// KindIndex is a threads.json that cannot be read completely.
	KindIndex FindingKind = "index"
	// KindHistory is a history line that cannot be read completely.
	KindHistory FindingKind = "history"
	// KindDangling is an index entry or history line whose head or start
	// is not in the CAS, or does not hash to its name.
	KindDangling FindingKind = "dangling"
	// KindRefsIndex is the CAS refs index (cas/refs.idx): lines that
	// cannot be used, or entries that disagree with their blobs.
	KindRefsIndex FindingKind = "refs-index"
	// KindBlob is a CAS blob that cannot be read or whose content does not
	// hash to its name.
	KindBlob FindingKind = "blob"
	// KindTempFile is a temporary file an atomic write or a collection left
	// behind.
	KindTempFile FindingKind = "temp-file"
	// KindKeptAside is a damaged file a repair set aside (a note), or one
	// that cannot be read (a problem).
	KindKeptAside FindingKind = "kept-aside"
	// KindBrokenChain is a node a thread reaches that is missing, cannot
	// be read, or does not hash to its name.
	KindBrokenChain FindingKind = "broken-chain"
	// KindMismatch is a line whose head is not of its start's chain.
	KindMismatch FindingKind = "mismatch"
	// KindLostThread is a thread whose debug log remains while no index
	// or history line names it, or debug logs that cannot be listed.
	KindLostThread FindingKind = "lost-thread"
)

// Finding is one thing a check of a storage root found.
type Finding struct {
	// Kind says what part of the root it is about.
	Kind FindingKind `json:"kind"`
	// Problem is false for a note: worth knowing, nothing to fix.
	Problem bool `json:"problem"`
	// Repairable says whether a repair can fix it.
	Repairable bool `json:"repairable"`
	// Path is the file concerned, Line its 1-based line where one is known.
	Path string `json:"path,omitempty"`
	Line int    `json:"line,omitempty"`
	// Thread and Hash name the thread and node concerned, where one is.
	Thread string `json:"thread,omitempty"`
	Hash   string `json:"hash,omitempty"`
	// Message says what is wrong, for a person.
	Message string `json:"message"`
}

// Checked counts what a check looked at. Threads counts the index entries
// and history lines that could be read.
type Checked struct {
	Bundles      int `json:"bundles"`
	IndexFiles   int `json:"indexFiles"`
	HistoryFiles int `json:"historyFiles"`
	Threads      int `json:"threads"`
	Blobs        int `json:"blobs"`
}

// Repaired is one repair that was made.
type Repaired struct {
	// Kind is the kind of finding it repaired.
	Kind FindingKind `json:"kind"`
	// Path is the file rebuilt, removed or put back.
	Path string `json:"path"`
	// Message says what was done, for a person.
	Message string `json:"message"`
	// File is the detail of a rebuilt index or history file.
	File *threads.Repair `json:"file,omitempty"`
}

// Report is what Doctor found and did. After a repair, Findings are those
// of a second check: what is left.
type Report struct {
	// Root is the storage root checked.
	Root    string  `json:"root"`
	Checked Checked `json:"checked"`
	// Findings are problems and notes, never nil.
	Findings []Finding `json:"findings"`
	// Repaired lists what a repair did, never nil.
	Repaired []Repaired `json:"repaired"`
}

// Problems counts the findings that are problems (not notes).
func (r Report) Problems() int {
	n := 0
	for _, f := range r.Findings {
		if f.Problem {
			n++
		}
	}
	return n
}

// Repairable counts the problems a repair can fix.
func (r Report) Repairable() int {
	n := 0
	for _, f := range r.Findings {
		if f.Problem && f.Repairable {
			n++
		}
	}
	return n
}

// DefaultTempGrace is how old a temporary file must be before a repair
// takes it for a leftover: an atomic write lives for milliseconds, a
// collection for minutes.
const DefaultTempGrace = time.Hour

// DoctorOptions tunes Doctor.
type DoctorOptions struct {
	// Repair rebuilds what can be rebuilt from the CAS, then checks again.
	Repair bool
	// TempGrace spares temporary files younger than this (0: DefaultTempGrace).
	TempGrace time.Duration
	// Progress, when set, is called at a modest rate, never twice at once,
	// with the step under way and how far it is (total 0: unknown).
	Progress func(step string, done, total int)
	// Now is the clock (nil: time.Now), for kept-aside names and ages.
	Now func() time.Time
}

// Doctor checks a storage root — every threads.json and history line, index
// entries that name nodes the CAS lacks, every blob against its name, the
// refs index against the blobs, leftover temporary files — and with
// opts.Repair rebuilds what the CAS lets it rebuild: damaged index and
// history files (the damaged originals are kept aside, never deleted), the
// refs index, leftover temporary files older than the grace period. It
// never deletes a node.
func Doctor(ctx context.Context, l storage.Layout, store *cas.Store, opts DoctorOptions) (Report, error) {
	if opts.TempGrace <= 0 {
		opts.TempGrace = DefaultTempGrace
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Progress == nil {
		opts.Progress = func(string, int, int) {}
	}
	d := &doctor{l: l, store: store, opts: opts}
	blobs, err := d.checkBlobs(ctx)
	if err != nil {
		return Report{}, err
	}
	rep, err := d.checkAll(ctx, blobs)
	if err != nil || !opts.Repair || rep.Repairable() == 0 {
		return rep, err
	}
	repaired, err := d.repair(rep, blobs)
	if err != nil {
		return rep, err
	}
	after, err := d.checkAll(ctx, blobs)
	after.Repaired = repaired
	return after, err
}

type doctor struct {
	l     storage.Layout
	store *cas.Store
	opts  DoctorOptions
}

// blobScan is what reading every blob once found.
type blobScan struct {
	present map[string]bool
	// refs are the refs of every blob whose content matches its name and
	// whose refs are all hashes: what a correct refs index holds.
	refs     map[string][]string
	findings []Finding
	// temps are temporary files and collection leftovers in the CAS
	// directory.
	temps []string
}

// checkBlobs lists the CAS directory and reads every blob.
func (d *doctor) checkBlobs(ctx context.Context) (*blobScan, error) {
	scan := &blobScan{present: map[string]bool{}, refs: map[string][]string{}}
	dir := d.store.Dir()
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return scan, nil
	}
	if err != nil {
		return nil, err
	}
	var hashes []string
	for {
		names, err := f.Readdirnames(4096)
		for _, name := range names {
			if h, ok := strings.CutSuffix(name, ".txt"); ok && ids.IsHash(h) {
				hashes = append(hashes, h)
			} else if isTempName(name) || isCollectionLeftover(name) {
				scan.temps = append(scan.temps, filepath.Join(dir, name))
			}
		}
		d.opts.Progress("listing blobs", len(hashes), 0)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			_ = f.Close() // a directory, only read
			return nil, err
		}
	}
	_ = f.Close() // a directory, only read
	sort.Strings(hashes)
	for _, h := range hashes {
		scan.present[h] = true
	}
	type result struct {
		refs    []string
		sound   bool
		gone    bool
		problem string
	}
	results := make([]result, len(hashes))
	var (
		next int
		mu   sync.Mutex
		wg   sync.WaitGroup
	)
	take := func() int {
		mu.Lock()
		defer mu.Unlock()
		if next >= len(hashes) || ctx.Err() != nil {
			return -1
		}
		if next%1024 == 0 {
			d.opts.Progress("checking blobs", next, len(hashes))
		}
		next++
		return next - 1
	}
	for w := 0; w < runtime.GOMAXPROCS(0)*4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for i := take(); i >= 0; i = take() {
				b, err := d.store.ReadInto(hashes[i], buf)
				buf = b
				switch {
				case errors.Is(err, cas.ErrNotFound):
					// Deleted since it was listed, or a link to nothing:
					// not there, whatever its name says.
					results[i].gone = true
				case err != nil:
					results[i].problem = "cannot be read: " + err.Error()
				case ids.HashBytes(b) != hashes[i]:
					results[i].problem = "its content does not hash to its name: the blob is damaged"
				default:
					results[i].refs, results[i].sound = node.RefsOf(b), true
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d.opts.Progress("checking blobs", len(hashes), len(hashes))
	for i, h := range hashes {
		r := results[i]
		if r.gone {
			delete(scan.present, h)
			continue
		}
		if r.problem != "" {
			scan.findings = append(scan.findings, Finding{Kind: KindBlob, Problem: true, Hash: h, Path: filepath.Join(dir, h+".txt"), Message: r.problem})
			continue
		}
		if r.sound && allHashes(r.refs) {
			scan.refs[h] = r.refs
		}
	}
	return scan, nil
}

// checkAll checks everything but the blobs themselves (already read).
func (d *doctor) checkAll(ctx context.Context, blobs *blobScan) (Report, error) {
	rep := Report{Root: d.l.Root, Findings: []Finding{}, Repaired: []Repaired{}}
	rep.Checked.Blobs = len(blobs.present)
	rep.Findings = append(rep.Findings, blobs.findings...)
	if err := d.checkThreads(ctx, &rep, blobs); err != nil {
		return rep, err
	}
	if err := d.checkRefsIndex(&rep, blobs); err != nil {
		return rep, err
	}
	if err := d.checkTemps(&rep, blobs); err != nil {
		return rep, err
	}
	return rep, nil
}

// checkThreads reads every index, history and kept-aside file and the
// debug logs, and walks every thread's nodes, as a collection does before
// it sweeps (judge.go): every problem found here is one that makes a
// collection refuse.
func (d *doctor) checkThreads(ctx context.Context, rep *Report, blobs *blobScan) error {
	d.opts.Progress("reading thread indexes", 0, 0)
	c, err := takeCensus(d.l, nil)
	if err != nil {
		return err
	}
	rep.Checked.Bundles = c.bundles
	rep.Checked.IndexFiles = c.indexFiles
	rep.Checked.HistoryFiles = c.historyFiles
	rep.Checked.Threads = len(c.lines)
	rep.Findings = append(rep.Findings, c.findings...)
	d.opts.Progress("following every thread's nodes", 0, 0)
	// The blob scan read and checked every blob: its refs are what a
	// sound refs index holds. A blob it could not vouch for is read again
	// by the walk and judged there.
	m := &marker{store: d.store, index: blobs.refs, present: blobs.present, learned: map[string][]string{}, rootRefs: map[string][]string{}}
	if _, _, err := m.reachable(ctx, c.roots(), nil); err != nil {
		return err
	}
	rep.Findings = append(rep.Findings, m.findings...)
	for _, p := range c.keptAside {
		rep.Findings = append(rep.Findings, Finding{Kind: KindKeptAside, Path: p,
			Message: "a damaged file a repair set aside; garbage collection keeps every node it names until you delete it"})
	}
	return nil
}

// checkRefsIndex compares the refs index with what the blobs say. A wrong
// entry is the dangerous kind: a collection trusts it instead of reading the
// blob, and would sweep what the blob really points to.
func (d *doctor) checkRefsIndex(rep *Report, blobs *blobScan) error {
	d.opts.Progress("checking the refs index", 0, 0)
	path := d.store.RefsIndexPath()
	idx, flaws, _, err := d.store.CheckRefsIndex()
	if err != nil {
		return fmt.Errorf("failed to read %s: %w", path, err)
	}
	if len(flaws) > 0 {
		rep.Findings = append(rep.Findings, Finding{Kind: KindRefsIndex, Problem: true, Repairable: true, Path: path, Line: flaws[0].Line,
			Message: fmt.Sprintf("%d line(s) cannot be used (first: line %d, %s); a collection reads those blobs instead", len(flaws), flaws[0].Line, flaws[0].Reason)})
	}
	var wrong []string
	for h, refs := range idx {
		if actual, ok := blobs.refs[h]; ok && !slices.Equal(actual, refs) {
			wrong = append(wrong, h)
		}
	}
	if len(wrong) > 0 {
		sort.Strings(wrong)
		rep.Findings = append(rep.Findings, Finding{Kind: KindRefsIndex, Problem: true, Repairable: true, Path: path, Hash: wrong[0],
			Message: fmt.Sprintf("%d entr(ies) list refs their blob does not have (first: %s); a collection could delete what those blobs point to", len(wrong), wrong[0])})
	}
	return nil
}

// isTempName says whether a name is an atomic write's temporary file:
// "<name>.tmp.<suffix>" (both implementations) or "<name>.tmp".
func isTempName(name string) bool {
	return strings.Contains(name, ".tmp.") || strings.HasSuffix(name, ".tmp")
}

// isCollectionLeftover says whether a CAS file name is a blob a collection
// moved to a private name ("<hash>.txt.gc.<...>") while deciding about it.
func isCollectionLeftover(name string) bool {
	h, rest, ok := strings.Cut(name, ".txt.gc.")
	return ok && rest != "" && ids.IsHash(h)
}

// checkTemps finds temporary files: in the root, bundles/, every bundle and
// history directory, and the CAS directory (listed with the blobs).
func (d *doctor) checkTemps(rep *Report, blobs *blobScan) error {
	candidates := slices.Clone(blobs.temps)
	dirs := []string{d.l.Root, d.l.BundlesDir()}
	bundles, err := threads.BundleHashes(d.l)
	if err != nil {
		return err
	}
	for _, h := range bundles {
		dirs = append(dirs, d.l.BundleDir(h), threads.HistoryDir(d.l.BundleDir(h)))
	}
	for i, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil && i >= 2 {
			continue // a bundle or history directory that cannot be read is a finding of its own
		}
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !e.IsDir() && isTempName(e.Name()) {
				candidates = append(candidates, filepath.Join(dir, e.Name()))
			}
		}
	}
	sort.Strings(candidates)
	now := d.opts.Now()
	for _, p := range candidates {
		st, err := os.Lstat(p)
		if err != nil {
			continue // finished (renamed or removed) meanwhile
		}
		age := now.Sub(st.ModTime())
		what := "left by a write that never finished"
		if isCollectionLeftover(filepath.Base(p)) {
			what = "a blob a collection set aside and never finished with"
		}
		if age < d.opts.TempGrace {
			rep.Findings = append(rep.Findings, Finding{Kind: KindTempFile, Path: p,
				Message: fmt.Sprintf("a temporary file %s old: a write may be under way; left alone", age.Round(time.Second))})
			continue
		}
		rep.Findings = append(rep.Findings, Finding{Kind: KindTempFile, Problem: true, Repairable: true, Path: p,
			Message: fmt.Sprintf("%s (%s old)", what, age.Round(time.Second))})
	}
	return nil
}

// repair fixes the repairable problems of rep.
func (d *doctor) repair(rep Report, blobs *blobScan) ([]Repaired, error) {
	var done []Repaired
	now := d.opts.Now()
	indexes, histories := map[string]bool{}, map[string]bool{}
	refsIndex := false
	for _, f := range rep.Findings {
		if !f.Problem || !f.Repairable {
			continue
		}
		switch f.Kind {
		case KindIndex:
			indexes[filepath.Dir(f.Path)] = true
		case KindHistory:
			histories[filepath.Dir(filepath.Dir(f.Path))] = true
		case KindRefsIndex:
			refsIndex = true
		case KindTempFile:
			r, err := removeLeftover(f.Path, d.store)
			if err != nil {
				return done, err
			}
			done = append(done, r)
		}
	}
	for _, dir := range sortedKeys(indexes) {
		d.opts.Progress("rebuilding "+threads.IndexFile(dir), 0, 0)
		r, err := threads.RepairIndex(dir, d.store, now)
		if err != nil {
			return done, fmt.Errorf("repair %s: %w", threads.IndexFile(dir), err)
		}
		if r != nil {
			done = append(done, Repaired{Kind: KindIndex, Path: r.Path, Message: describeRepair(r, "thread"), File: r})
		}
	}
	for _, dir := range sortedKeys(histories) {
		d.opts.Progress("rebuilding the history of "+dir, 0, 0)
		reps, err := threads.RepairHistory(dir, d.store, now)
		if err != nil {
			return done, fmt.Errorf("repair the history of %s: %w", dir, err)
		}
		for _, r := range reps {
			done = append(done, Repaired{Kind: KindHistory, Path: r.Path, Message: describeRepair(r, "line"), File: r})
		}
	}
	if refsIndex {
		d.opts.Progress("rebuilding the refs index", 0, 0)
		if err := d.store.RebuildRefsIndex(blobs.refs); err != nil {
			return done, fmt.Errorf("rebuild %s: %w", d.store.RefsIndexPath(), err)
		}
		done = append(done, Repaired{Kind: KindRefsIndex, Path: d.store.RefsIndexPath(),
			Message: fmt.Sprintf("rebuilt from the blobs themselves (%d entries)", len(blobs.refs))})
	}
	return done, nil
}

func describeRepair(r *threads.Repair, unit string) string {
	msg := fmt.Sprintf("rebuilt: %d %s(s) intact, %d recovered from what was left and the CAS", r.Intact, unit, r.Recovered)
	if len(r.Lost) > 0 {
		msg += fmt.Sprintf(", %d could not be recovered (%s)", len(r.Lost), strings.Join(r.Lost, "; "))
	}
	return msg + "; the damaged file is kept as " + filepath.Base(r.KeptAs)
}

// removeLeftover removes a leftover temporary file. A blob a collection
// set aside goes back under its name when nothing took its place, so the
// next collection decides about it again: a repair never deletes a node.
func removeLeftover(path string, store *cas.Store) (Repaired, error) {
	name := filepath.Base(path)
	if isCollectionLeftover(name) {
		h, _, _ := strings.Cut(name, ".txt.gc.")
		blob := filepath.Join(store.Dir(), h+".txt")
		if _, err := os.Lstat(blob); errors.Is(err, fs.ErrNotExist) {
			if err := os.Rename(path, blob); err != nil {
				return Repaired{}, err
			}
			return Repaired{Kind: KindTempFile, Path: path, Message: "put back as " + h + ".txt"}, nil
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Repaired{}, err
	}
	return Repaired{Kind: KindTempFile, Path: path, Message: "removed"}, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
