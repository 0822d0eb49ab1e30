package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

// writeJSON prints v as two-space indented JSON, as `--json` and
// `thread show` do.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// listFlags are --json, --limit and --offset, shared by every list command.
type listFlags struct {
	json   bool
	limit  int
	offset int
}

func (f *listFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON instead of lines")
	cmd.Flags().IntVar(&f.limit, "limit", 0, "print at most N items (0: all)")
	cmd.Flags().IntVar(&f.offset, "offset", 0, "skip the first N items")
}

func (f *listFlags) check() error {
	if f.limit < 0 {
		return errors.New("--limit must be a non-negative integer")
	}
	if f.offset < 0 {
		return errors.New("--offset must be a non-negative integer")
	}
	return nil
}

// jsonFlag registers --json on a show command.
func jsonFlag(cmd *cobra.Command, dst *bool) {
	cmd.Flags().BoolVar(dst, "json", false, "print JSON")
}

// The lists people read most (thread list, workflow list) print a table with
// a header, as kubectl does: columns aligned, times as ages, and
// `-o wide` for the columns that make the lines long. Scripts use --json
// (or `-o json`), whose shape does not change. The lists the original had
// print its tab-separated lines instead when stdout is not a terminal and
// no -o is given, as gh does: scripts written for the original parse
// them; `-o table` keeps the table in a pipe.

// Output formats of -o/--output.
const (
	outputTable = "table"
	outputWide  = "wide"
	outputJSON  = "json"
)

// outputFlag is -o/--output on a list that prints a table.
type outputFlag struct {
	format string
	// lines is set by apply: print the original's tab-separated lines.
	lines bool
}

// register adds -o. A list with the original's line format (hasLines)
// says so in the flag's help.
func (o *outputFlag) register(cmd *cobra.Command, hasLines bool) {
	usage := "table, wide (more columns) or json (as --json)"
	if hasLines {
		usage += "; default: the table on a terminal, the original's tab-separated lines in a pipe"
	}
	cmd.Flags().StringVarP(&o.format, "output", "o", "", usage)
}

// apply checks the format and folds `-o json` into --json; a bad value
// names the formats there are. When a command has the original's lines
// (hasLines), no format and no --json was asked for, and stdout is not a
// terminal, it sets o.lines.
func (o *outputFlag) apply(lf *listFlags, hasLines bool, stdout io.Writer) error {
	switch o.format {
	case "":
		o.lines = hasLines && !lf.json && !isTerminal(stdout)
	case outputTable, outputWide:
	case outputJSON:
		lf.json = true
	default:
		formats := []string{outputTable, outputWide, outputJSON}
		return fmt.Errorf("invalid --output %q%s: use %s", o.format, didYouMean(o.format, formats), strings.Join(formats, ", "))
	}
	return nil
}

func (o *outputFlag) wide() bool { return o.format == outputWide }

// isTerminal says whether w is a terminal (a character device), where
// people read; anything else — a pipe, a file, a test's buffer — is read
// by programs.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// table writes rows under a header, each column as wide as its widest cell
// plus two spaces (the last column unpadded). It holds the cells until
// flush: widths are known only once every row is in.
type table struct {
	w    io.Writer
	rows [][]string
}

func newTable(w io.Writer, header ...string) *table {
	return &table{w: w, rows: [][]string{header}}
}

// row adds one line. A cell must not hold a newline (names, ids, statuses
// and times do not).
func (t *table) row(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) flush() error {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	bw := bufio.NewWriterSize(t.w, 64<<10)
	for _, r := range t.rows {
		for i, c := range r {
			_, _ = bw.WriteString(c) // bufio keeps the first error for Flush
			if i < len(r)-1 {
				_, _ = bw.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+2))
			}
		}
		_ = bw.WriteByte('\n')
	}
	return bw.Flush()
}

// compactDuration is a duration the way kubectl's AGE column shows one: two
// units at most, whole numbers ("45s", "3m12s", "2h5m", "3d4h", "400d").
func compactDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	m, h, days := s/60, s/3600, s/86400
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case m < 10:
		return fmt.Sprintf("%dm%ds", m, s%60)
	case h < 1:
		return fmt.Sprintf("%dm", m)
	case h < 10:
		return fmt.Sprintf("%dh%dm", h, m%60)
	case days < 1:
		return fmt.Sprintf("%dh", h)
	case days < 10:
		return fmt.Sprintf("%dd%dh", days, h%24)
	default:
		return fmt.Sprintf("%dd", days)
	}
}

// relativeTime is how long before now t was, in words ("3 minutes ago").
func relativeTime(t, now time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		// Another machine's clock, or this one set back: say so plainly.
		return "in the future"
	}
	unit := func(n int64, name string) string {
		if n == 1 {
			return "1 " + name + " ago"
		}
		return fmt.Sprintf("%d %ss ago", n, name)
	}
	switch {
	case d < 5*time.Second:
		return "just now"
	case d < time.Minute:
		return unit(int64(d/time.Second), "second")
	case d < time.Hour:
		return unit(int64(d/time.Minute), "minute")
	case d < 48*time.Hour:
		return unit(int64(d/time.Hour), "hour")
	case d < 60*24*time.Hour:
		return unit(int64(d/(24*time.Hour)), "day")
	case d < 2*365*24*time.Hour:
		return unit(int64(d/(30*24*time.Hour)), "month")
	default:
		return unit(int64(d/(365*24*time.Hour)), "year")
	}
}

// localTime is an instant in ms as RFC 3339 in the local zone, to the
// second: exact, sortable and readable.
func localTime(ms int64) string {
	return time.UnixMilli(ms).Local().Format(time.RFC3339)
}
