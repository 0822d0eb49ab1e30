package membudget

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
)

// DefaultBudget is a thread's budget when neither workflow.yaml nor the
// host's --memory-budget sets one. A role is glue between models and agent
// processes, which hold their memory elsewhere, so it rarely needs more than
// tens of MiB; and a Go host keeps about 1.7 GB of address space in
// reservations, so under a 2.5 GB address-space limit a budget much above
// this would let a runaway role reach the limit before it reached its
// budget.
const DefaultBudget int64 = 512 << 20

// MinBudget is the smallest budget accepted: a bare number counts bytes,
// and "512" meant as MiB would otherwise fail every thread at its first
// step.
const MinBudget int64 = 1 << 20

// Off is the budget of a thread that has none ("off").
const Off int64 = 0

var units = []struct {
	suffix string
	shift  uint
}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}

// ParseSize reads a budget the way GOMEMLIMIT spells sizes: a whole number
// of bytes with an optional unit B, KiB, MiB, GiB or TiB ("512MiB",
// "1GiB"), or "off" for no budget (Off). It refuses budgets below
// MinBudget.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "off") {
		return Off, nil
	}
	shift := uint(0)
	for _, u := range units {
		if num, ok := strings.CutSuffix(t, u.suffix); ok {
			t, shift = strings.TrimSpace(num), u.shift
			break
		}
	}
	n, err := strconv.ParseUint(t, 10, 63)
	if err != nil || (shift > 0 && n > math.MaxInt64>>shift) {
		return 0, fmt.Errorf("memory budget %q: want a number of bytes with an optional unit B, KiB, MiB, GiB or TiB (such as 512MiB), or \"off\"", s)
	}
	b := int64(n) << shift
	if b < MinBudget {
		return 0, fmt.Errorf("memory budget %q is below the minimum of 1MiB (a bare number counts bytes: write 512MiB, not 512)", s)
	}
	return b, nil
}

// FormatSize writes n bytes in the largest binary unit that keeps one
// decimal meaningful, in ParseSize's spelling when n is a whole number of
// that unit ("512MiB", "1.5GiB").
func FormatSize(n int64) string {
	for _, u := range units[:4] {
		if n >= 1<<u.shift {
			v := float64(n) / float64(int64(1)<<u.shift)
			if v == math.Trunc(v) {
				return fmt.Sprintf("%d%s", int64(v), u.suffix)
			}
			return fmt.Sprintf("%.1f%s", v, u.suffix)
		}
	}
	return fmt.Sprintf("%dB", n)
}

var (
	override    atomic.Int64
	overrideSet atomic.Bool
)

// SetOverride makes budget (bytes, or Off) every thread's budget in this
// process, whatever workflow.yaml says: the host command's --memory-budget
// is the operator's word for the whole host.
func SetOverride(budget int64) {
	override.Store(budget)
	overrideSet.Store(true)
}

// ClearOverride undoes SetOverride (for tests).
func ClearOverride() { overrideSet.Store(false) }

// Resolve is the budget of a thread whose workflow.yaml says configured
// ("" when it says nothing): the override when one is set, else the
// configured size, else DefaultBudget. A configured size that does not
// parse (workflow.yaml is validated when read, so only a hand-built config)
// counts as unset rather than as no budget.
func Resolve(configured string) int64 {
	if overrideSet.Load() {
		return override.Load()
	}
	if configured != "" {
		if b, err := ParseSize(configured); err == nil {
			return b
		}
	}
	return DefaultBudget
}

// Budgeted is implemented by a workflow host (the executor's) that gives
// the JavaScript of its runs a memory budget; package jsrt asks for it.
type Budgeted interface {
	// MemoryBudget is the run's budget in bytes (Off: none).
	MemoryBudget() int64
}

// ExceededError is why a runtime was interrupted: it held more than its
// thread's budget, or the most when the host as a whole ran short.
type ExceededError struct {
	// Budget is the thread's budget in bytes (Off: none).
	Budget int64
	// Held is what the watchdog had charged the runtime.
	Held int64
	// HostLimit is set when it was the host's overall limit (the Go memory
	// limit) that was reached, not the thread's own budget.
	HostLimit int64
	// Share says the runtime held more than its share of HostLimit (a
	// third), whatever the heap as a whole held.
	Share bool
	// Burst is set when the runtime allocated this much in one go without
	// asking, more than half its share of HostLimit.
	Burst int64
}

// ErrExceeded matches every *ExceededError with errors.Is.
var ErrExceeded = errors.New("memory budget exceeded")

// Is makes errors.Is(err, ErrExceeded) true.
func (e *ExceededError) Is(target error) bool { return target == ErrExceeded }

// Error is the thread's summary: what happened, the budget, and how to
// raise it.
func (e *ExceededError) Error() string {
	if e.Burst > 0 {
		return fmt.Sprintf("out of memory: this thread's JavaScript allocated about %s at once (an operation such as s + s copying a large string or array), "+
			"more than half of what one thread may hold of the engine host (a third of its %s), and holds about %s; the next such operation could take the host down. "+
			"Build large data in parts, or give the host more memory (GOMEMLIMIT, or the limit of its container or ulimit)%s",
			FormatSize(e.Burst), FormatSize(e.HostLimit), FormatSize(e.Held), e.budgetNote())
	}
	if e.Share {
		return fmt.Sprintf("out of memory: this thread's JavaScript held about %s, more than a third of what the engine host may hold (%s), "+
			"so one operation copying what it holds could take the host down. "+
			"Give the host more memory (GOMEMLIMIT, or the limit of its container or ulimit), or hold less: memoryBudget in workflow.yaml bounds what a thread may hold%s",
			FormatSize(e.Held), FormatSize(e.HostLimit), e.budgetNote())
	}
	if e.HostLimit > 0 {
		return fmt.Sprintf("out of memory: the engine host's heap reached its limit of %s and this thread's JavaScript held the most of it (about %s). "+
			"Give the host more memory (GOMEMLIMIT, or the limit of its container or ulimit), run fewer threads at once (engine serve --max-threads), "+
			"or lower memoryBudget in workflow.yaml so a thread fails sooner%s",
			FormatSize(e.HostLimit), FormatSize(e.Held), e.budgetNote())
	}
	suggest := FormatSize(nextPowerOfTwo(2 * e.Budget))
	return fmt.Sprintf("memory budget exceeded: this thread's JavaScript held about %s, over its budget of %s. "+
		"If the workflow needs more, raise memoryBudget in the config section of workflow.yaml (memoryBudget: %s) "+
		"or start the engine host with --memory-budget %s; \"off\" removes the budget",
		FormatSize(e.Held), FormatSize(e.Budget), suggest, suggest)
}

// budgetNote ends a summary about the host's memory with the thread's own
// budget, so every out-of-memory summary names both limits, whichever
// bound first.
func (e *ExceededError) budgetNote() string {
	if e.Budget == Off {
		return " (this thread has no memory budget of its own: memoryBudget off)"
	}
	return fmt.Sprintf(" (this thread's memory budget is %s)", FormatSize(e.Budget))
}

func nextPowerOfTwo(n int64) int64 {
	p := MinBudget
	for p < n && p < math.MaxInt64/2 {
		p *= 2
	}
	return p
}
