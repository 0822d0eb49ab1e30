package gc

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/threads"
)

// The judgement behind every sweep, made the same way by Collect, by
// RemoveThread before it changes anything, and by Doctor: a sweep deletes
// only what no thread can reach, so it runs only when every thread can be
// followed to its end —
//
//   - every index and history file reads completely (threads.ScanBundle
//     reports the rest as damage: a head or start in any form but a node
//     hash, a link to nothing, a file that cannot be read ...);
//   - no thread's debug log outlives every line naming the thread;
//   - every head and start a line names is a blob whose bytes hash to its
//     name, and the head is the start or a state of the start's chain (its
//     first ref): a line whose head was swapped for another node would
//     otherwise let the sweep take the thread's real steps;
//   - every node reached from them is there, and one whose refs are read
//     from its bytes (not from the checked refs index) hashes to its name:
//     refs read from a damaged blob may miss what hangs below it.
//
// What the files name in any other form (hash-like tokens elsewhere in
// them, kept-aside files) is kept when it is a node, and walked the same
// way, but never demanded. A start a kept-aside file names keeps every
// step of its chain too (every state whose first ref it is): a repair sets
// a line aside when it cannot read its head, and the chain must outlive
// the line until a person deletes the file.

// String writes a finding on one line: where, then what.
func (f Finding) String() string {
	switch {
	case f.Path != "" && f.Line > 0:
		return fmt.Sprintf("%s, line %d: %s", f.Path, f.Line, f.Message)
	case f.Path != "":
		return fmt.Sprintf("%s: %s", f.Path, f.Message)
	}
	return f.Message
}

// RefusedError is why a sweep did not run. It matches ErrRefused, and
// threads.ErrDamaged when a damaged index or history file is among the
// findings.
type RefusedError struct {
	// Findings are every place that stopped it.
	Findings []Finding
}

// maxListed bounds the findings a refusal lists; doctor lists them all.
const maxListed = 20

// Error lists what stopped the sweep.
func (e *RefusedError) Error() string {
	var b strings.Builder
	b.WriteString(ErrRefused.Error())
	b.WriteString(":")
	for i, f := range e.Findings {
		if i == maxListed {
			fmt.Fprintf(&b, "\n... and %d more", len(e.Findings)-maxListed)
			break
		}
		b.WriteString("\n")
		b.WriteString(f.String())
	}
	return b.String()
}

// Is makes errors.Is(err, ErrRefused) hold, and errors.Is(err,
// threads.ErrDamaged) when an index or history file is damaged.
func (e *RefusedError) Is(target error) bool {
	if target == ErrRefused {
		return true
	}
	if target == threads.ErrDamaged {
		for _, f := range e.Findings {
			if f.Kind == KindIndex || f.Kind == KindHistory {
				return true
			}
		}
	}
	return false
}

// damageFinding is the finding of a damaged index or history file (or of
// a bundle or history directory that cannot be read). Only content can be
// rebuilt; a file that could not be read at all cannot.
func damageFinding(d *threads.DamageError) Finding {
	kind := KindIndex
	if base := filepath.Base(d.Path); strings.HasSuffix(base, ".jsonl") || base == "history" {
		kind = KindHistory
	}
	return Finding{Kind: kind, Problem: true, Repairable: !d.Unreadable, Path: d.Path, Line: d.Line, Message: d.Reason}
}

// root is where the walk starts from: a hash and the line that names it
// (nil for a loose token, which is kept when present but never demanded).
type root struct {
	hash  string
	field string // "head" or "start"
	line  *threads.Line
	aside bool // a token of a kept-aside file
}

// roots lists a census's roots: the head and start of every line, then
// the loose tokens.
func (c *census) roots() []root {
	out := make([]root, 0, 2*len(c.lines)+len(c.loose)+len(c.aside))
	for i := range c.lines {
		ln := &c.lines[i]
		out = append(out, root{hash: ln.Head, field: "head", line: ln}, root{hash: ln.Start, field: "start", line: ln})
	}
	for _, t := range c.loose {
		out = append(out, root{hash: t})
	}
	for _, t := range c.aside {
		out = append(out, root{hash: t, aside: true})
	}
	return out
}

// chainSteps returns the blobs whose first ref (a state's start) is one
// of starts, reading those the index does not know.
func (m *marker) chainSteps(ctx context.Context, starts map[string]bool) ([]string, error) {
	present := m.present
	if present == nil {
		present = map[string]bool{}
		if err := m.store.Each(func(h string) error {
			present[h] = true
			return nil
		}); err != nil {
			return nil, fmt.Errorf("failed to list cas entries: %w", err)
		}
	}
	var out, unknown []visit
	for h := range present {
		refs, ok := m.index[h]
		if !ok {
			unknown = append(unknown, visit{hash: h})
			continue
		}
		if len(refs) > 0 && starts[refs[0]] {
			out = append(out, visit{hash: h})
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i, r := range readLevel(m.store, unknown, runtime.GOMAXPROCS(0)*4) {
		if r.sound && len(r.refs) > 0 && starts[r.refs[0]] {
			out = append(out, unknown[i])
		}
	}
	hashes := make([]string, len(out))
	for i, v := range out {
		hashes[i] = v.hash
	}
	return hashes, nil
}

// marker walks refs from roots, judging every node on the way.
type marker struct {
	store   *cas.Store
	index   map[string][]string // refs trusted without reading the blob
	present map[string]bool     // blobs listed before marking (nil: unknown)
	// readRoots reads and checks every root's blob even when the index
	// knows its refs: a collection holds heads and starts to the same
	// standard as doctor, which reads every blob.
	readRoots bool
	learned   map[string][]string // refs read from blobs the index lacked
	findings  []Finding
	// rootRefs are the refs of every root followed, to check each line's
	// head against its start.
	rootRefs map[string][]string
}

// state of a hash the walk has met.
type state struct {
	from   int32 // index of the root line it was first reached from, -1 for none
	marked bool  // its blob is there
	// demanded is false while only loose tokens named it: when its blob
	// is not there, nothing is wrong.
	demanded bool
	missing  bool // looked for and not found
}

// visit is one hash to look at.
type visit struct {
	hash string
	from int32
	root bool
}

// reachable walks from roots and returns every hash it met (marked: its
// blob exists) and the count of marked ones. Problems on the way are
// gathered in m.findings; the walk goes on past them, so that every one
// is reported. Only a cancelled context is an error.
func (m *marker) reachable(ctx context.Context, roots []root, onMarked func(int)) (map[string]state, int, error) {
	starts := map[string]bool{}
	for _, r := range roots {
		if r.aside {
			starts[r.hash] = true
		}
	}
	if len(starts) > 0 {
		steps, err := m.chainSteps(ctx, starts)
		if err != nil {
			return nil, 0, err
		}
		for _, h := range steps {
			roots = append(roots, root{hash: h})
		}
	}
	seen := make(map[string]state, len(roots))
	var lines []*threads.Line
	lineOf := map[*threads.Line]int32{}
	var frontier []visit
	var problem func(v visit, what string)
	var describe func(v visit) string
	add := func(list []visit, v visit, demanded bool) []visit {
		st, ok := seen[v.hash]
		if !ok {
			seen[v.hash] = state{from: v.from, demanded: demanded}
			return append(list, v)
		}
		if demanded && !st.demanded {
			// Met as a loose token first, demanded now.
			st.demanded = true
			if st.from < 0 {
				st.from = v.from
			}
			seen[v.hash] = st
			if st.missing {
				problem(v, describe(v)+" is not in the CAS")
			}
		}
		return list
	}
	// Every line's head and start must be there: reported per line, so
	// that each thread that lost a node is named. (A name listed in the
	// CAS may still be a link to nothing: the walk finds those.)
	reported := map[string]bool{}
	for _, r := range roots {
		if r.line == nil || m.present[r.hash] || m.exists(r.hash) {
			continue
		}
		m.findings = append(m.findings, Finding{Kind: KindDangling, Problem: true, Path: r.line.Path, Line: r.line.LineNo, Thread: r.line.ThreadID, Hash: r.hash,
			Message: fmt.Sprintf("thread %s names %s %s, which is not in the CAS: the node is gone (`thread rm %s` drops the thread)", r.line.ThreadID, r.field, r.hash, r.line.ThreadID)})
		reported[r.hash] = true
	}
	for _, r := range roots {
		from := int32(-1)
		if r.line != nil {
			i, ok := lineOf[r.line]
			if !ok {
				i = int32(len(lines))
				lines = append(lines, r.line)
				lineOf[r.line] = i
			}
			from = i
		}
		h := r.hash
		if !ids.IsHash(h) {
			// Lines hold canonical hashes (anything else is damage);
			// tokens may be in lower case.
			var err error
			if h, err = ids.ParseHash(r.hash); err != nil {
				continue
			}
		}
		frontier = add(frontier, visit{hash: h, from: from, root: true}, r.line != nil)
	}
	problem = func(v visit, what string) {
		f := Finding{Kind: KindBrokenChain, Problem: true, Hash: v.hash}
		if v.from >= 0 {
			ln := lines[v.from]
			f.Thread, f.Path, f.Line = ln.ThreadID, ln.Path, ln.LineNo
		}
		f.Message = what
		if v.root && v.from >= 0 {
			f.Kind = KindDangling // a line's own head or start
		}
		m.findings = append(m.findings, f)
	}
	describe = func(v visit) string {
		if v.from < 0 {
			return "node " + v.hash
		}
		ln := lines[v.from]
		if v.root {
			field := "head"
			if ln.Head != v.hash {
				field = "start"
			}
			return fmt.Sprintf("thread %s names %s %s, which", ln.ThreadID, field, v.hash)
		}
		return fmt.Sprintf("node %s, on the way from thread %s, which", v.hash, ln.ThreadID)
	}
	missing := func(v visit) {
		st := seen[v.hash]
		st.missing = true
		seen[v.hash] = st
		if st.demanded && !reported[v.hash] {
			problem(v, describe(v)+" is not in the CAS")
		}
	}
	workers := runtime.GOMAXPROCS(0) * 4
	marked := 0
	for len(frontier) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		var toRead, next []visit
		follow := func(v visit, refs []string) {
			if v.root {
				m.rootRefs[v.hash] = refs
			}
			st := seen[v.hash]
			st.marked = true
			seen[v.hash] = st
			marked++
			for _, r := range refs {
				h := r
				if !ids.IsHash(h) {
					var err error
					if h, err = ids.ParseHash(r); err != nil {
						continue // a ref that is no hash names no blob
					}
				}
				// What a node names is demanded even when a loose token
				// led to it: the node is there, and so must be its refs.
				next = add(next, visit{hash: h, from: v.from}, true)
			}
		}
		for _, v := range frontier {
			refs, known := m.index[v.hash]
			if !known || (v.root && m.readRoots) {
				toRead = append(toRead, v)
				continue
			}
			if !m.present[v.hash] && !m.exists(v.hash) {
				missing(v)
				continue
			}
			follow(v, refs)
		}
		results := readLevel(m.store, toRead, workers)
		for i, v := range toRead {
			r := results[i]
			switch {
			case r.missing:
				missing(v)
			case r.err != nil:
				// A blob that is there is kept and must be followed,
				// whoever named it.
				problem(v, describe(v)+" cannot be read: "+r.err.Error())
			case !r.sound:
				problem(v, describe(v)+" does not hash to its name: its blob is damaged, and what it points to cannot be known")
			default:
				if _, known := m.index[v.hash]; !known && allHashes(r.refs) {
					m.learned[v.hash] = r.refs
				}
				follow(v, r.refs)
			}
		}
		if onMarked != nil {
			onMarked(marked)
		}
		frontier = next
	}
	m.checkHeads(roots)
	return seen, marked, nil
}

// checkHeads finds the lines whose head is neither their start nor a state
// whose first ref (a state's start, in both implementations) is it. Heads
// that could not be followed were reported already.
func (m *marker) checkHeads(roots []root) {
	for _, r := range roots {
		if r.line == nil || r.field != "head" || r.hash == r.line.Start {
			continue
		}
		refs, ok := m.rootRefs[r.hash]
		if !ok {
			continue
		}
		if len(refs) > 0 {
			if first, err := ids.ParseHash(refs[0]); err == nil && first == r.line.Start {
				continue
			}
		}
		m.findings = append(m.findings, Finding{Kind: KindMismatch, Problem: true, Path: r.line.Path, Line: r.line.LineNo, Thread: r.line.ThreadID, Hash: r.hash,
			Message: fmt.Sprintf("thread %s names head %s and start %s, but that head is not a step of that start's chain: the line was changed, and the thread's real steps may hang from neither. Put the line back, or remove the thread (`thread rm %s`)", r.line.ThreadID, r.hash, r.line.Start, r.line.ThreadID)})
	}
}

func (m *marker) exists(h string) bool {
	ok, err := m.store.Exists(h)
	return err == nil && ok
}

func allHashes(refs []string) bool {
	for _, r := range refs {
		if !ids.IsHash(r) {
			return false
		}
	}
	return true
}

// readResult is what reading one blob found.
type readResult struct {
	refs    []string
	missing bool
	err     error
	sound   bool // its bytes hash to its name
}

// readLevel reads the blobs of a level concurrently and checks each
// against its name.
func readLevel(store *cas.Store, level []visit, workers int) []readResult {
	out := make([]readResult, len(level))
	workers = min(workers, len(level))
	var (
		wg   sync.WaitGroup
		next int
		mu   sync.Mutex
	)
	take := func() int {
		mu.Lock()
		defer mu.Unlock()
		if next >= len(level) {
			return -1
		}
		next++
		return next - 1
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for i := take(); i >= 0; i = take() {
				b, err := store.ReadInto(level[i].hash, buf)
				buf = b
				switch {
				case errors.Is(err, cas.ErrNotFound):
					out[i].missing = true
				case err != nil:
					out[i].err = err
				case ids.HashBytes(b) == level[i].hash:
					out[i].sound = true
					out[i].refs = node.RefsOf(b)
				}
			}
		}()
	}
	wg.Wait()
	return out
}
