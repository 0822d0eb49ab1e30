package cli

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/connector/api"

	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/usage"
)

// prices reads config.prices; a workflow.yaml that cannot be read leaves
// the totals unpriced, with a warning, rather than hiding the tokens.
func (a *app) prices(l storage.Layout) registry.Prices {
	p, err := usage.LoadPrices(l)
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "warning: costs not shown: %v\n", err)
	}
	return p
}

// threadUsage is what a thread's model calls used, per step and in all.
func (a *app) threadUsage(l storage.Layout, rec threads.Record) (usage.Thread, error) {
	recs, err := usage.ReadThread(l, rec.BundleHash, rec.ThreadID)
	if err != nil {
		return usage.Thread{}, fmt.Errorf("thread %s: reading its model usage: %w", rec.ThreadID, err)
	}
	return usage.Summarize(recs, a.prices(l)), nil
}

func (a *app) threadUsageCmd() *cobra.Command {
	var lf listFlags
	var of outputFlag
	var since, until, workflow string
	cmd := &cobra.Command{
		Use:   "usage [thread-id]",
		Short: "Model tokens and cost per workflow on this machine, or per step of one thread",
		Long: `Totals of the model calls threads made on this machine — calls, prompt and
completion tokens, and the cost at workflow.yaml's config.prices — per workflow,
over a time range. --since and --until take a date (2026-03-01, local time), an
RFC 3339 time, or an age such as 36h or 7d (that long ago); --until is
exclusive. -o wide adds the calls whose server reported no usage, the calls of
unpriced models, and the models; --json (or -o json) prints every field.

With a thread id: that thread's calls per step (the role steps as thread show
numbers them, then the end's summary), with a TOTAL row; --json prints
thread show's usage fields ({threadId, steps: [{step, role, …totals}], total}).`,
		Args: exactArgs(0, 1, "", "usage takes at most one thread id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := of.apply(&lf, false, a.out()); err != nil {
				return err
			}
			if len(args) == 1 {
				if since != "" || until != "" || workflow != "" {
					return errors.New("--since, --until and --workflow count a machine's threads: not with a thread id")
				}
				return a.printThreadUsage(args[0], lf.json, of.wide())
			}
			now := time.Now()
			var f usage.Filter
			var err error
			if f.Since, err = parseTimeFlag("--since", since, now); err != nil {
				return err
			}
			if f.Until, err = parseTimeFlag("--until", until, now); err != nil {
				return err
			}
			if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
				return errors.New("--since must be before --until")
			}
			if workflow != "" {
				if err := registry.ValidateName(workflow); err != nil {
					return err
				}
				f.Workflow = workflow
			}
			l, err := a.layout()
			if err != nil {
				return err
			}
			rep, err := usage.Machine(l, f, a.prices(l))
			if err != nil {
				return err
			}
			if lf.json {
				// The API's shape (GET /api/usage), so scripts read either.
				return writeJSON(a.out(), api.NewUsageReport(f, rep))
			}
			return writeUsageTable(a, rep, of.wide())
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "count calls from this time on (date, RFC 3339 time, or an age such as 7d)")
	cmd.Flags().StringVar(&until, "until", "", "count calls before this time (date, RFC 3339 time, or an age such as 1d)")
	cmd.Flags().StringVar(&workflow, "workflow", "", "count only this workflow's threads")
	cmd.Flags().BoolVar(&lf.json, "json", false, "print JSON instead of lines")
	of.register(cmd, false)
	return cmd
}

// stepUsage is one step's line of `thread usage <id>`.
type stepUsage struct {
	Step int    `json:"step"`
	Role string `json:"role,omitempty"`
	usage.Totals
}

// printThreadUsage prints one thread's model usage per step.
func (a *app) printThreadUsage(arg string, asJSON, wide bool) error {
	l, err := a.layout()
	if err != nil {
		return err
	}
	rec, err := resolveThread(l, arg)
	if err != nil {
		return err
	}
	recs, err := usage.ReadThread(l, rec.BundleHash, rec.ThreadID)
	if err != nil {
		return fmt.Errorf("thread %s: reading its model usage: %w", rec.ThreadID, err)
	}
	sum := usage.Summarize(recs, a.prices(l))
	// The role a step ran, from its calls (a supervisor's or summarizer's
	// call may not name one).
	roles := map[int]string{}
	for _, r := range recs {
		if roles[r.Step] == "" {
			roles[r.Step] = r.Role
		}
	}
	steps := make([]stepUsage, 0, len(sum.Steps))
	for n, t := range sum.Steps {
		steps = append(steps, stepUsage{Step: n, Role: roles[n], Totals: *t})
	}
	slices.SortFunc(steps, func(x, y stepUsage) int { return x.Step - y.Step })
	if asJSON {
		return writeJSON(a.out(), struct {
			ThreadID string       `json:"threadId"`
			Steps    []stepUsage  `json:"steps"`
			Total    usage.Totals `json:"total"`
		}{rec.ThreadID, steps, sum.Total})
	}
	if sum.Total.Calls == 0 {
		fmt.Fprintln(a.out(), "(no model calls recorded)")
		return nil
	}
	header := []string{"STEP", "ROLE", "CALLS", "PROMPT", "COMPLETION", "COST"}
	if wide {
		header = append(header, "UNKNOWN", "UNPRICED", "MODELS")
	}
	t := newTable(a.out(), header...)
	for _, s := range steps {
		role := s.Role
		if role == "" {
			role = "-"
		}
		t.row(usageCells(strconv.Itoa(s.Step), role, s.Totals, wide)...)
	}
	t.row(usageCells("TOTAL", "", sum.Total, wide)...)
	return t.flush()
}

// usageCells is a usage table's row: the leading cells, then the totals.
func usageCells(first, second string, tot usage.Totals, wide bool) []string {
	cells := []string{first, second, strconv.Itoa(tot.Calls), strconv.FormatInt(tot.PromptTokens, 10), strconv.FormatInt(tot.CompletionTokens, 10), costCell(tot)}
	if wide {
		cells = append(cells, strconv.Itoa(tot.UnknownCalls), strconv.Itoa(tot.UnpricedCalls), strings.Join(tot.Models, ","))
	}
	return cells
}

// writeUsageTable prints the report as a table with a TOTAL row.
func writeUsageTable(a *app, rep usage.Report, wide bool) error {
	if rep.Total.Calls == 0 {
		fmt.Fprintln(a.out(), "(no model calls recorded)")
		return nil
	}
	header := []string{"WORKFLOW", "THREADS", "CALLS", "PROMPT", "COMPLETION", "COST"}
	if wide {
		header = append(header, "UNKNOWN", "UNPRICED", "MODELS")
	}
	t := newTable(a.out(), header...)
	row := func(name string, threads int, tot usage.Totals) {
		t.row(usageCells(name, strconv.Itoa(threads), tot, wide)...)
	}
	for _, w := range rep.Workflows {
		name := w.Workflow
		if name == "" {
			name = "(unknown)"
		}
		row(name, w.Threads, w.Totals)
	}
	row("TOTAL", rep.Threads, rep.Total)
	return t.flush()
}

// costCell is a total's cost (usage.FormatCost), "-" when nothing was
// priced, with a "+" when some calls are left out of it (unpriced models).
func costCell(t usage.Totals) string {
	if t.CostUSD == nil {
		return "-"
	}
	s := usage.FormatCost(*t.CostUSD)
	if t.UnpricedCalls > 0 {
		s += "+"
	}
	return s
}

// parseTimeFlag reads a --since/--until value: "" (open), a date
// (midnight, local time), an RFC 3339 time, or an age ("36h", "7d") before
// now.
func parseTimeFlag(flag, v string, now time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.ParseInLocation(time.DateOnly, v, time.Local); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	age, err := time.ParseDuration(v)
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, derr := strconv.Atoi(days)
		age, err = time.Duration(n)*24*time.Hour, derr
	}
	if err != nil || age <= 0 {
		return time.Time{}, fmt.Errorf("%s %q: want a date (2026-03-01), an RFC 3339 time, or an age such as 36h or 7d", flag, v)
	}
	return now.Add(-age), nil
}
