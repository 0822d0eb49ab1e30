package cli

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/gc"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/usage"
)

func (a *app) threadCmd() *cobra.Command {
	return group("thread", "Thread execution:", "Run, inspect and control threads",
		a.threadRunCmd("run"),
		a.threadListCmd(),
		a.threadShowCmd(),
		a.threadRmCmd(),
		a.threadForkCmd(),
		a.threadPsCmd(),
		a.threadUsageCmd(),
		a.controlCmd("kill", "Kill a running thread", true, (*host.Client).Kill),
		a.liveCmd("live"),
		a.controlCmd("pause", "Pause a running thread", false, (*host.Client).Pause),
		a.controlCmd("resume", "Resume a paused or interrupted thread", true, (*host.Client).Resume),
		a.threadAnswerCmd(),
	)
}

// doctorHint tells a person what to do about a damaged index or history
// file.
const doctorHint = "`uncaged-workflow doctor` shows what is damaged; `uncaged-workflow doctor --repair` rebuilds it from the CAS"

// doctorAdvice points to doctor for problems a repair may not fix (a node
// gone from the CAS): it says what to do about each.
const doctorAdvice = "`uncaged-workflow doctor` lists every problem and what to do about each"

// reportDamage names the damaged files a list read past, and the lines of
// the threads it shows as damaged, on stderr (as a JSON object
// {"damaged": [...]} with --json, so stdout keeps its shape), and fails
// the command: what it printed is incomplete.
func (a *app) reportDamage(damaged []*threads.DamageError, asJSON bool) error {
	if len(damaged) == 0 {
		return nil
	}
	if asJSON {
		if err := writeJSON(a.env.Stderr, map[string]any{"damaged": damaged}); err != nil {
			return err
		}
		return exitError{1}
	}
	var files, lines bool
	for _, d := range damaged {
		fmt.Fprintf(a.env.Stderr, "warning: %v\n", d)
		if d.Thread == "" {
			files = true
		} else {
			lines = true
		}
	}
	if lines {
		fmt.Fprintln(a.env.Stderr, "warning: a thread whose head or start cannot be trusted is shown as damaged, not with a status")
	}
	if files {
		fmt.Fprintf(a.env.Stderr, "warning: threads named only there are not listed; %s\n", doctorHint)
	} else {
		fmt.Fprintf(a.env.Stderr, "warning: %s\n", doctorAdvice)
	}
	return exitError{1}
}

// withDoctorHint adds what to do to an error caused by a damaged file, or
// by anything else that stopped a collection.
func withDoctorHint(err error) error {
	switch {
	case errors.Is(err, threads.ErrDamaged):
		return fmt.Errorf("%w\n%s", err, doctorHint)
	case errors.Is(err, gc.ErrRefused):
		return fmt.Errorf("%w\n%s", err, doctorAdvice)
	}
	return err
}

func versionHashes(e registry.Entry) []string {
	out := make([]string, 0, len(e.History))
	for _, v := range e.History {
		out = append(out, v.Hash)
	}
	return out
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// stepView is one step of `thread show`.
type stepView struct {
	Role        string  `json:"role"`
	Hash        string  `json:"hash"`
	Timestamp   int64   `json:"timestamp"`
	Content     string  `json:"content"`
	ChildThread *string `json:"childThread"`
	// Usage is what the step's model calls used (absent: it made none).
	Usage *usage.Totals `json:"usage,omitempty"`
}

// threadView is `thread show` output: the original's fields, plus status
// and updatedAt.
type threadView struct {
	ThreadID    string         `json:"threadId"`
	BundleHash  string         `json:"bundleHash"`
	Head        string         `json:"head"`
	Start       string         `json:"start"`
	ParentState *string        `json:"parentState"`
	Source      threads.Source `json:"source"`
	Status      threads.Status `json:"status"`
	UpdatedAt   int64          `json:"updatedAt"`
	Steps       []stepView     `json:"steps"`
	// Result is how a finished thread ended (absent while it runs).
	Result *threadResult `json:"result,omitempty"`
	// Usage is what all the thread's model calls used, with their cost at
	// config.prices (package usage).
	Usage usage.Totals `json:"usage"`
}

// threadResult is a finished thread's __end__ node.
type threadResult struct {
	ReturnCode int    `json:"returnCode"`
	Summary    string `json:"summary"`
	// Usage is what the calls made while ending (the summarizer's) used.
	Usage *usage.Totals `json:"usage,omitempty"`
}

func (a *app) threadShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show <id>",
		Short: "Show thread details and state",
		Args:  exactArgs(1, 1, "show requires <id>", ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, store, err := a.store()
			if err != nil {
				return err
			}
			seen := sightThreads(l) // before the records: see host.Sighting
			rec, err := resolveThread(l, args[0])
			if err != nil {
				return err
			}
			status, damage := seen.Status(store, rec)
			view := threadView{
				ThreadID: rec.ThreadID, BundleHash: rec.BundleHash, Head: rec.Head, Start: rec.Start,
				Source: rec.Source, Status: status, UpdatedAt: rec.UpdatedAt, Steps: []stepView{},
			}
			if n, err := store.GetNode(rec.Start); err == nil {
				if s, ok := n.(node.Start); ok {
					view.ParentState = optional(s.Payload.ParentState)
				}
			}
			var frames []threads.Frame
			if damage == nil { // no step can be trusted from an unsound head
				if frames, err = threads.Walk(store, rec.Head); err != nil {
					return err
				}
			}
			spent, err := a.threadUsage(l, rec)
			if err != nil {
				return err
			}
			view.Usage = spent.Total
			for _, f := range frames {
				p := f.State.Payload
				if p.Role == node.RoleEnd {
					view.Result = &threadResult{ReturnCode: f.State.ReturnCode(), Summary: f.State.Summary(), Usage: spent.Step(len(view.Steps) + 1)}
				}
				if p.Role == node.RoleEnd || p.Role == node.RoleFork {
					continue
				}
				view.Steps = append(view.Steps, stepView{
					Role: p.Role, Hash: f.Hash, Timestamp: p.Timestamp,
					Content: contentText(store, p.Content), ChildThread: optional(p.ChildThread),
					Usage: spent.Step(len(view.Steps) + 1),
				})
			}
			// The output is JSON either way; --json is accepted for symmetry.
			if err := writeJSON(a.out(), view); err != nil {
				return err
			}
			if damage != nil {
				return a.reportDamage([]*threads.DamageError{damage}, asJSON)
			}
			return nil
		},
	}
	jsonFlag(cmd, &asJSON)
	return cmd
}

// contentText is a content node's payload, or the original's placeholder.
func contentText(store *cas.Store, hash string) string {
	if text, ok := threads.ContentPayload(store, hash); ok {
		return text
	}
	return "(content not in CAS; contentHash=" + hash + ")"
}

func (a *app) threadRmCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "rm <id> [--force]",
		Short: "Remove a thread",
		Long: `Removes a thread's index and history lines and its logs, then collects the
nodes only it reached (as cas gc does). A running or paused thread is not
removed: kill it first, or give --force, which kills it and waits until it has
stopped. Damage anywhere else in the storage root refuses the removal before
anything changes; doctor shows it.`,
		Args: exactArgs(1, 1, "rm requires <id>", ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, store, err := a.store()
			if err != nil {
				return err
			}
			rec, err := resolveThread(l, args[0])
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			_, err = gc.RemoveThread(ctx, l, store, rec, gc.RemoveOptions{
				Collect:     a.gcOptions(l),
				RemoveLines: func(rec threads.Record) error { return host.RemoveLines(l, rec, force) },
				Warn:        func(err error) { fmt.Fprintf(a.env.Stderr, "warning: %v\n", err) },
			})
			switch {
			case errors.Is(err, gc.ErrNotRemoved):
				return withDoctorHint(fmt.Errorf("thread %s was not removed: %w", rec.ThreadID, err))
			case err != nil:
				return withDoctorHint(fmt.Errorf("removed thread %s, but garbage collection failed: %w", rec.ThreadID, err))
			}
			fmt.Fprintf(a.out(), "removed thread %s\n", rec.ThreadID)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "kill the thread first if it is running or paused")
	return cmd
}

// minThreadPrefix is the shortest part of a thread id that may name it,
// as git asks of a commit: fewer characters name too many threads to be
// typed on purpose.
const minThreadPrefix = 4

// maxListedCandidates is how many threads an ambiguous prefix lists.
const maxListedCandidates = 10

// resolveThread finds the thread the id a person typed names — the one
// function every command taking a thread id resolves it with: the whole
// id (threads.ResolveRef: any case), else a unique prefix of one, as git
// takes a commit's. An ambiguous prefix lists the threads it could be; an
// id that names nothing says so, with the nearest id when one is close.
func resolveThread(l storage.Layout, id string) (threads.Record, error) {
	rec, err := threads.ResolveRef(l, id)
	if !errors.Is(err, threads.ErrNotFound) {
		return rec, err
	}
	recs, _, lerr := threads.ListTolerant(l)
	if lerr != nil {
		return rec, lerr
	}
	var matches []threads.Record
	seen := map[string]bool{}
	ids := make([]string, 0, len(recs))
	for _, r := range recs {
		if seen[r.ThreadID] {
			continue
		}
		seen[r.ThreadID] = true
		ids = append(ids, r.ThreadID)
		if len(r.ThreadID) >= len(id) && strings.EqualFold(r.ThreadID[:len(id)], id) {
			matches = append(matches, r)
		}
	}
	switch {
	case len(matches) > 0 && len(id) < minThreadPrefix:
		return rec, fmt.Errorf("thread not found: %s (a prefix of a thread id needs at least %d characters; %d start with %q)", id, minThreadPrefix, len(matches), id)
	case len(matches) == 1:
		return matches[0], nil
	case len(matches) > 1:
		slices.SortFunc(matches, func(x, y threads.Record) int { return strings.Compare(x.ThreadID, y.ThreadID) })
		var b strings.Builder
		fmt.Fprintf(&b, "thread id %s is ambiguous: %d threads start with it; type more of the id:", id, len(matches))
		for i, m := range matches {
			if i == maxListedCandidates {
				fmt.Fprintf(&b, "\n  … and %d more", len(matches)-maxListedCandidates)
				break
			}
			fmt.Fprintf(&b, "\n  %s", m.ThreadID)
		}
		return rec, errors.New(b.String())
	case errors.Is(err, threads.ErrDamaged):
		// Not in what could be read; a damaged file may name it.
		return rec, withDoctorHint(err)
	}
	return rec, fmt.Errorf("thread not found: %s%s", id, didYouMean(id, ids))
}
