package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/gc"
)

func (a *app) doctorCmd() *cobra.Command {
	var (
		repair    bool
		asJSON    bool
		tempGrace time.Duration
	)
	cmd := &cobra.Command{
		Use:   "doctor [--repair]",
		Short: "Check the storage root for damage; --repair rebuilds what the CAS allows",
		Long: `Checks every threads.json and history line, every node each thread reaches
(missing, damaged, or a head that is not of its start's chain), debug logs of
threads no line names any more, every blob against its name, the CAS refs
index, and temporary files left by interrupted writes. Every problem it finds
is one that makes cas gc and thread rm refuse. Exits 1 while problems remain.

--repair rebuilds damaged index and history files from what is left of them
and the CAS (the damaged file is kept as <name>.damaged-<time>, never
deleted), rebuilds the refs index from the blobs, and removes temporary files
older than --temp-grace. It never deletes a node.`,
		Args: exactArgs(0, 0, "", "doctor takes no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := a.lookLayout()
			if err != nil {
				return err
			}
			if _, err := os.Stat(l.Root); errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("storage root %s does not exist: nothing to check", l.Root)
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			status := a.statusLine()
			opts := gc.DoctorOptions{Repair: repair, TempGrace: tempGrace, Progress: func(step string, done, total int) {
				if total > 0 {
					status.show("doctor: %s %d/%d", step, done, total)
				} else if done > 0 {
					status.show("doctor: %s %d", step, done)
				} else {
					status.show("doctor: %s", step)
				}
			}}
			rep, err := gc.Doctor(ctx, l, cas.Open(l.CASDir()), opts)
			status.done()
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(a.out(), rep); err != nil {
					return err
				}
			} else {
				printDoctorReport(a, rep, repair)
			}
			if rep.Problems() > 0 {
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&repair, "repair", false, "rebuild what can be rebuilt from the CAS")
	cmd.Flags().DurationVar(&tempGrace, "temp-grace", gc.DefaultTempGrace, "leave temporary files younger than this alone (a write may be under way)")
	jsonFlag(cmd, &asJSON)
	return cmd
}

// printDoctorReport writes the report for a person: what was checked, each
// finding on one line (problems first), what was repaired, and what to do.
func printDoctorReport(a *app, rep gc.Report, repaired bool) {
	w := a.out()
	c := rep.Checked
	fmt.Fprintf(w, "checked %s: %s, %s, %s, %s, %s\n", rep.Root,
		plural(c.Bundles, "bundle"), plural(c.IndexFiles, "index file"), plural(c.HistoryFiles, "history file"),
		plural(c.Threads, "thread"), plural(c.Blobs, "blob"))
	for _, r := range rep.Repaired {
		fmt.Fprintf(w, "repaired %s: %s: %s\n", r.Kind, r.Path, r.Message)
	}
	for _, problems := range []bool{true, false} {
		for _, f := range rep.Findings {
			if f.Problem != problems {
				continue
			}
			label := "note"
			if f.Problem {
				label = "PROBLEM"
			}
			where := f.Path
			if f.Line > 0 {
				where += fmt.Sprintf(", line %d", f.Line)
			}
			fix := ""
			if f.Problem && f.Repairable {
				fix = " (--repair fixes this)"
			}
			fmt.Fprintf(w, "%s %s: %s: %s%s\n", label, f.Kind, where, f.Message, fix)
		}
	}
	n, fixable := rep.Problems(), rep.Repairable()
	var summary []string
	if repaired {
		summary = append(summary, fmt.Sprintf("repaired %d", len(rep.Repaired)))
	}
	switch {
	case n == 0:
		summary = append(summary, "no problems found")
	case fixable > 0 && !repaired:
		summary = append(summary, fmt.Sprintf("%s, %d of them repairable: run `uncaged-workflow doctor --repair`", plural(n, "problem"), fixable))
	default:
		summary = append(summary, fmt.Sprintf("%s that --repair cannot fix: each says what to do", plural(n, "problem")))
	}
	fmt.Fprintln(w, strings.Join(summary, "; "))
}

func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
