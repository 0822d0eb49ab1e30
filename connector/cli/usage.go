package cli

import (
	"errors"
	"fmt"
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
		Use:   "usage",
		Short: "Model tokens and cost per workflow on this machine",
		Long: `Totals of the model calls threads made on this machine — calls, prompt and
completion tokens, and the cost at workflow.yaml's config.prices — per workflow,
over a time range. --since and --until take a date (2026-03-01, local time), an
RFC 3339 time, or an age such as 36h or 7d (that long ago); --until is
exclusive. -o wide adds the calls whose server reported no usage, the calls of
unpriced models, and the models; --json (or -o json) prints every field.`,
		Args: exactArgs(0, 0, "", ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := of.apply(&lf); err != nil {
				return err
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
	of.register(cmd)
	return cmd
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
		cells := []string{name, strconv.Itoa(threads), strconv.Itoa(tot.Calls), strconv.FormatInt(tot.PromptTokens, 10), strconv.FormatInt(tot.CompletionTokens, 10), formatCost(tot)}
		if wide {
			cells = append(cells, strconv.Itoa(tot.UnknownCalls), strconv.Itoa(tot.UnpricedCalls), strings.Join(tot.Models, ","))
		}
		t.row(cells...)
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

// formatCost is a cost in dollars, "-" when nothing was priced, with a
// "+" when some calls are left out of it (unpriced models).
func formatCost(t usage.Totals) string {
	if t.CostUSD == nil {
		return "-"
	}
	s := fmt.Sprintf("$%.4f", *t.CostUSD)
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
