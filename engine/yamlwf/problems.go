package yamlwf

import (
	"fmt"
	"sort"
	"strings"
)

// Error is a problem in a YAML workflow, located by its key path
// ("roles.reviewer.agent") and, when known, its line.
type Error struct {
	Path string // dotted key path; "" for the document itself
	Line int    // 1-based; 0 when unknown
	Msg  string
}

// Error formats the problem as "line N: path: message".
func (e *Error) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// MaxShown is how many problems an ErrorList prints before "and N more":
// enough to fix a file in one pass, few enough to read.
const MaxShown = 20

// maxKept bounds the problems Parse keeps, so a pathological file cannot
// grow the list without limit; the rest are only counted.
const maxKept = 1000

// ErrorList is every problem Parse found in a workflow file, in file order,
// so one `workflow add` shows all of them instead of one per attempt.
// errors.As finds each problem's *Error.
type ErrorList struct {
	Problems []*Error
	// Omitted counts problems found beyond the ones kept.
	Omitted int
}

// Error prints one problem as itself, and several as a count followed by
// one problem a line, at most MaxShown of them.
func (l *ErrorList) Error() string {
	if len(l.Problems) == 1 && l.Omitted == 0 {
		return l.Problems[0].Error()
	}
	total := len(l.Problems) + l.Omitted
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems:", total)
	for i, p := range l.Problems {
		if i == MaxShown {
			break
		}
		b.WriteString("\n  ")
		b.WriteString(p.Error())
	}
	if total > MaxShown {
		fmt.Fprintf(&b, "\n  … and %d more", total-MaxShown)
	}
	return b.String()
}

// Unwrap exposes the problems to errors.Is and errors.As.
func (l *ErrorList) Unwrap() []error {
	out := make([]error, len(l.Problems))
	for i, p := range l.Problems {
		out[i] = p
	}
	return out
}

// problems collects what a parse finds.
type problems struct {
	list    []*Error
	omitted int
}

func (ps *problems) add(e *Error) {
	if len(ps.list) >= maxKept {
		ps.omitted++
		return
	}
	ps.list = append(ps.list, e)
}

// err returns the collected problems as an *ErrorList in file order
// (problems without a line first), or nil when there are none.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	list := append([]*Error(nil), ps.list...)
	sort.SliceStable(list, func(i, j int) bool { return list[i].Line < list[j].Line })
	return &ErrorList{Problems: list, Omitted: ps.omitted}
}

// closest returns the candidate nearest to s by edit distance when it is
// near enough to be the likely intent of a typo, else "".
func closest(s string, candidates []string) string {
	best, bestDist := "", -1
	for _, c := range candidates {
		d := editDistance(strings.ToLower(s), strings.ToLower(c))
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	// A third of the word may be wrong: "aproved" → "approved" (1 of 8),
	// "rejcted" → "rejected"; "ok" does not suggest "no".
	if best == "" || bestDist > max(1, len([]rune(best))/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, by runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
