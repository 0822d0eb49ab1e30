package cli

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/connector/api"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// threadRow is one thread in `thread list --json`: the original's record,
// plus startedAt (ms), the time the list is ordered by.
type threadRow struct {
	ThreadID   string         `json:"threadId"`
	BundleHash string         `json:"bundleHash"`
	Workflow   *string        `json:"workflow"`
	Source     threads.Source `json:"source"`
	Status     threads.Status `json:"status"`
	Head       string         `json:"head"`
	Start      string         `json:"start"`
	UpdatedAt  int64          `json:"updatedAt"`
	StartedAt  int64          `json:"startedAt"`

	rec threads.Record // what the row was made from, with the line it was read from
}

func (a *app) threadListCmd() *cobra.Command {
	var lf listFlags
	var of outputFlag
	var status string
	cmd := &cobra.Command{
		Use:   "list [name] [--status S]",
		Short: "List threads, optionally filtered by workflow name",
		Long: `Threads newest first (by when they started): id, workflow, status, age (since the
start) and duration (start to end, or to now while running). -o wide adds when
each started and was last updated, its bundle, head and source; --json (or
-o json) prints every field, for scripts.

When stdout is not a terminal and no -o is given, it prints the original's
lines instead, for the scripts that parse them: <thread-id> TAB <bundle-hash>
TAB <workflow> (as the thread's start node names it, or "(unknown)"), ordered
by bundle hash then id, no header. -o table keeps the table in a pipe.`,
		Args: exactArgs(0, 1, "", ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lf.check(); err != nil {
				return err
			}
			if status != "" && !slices.Contains(api.ThreadStatuses(), threads.Status(status)) {
				return fmt.Errorf("--status %q is not a thread status (one of %s)", status, statusNames())
			}
			if err := of.apply(&lf, true, a.out()); err != nil {
				return err
			}
			l, store, err := a.store()
			if err != nil {
				return err
			}
			reg, err := a.loadRegistry()
			if err != nil {
				return err
			}
			seen := sightThreads(l) // before the records: see host.Sighting
			var recs []threads.Record
			var damaged []*threads.DamageError
			if len(args) == 1 {
				if recs, damaged, err = threadsOfWorkflow(l, reg, args[0]); err != nil {
					return err
				}
			} else if recs, damaged, err = threads.ListTolerant(l); err != nil {
				return err
			}
			if status != "" {
				// Only threads of that status: every thread's status is read
				// (its damage said once, here), then the page is cut.
				all := newestFirst(store, recs)
				damaged = append(damaged, fillStatuses(store, all, seen)...)
				recs = recs[:0]
				for _, r := range all {
					if string(r.Status) == status {
						recs = append(recs, r.rec)
					}
				}
			}
			refill := func(rows []threadRow) []*threads.DamageError {
				d := fillStatuses(store, rows, seen)
				if status != "" {
					return nil // said above
				}
				return d
			}
			if of.lines {
				shown := api.Window(originalThreadOrder(recs), lf.offset, lf.limit)
				// The original's lines carry no status, but a head or start
				// that cannot back one is damage in every format: said on
				// stderr, with exit 1, as the table says it.
				rows := make([]threadRow, len(shown))
				for i, r := range shown {
					rows[i].rec = r
				}
				damaged = append(damaged, refill(rows)...)
				if err := writeThreadLines(a.out(), store, shown); err != nil {
					return err
				}
				return a.reportDamage(damaged, false)
			}
			rows := newestFirst(store, recs)
			rows = api.Window(rows, lf.offset, lf.limit)
			// A status costs a read of the thread's head, so only the
			// threads shown get one.
			damaged = append(damaged, refill(rows)...)
			names := reg.BundleNames()
			for i := range rows {
				rows[i].Workflow = optional(names[rows[i].BundleHash])
			}
			if lf.json {
				if err := writeJSON(a.out(), rows); err != nil {
					return err
				}
				return a.reportDamage(damaged, true)
			}
			if len(rows) == 0 && len(damaged) == 0 {
				fmt.Fprintln(a.out(), "(no threads found)")
				return nil
			}
			if err := writeThreadTable(a.out(), rows, of.wide(), time.Now()); err != nil {
				return err
			}
			return a.reportDamage(damaged, false)
		},
	}
	lf.register(cmd)
	of.register(cmd, true)
	cmd.Flags().StringVar(&status, "status", "", "only threads with this status ("+statusNames()+"); waiting lists the threads that wait for a person's answer")
	return cmd
}

// statusNames lists the statuses --status takes.
func statusNames() string {
	var names []string
	for _, s := range api.ThreadStatuses() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// writeThreadTable prints rows as the table `thread list` shows people.
func writeThreadTable(w io.Writer, rows []threadRow, wide bool, now time.Time) error {
	header := []string{"THREAD", "WORKFLOW", "STATUS", "AGE", "DURATION"}
	if wide {
		header = append(header, "STARTED", "UPDATED", "BUNDLE", "HEAD", "SOURCE")
	}
	t := newTable(w, header...)
	for _, r := range rows {
		name := "(unknown)"
		if r.Workflow != nil {
			name = *r.Workflow
		}
		started := time.UnixMilli(r.StartedAt)
		// A running thread's duration grows until it ends; any other's
		// stops at its last step (its end, once finished).
		until := time.UnixMilli(r.UpdatedAt)
		if r.Status == threads.StatusRunning {
			until = now
		}
		cells := []string{r.ThreadID, name, string(r.Status), compactDuration(now.Sub(started)), compactDuration(until.Sub(started))}
		if wide {
			cells = append(cells, localTime(r.StartedAt), localTime(r.UpdatedAt), r.BundleHash, r.Head, string(r.Source))
		}
		t.row(cells...)
	}
	return t.flush()
}

// originalThreadOrder sorts records as the original's thread list does:
// by "<bundle hash>/<thread id>" in its localeCompare order.
func originalThreadOrder(recs []threads.Record) []threads.Record {
	out := slices.Clone(recs)
	slices.SortStableFunc(out, func(x, y threads.Record) int {
		return localeOrder(x.BundleHash+"/"+x.ThreadID, y.BundleHash+"/"+y.ThreadID)
	})
	return out
}

// localeOrder compares a and b as JavaScript's localeCompare (ICU's root
// collation) does for the characters thread ids and hashes are made of:
// '_' before '-' before '/' before digits before letters; letters
// regardless of case, and at the first difference in case alone, lower
// before upper. (For the upper-case ids and hashes both implementations
// write, that is byte order.)
func localeOrder(a, b string) int {
	weight := func(c byte) int {
		switch {
		case c == '_':
			return 1
		case c == '-':
			return 2
		case c == '/':
			return 3
		case c >= '0' && c <= '9':
			return 10 + int(c-'0')
		case c >= 'a' && c <= 'z':
			return 20 + int(c-'a')
		case c >= 'A' && c <= 'Z':
			return 20 + int(c-'A')
		}
		return 100 + int(c) // nothing an id holds; kept apart and ordered
	}
	for i := 0; i < len(a) && i < len(b); i++ {
		if d := cmp.Compare(weight(a[i]), weight(b[i])); d != 0 {
			return d
		}
	}
	if d := cmp.Compare(len(a), len(b)); d != 0 {
		return d
	}
	for i := 0; i < len(a); i++ {
		if a[i] != b[i] {
			// Same letter, other case: lower case first.
			return cmp.Compare(b[i], a[i])
		}
	}
	return 0
}

// writeThreadLines prints the original's `thread list` lines:
// "<id>\t<bundle hash>\t<workflow>", the workflow as the thread's start node
// names it ("(unknown)" when that node cannot be read), or "(no threads
// found)".
func writeThreadLines(w io.Writer, store *cas.Store, recs []threads.Record) error {
	if len(recs) == 0 {
		_, err := fmt.Fprintln(w, "(no threads found)")
		return err
	}
	names := make([]string, len(recs))
	eachConcurrently(len(recs), func(i int) {
		names[i] = "(unknown)"
		if n, err := store.GetNode(recs[i].Start); err == nil {
			if s, ok := n.(node.Start); ok {
				names[i] = s.Payload.Name
			}
		}
	})
	bw := bufio.NewWriterSize(w, 64<<10)
	for i, r := range recs {
		_, _ = fmt.Fprintf(bw, "%s\t%s\t%s\n", r.ThreadID, r.BundleHash, names[i]) // bufio keeps the first error for Flush
	}
	return bw.Flush()
}

// eachConcurrently calls f for 0..n-1 on a few goroutines per core: the
// per-thread reads of a list wait on the filesystem far more than on the
// CPU, so a list of 100,000 threads stays well under a second.
func eachConcurrently(n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, runtime.GOMAXPROCS(0)*4) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				f(int(i))
			}
		}()
	}
	wg.Wait()
}

// fillStatuses sets each row's status, and returns, in row order, the
// damage of the threads whose head or start cannot back one (their status
// is threads.StatusDamaged).
func fillStatuses(store *cas.Store, rows []threadRow, seen *host.Sighting) []*threads.DamageError {
	damage := make([]*threads.DamageError, len(rows))
	eachConcurrently(len(rows), func(i int) {
		rows[i].Status, damage[i] = seen.Status(store, rows[i].rec)
	})
	return slices.DeleteFunc(damage, func(d *threads.DamageError) bool { return d == nil })
}

// newestFirst makes a row of each record and orders them by start time,
// newest first (ties: the larger id first, so the order never varies).
func newestFirst(store *cas.Store, recs []threads.Record) []threadRow {
	rows := make([]threadRow, len(recs))
	for i, r := range recs {
		rows[i] = threadRow{
			ThreadID: r.ThreadID, BundleHash: r.BundleHash, Source: r.Source, Head: r.Head, Start: r.Start,
			UpdatedAt: r.UpdatedAt, StartedAt: threadStartedAt(store, r), rec: r,
		}
	}
	slices.SortFunc(rows, func(x, y threadRow) int {
		return cmp.Or(cmp.Compare(y.StartedAt, x.StartedAt), cmp.Compare(y.ThreadID, x.ThreadID), cmp.Compare(y.BundleHash, x.BundleHash))
	})
	return rows
}

// threadStartedAt is when a thread started (ms): the time in its id, else
// its first step's timestamp, else its last activity. Ids made by this
// implementation and the original both carry it, so the chain is read only
// for ids from elsewhere.
func threadStartedAt(store *cas.Store, rec threads.Record) int64 {
	if t, ok := ids.ThreadIDTime(rec.ThreadID); ok {
		return t.UnixMilli()
	}
	if frames, err := threads.Walk(store, rec.Head); err == nil && len(frames) > 0 {
		return frames[0].State.Payload.Timestamp
	}
	return rec.UpdatedAt
}

// threadsOfWorkflow lists the threads of every version of a workflow, and
// the damaged places it read past.
func threadsOfWorkflow(l storage.Layout, reg *registry.Registry, name string) ([]threads.Record, []*threads.DamageError, error) {
	if err := registry.ValidateName(name); err != nil {
		return nil, nil, err
	}
	e, ok := reg.Get(name)
	if !ok {
		return nil, nil, unknownWorkflow("workflow not registered", reg, name)
	}
	seen := map[string]bool{}
	var out []threads.Record
	var damaged []*threads.DamageError
	for _, h := range append([]string{e.Hash}, versionHashes(e)...) {
		if seen[h] {
			continue
		}
		seen[h] = true
		recs, d, err := threads.ListBundleTolerant(l, h)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, recs...)
		damaged = append(damaged, d...)
	}
	return out, damaged, nil
}
