package gc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"syscall"

	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// ErrRefused is matched (errors.Is) by a collection, or a thread removal,
// that stopped before its sweep because something a thread may need could
// not be trusted; nothing was deleted. The error is a *RefusedError that
// names every such place, and it also matches threads.ErrDamaged when a
// damaged index or history file is among them.
var ErrRefused = errors.New("garbage collection refused to sweep; nothing was deleted")

// census is everything in a storage root that names nodes, as one reading
// found it: the roots of a collection, and what makes one refuse before it
// looks at a node.
type census struct {
	// lines are the intact index entries and history lines; each names a
	// head and a start that must be nodes (strict roots).
	lines []threads.Line
	// loose are the hash-like tokens of every index and history file read
	// (HashLikeTokens), and aside those of the kept-aside files: whatever
	// else those files name, in whatever form, is kept when it is a node;
	// it is never demanded.
	loose, aside []string
	// findings are the places that refuse a sweep outright: damaged
	// index and history files, kept-aside files that cannot be read,
	// debug logs of threads no line names any more.
	findings []Finding
	// keptAside are the damaged files repairs have set aside.
	keptAside []string
	// bundles, indexFiles and historyFiles count what was read.
	bundles, indexFiles, historyFiles int
}

// takeCensus reads every bundle's index and history files and the
// kept-aside files through threads.ScanBundle — the reader listings use
// too, so a collection sees exactly the threads they show — and the debug
// logs. without, when set, is a thread being removed: its lines are left
// out, and so are its own head and start among the loose tokens.
//
// The logs are listed first. A thread's log is created after its first
// index line, and the engine removes a thread's lines only to move it to
// history or, in `thread rm`, before its log; so a log found first whose
// thread no line names afterwards means a line was lost (or a removal is
// under way): a refusal either way.
func takeCensus(l storage.Layout, without *threads.Record) (*census, error) {
	logs, questionFiles, logsErr := threadLogs(l)
	bundles, err := threads.BundleHashes(l)
	if err != nil {
		return nil, fmt.Errorf("failed to read the bundles directory: %w", err)
	}
	c := &census{bundles: len(bundles)}
	if logsErr != nil {
		c.findings = append(c.findings, Finding{Kind: KindLostThread, Problem: true, Path: l.LogsDir(""),
			Message: fmt.Sprintf("the debug logs cannot be listed (%v): a thread's log is how a lost index line is noticed, so garbage collection cannot go on without them; make the directory readable", logsErr)})
	}
	skip := func(ln threads.Line) bool {
		return without != nil && ln.BundleHash == without.BundleHash && ln.ThreadID == without.ThreadID
	}
	var dropTokens []string
	named := map[string]bool{}   // bundle/thread of every line
	damaged := map[string]bool{} // bundles whose lines cannot all be read
	for _, h := range bundles {
		err := threads.ScanBundle(l, h, threads.BundleVisitor{
			Line: func(ln threads.Line) error {
				if skip(ln) {
					dropTokens = append(dropTokens, ln.Head, ln.Start)
					return nil
				}
				named[h+"/"+ln.ThreadID] = true
				c.lines = append(c.lines, ln)
				return nil
			},
			Damaged: func(d *threads.DamageError) {
				damaged[h] = true
				c.findings = append(c.findings, damageFinding(d))
			},
			File: func(path string, b []byte) {
				if strings.HasSuffix(path, ".jsonl") {
					c.historyFiles++
				} else {
					c.indexFiles++
				}
				c.loose = append(c.loose, HashLikeTokens(b)...)
			},
		})
		if err != nil {
			return nil, err
		}
		kept, err := threads.KeptAside(l.BundleDir(h))
		if err != nil {
			c.findings = append(c.findings, Finding{Kind: KindKeptAside, Problem: true, Path: l.BundleDir(h),
				Message: fmt.Sprintf("the damaged files a repair set aside cannot be listed (%v); garbage collection keeps every node they name, so it cannot go on without them", err)})
			continue
		}
		for _, p := range kept {
			c.keptAside = append(c.keptAside, p)
			b, err := threads.ReadKeptAside(p)
			if err != nil {
				c.findings = append(c.findings, Finding{Kind: KindKeptAside, Problem: true, Path: p,
					Message: fmt.Sprintf("a damaged file a repair set aside cannot be read (%v); garbage collection keeps every node it names, so it cannot go on without it: make it readable, or delete it if its threads are not wanted", err)})
				continue
			}
			c.aside = append(c.aside, HashLikeTokens(b)...)
		}
	}
	if len(dropTokens) > 0 {
		c.loose = slicesDelete(c.loose, dropTokens)
	}
	// A thread waiting for a person names its question, and once answered
	// the answer, only in its question record until the next step is
	// written: whatever a record names is kept, and one that cannot be
	// read stops the collection.
	for _, q := range questionFiles {
		if without != nil && q.bundle == without.BundleHash && q.thread == without.ThreadID {
			continue
		}
		b, err := os.ReadFile(q.path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // its thread was removed meanwhile
			}
			c.findings = append(c.findings, Finding{Kind: KindLostThread, Problem: true, Path: q.path, Thread: q.thread,
				Message: fmt.Sprintf("thread %s's question record cannot be read (%v); garbage collection keeps every node it names, so it cannot go on without it: make it readable", q.thread, err)})
			continue
		}
		c.loose = append(c.loose, HashLikeTokens(b)...)
	}
	for _, lg := range logs {
		if named[lg.bundle+"/"+lg.thread] || damaged[lg.bundle] || (without != nil && lg.bundle == without.BundleHash && lg.thread == without.ThreadID) {
			continue // named, or maybe in a damaged file, reported already
		}
		c.findings = append(c.findings, Finding{Kind: KindLostThread, Problem: true, Path: lg.path, Thread: lg.thread,
			Message: fmt.Sprintf("thread %s has a debug log, but no index or history line of bundle %s names it: its line may have been lost, and with it what its nodes are. "+
				"Put the line back (from a backup), or, if the thread was removed on purpose, delete this log", lg.thread, lg.bundle)})
	}
	return c, nil
}

// asideOnly counts the distinct kept-aside tokens no line names: the
// roots a collection scanned beyond the lines' heads and starts.
func (c *census) asideOnly() int {
	named := make(map[string]bool, 2*len(c.lines))
	for _, ln := range c.lines {
		named[ln.Head], named[ln.Start] = true, true
	}
	n := 0
	for _, tok := range c.aside {
		if !named[tok] {
			named[tok] = true
			n++
		}
	}
	return n
}

// slicesDelete returns list without any value in drop.
func slicesDelete(list, drop []string) []string {
	gone := make(map[string]bool, len(drop))
	for _, d := range drop {
		gone[d] = true
	}
	out := list[:0]
	for _, s := range list {
		if !gone[s] {
			out = append(out, s)
		}
	}
	return out
}

// threadLog is a thread's debug log (logs/<bundle>/<thread>.info.jsonl).
type threadLog struct{ bundle, thread, path string }

// threadLogs lists the debug logs of every bundle, and the question
// records beside them (logs/<bundle>/<thread>.question.json). A logs
// directory that cannot be read is an error: the check it serves cannot
// be made. (A bundle's logs directory that is no directory holds no log.)
func threadLogs(l storage.Layout) (logs, questions []threadLog, err error) {
	logsDir := l.LogsDir("")
	entries, err := os.ReadDir(logsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("failed to read the logs directory: %w", err)
	}
	var out []threadLog
	for _, e := range entries {
		if e.Type().IsRegular() {
			continue // the engine's own log
		}
		bundle := e.Name()
		files, err := os.ReadDir(l.LogsDir(bundle))
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("failed to read the logs of bundle %s: %w", bundle, err)
		}
		for _, f := range files {
			if id, ok := strings.CutSuffix(f.Name(), ".info.jsonl"); ok && threads.CheckRef(id) == nil {
				out = append(out, threadLog{bundle: bundle, thread: id, path: l.InfoLog(bundle, id)})
			}
			if id, ok := strings.CutSuffix(f.Name(), ".question.json"); ok {
				questions = append(questions, threadLog{bundle: bundle, thread: id, path: l.QuestionFile(bundle, id)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out, questions, nil
}

// HashLikeTokens returns every run of exactly 13 letters and digits in b:
// what could be a hash in a file too damaged to parse. Keeping a few
// strings that are no hash costs nothing (they name no blob); missing one
// that is would cost a node.
func HashLikeTokens(b []byte) []string {
	var out []string
	isAlnum := func(c byte) bool {
		return c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
	}
	for i := 0; i < len(b); {
		if !isAlnum(b[i]) {
			i++
			continue
		}
		j := i
		for j < len(b) && isAlnum(b[j]) {
			j++
		}
		if j-i == 13 {
			out = append(out, string(bytes.ToUpper(b[i:j])))
		}
		i = j
	}
	return out
}
