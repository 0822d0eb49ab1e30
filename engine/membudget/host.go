package membudget

import (
	"math"
	"os"
	"runtime/debug"
)

// hostLimitShare is the part of Go's memory limit the live heap may fill
// before the host stops its biggest runtime: past it the collector runs
// almost without pause and the next growth is the process's last.
const hostLimitShare = 0.9

// HostSetup is what SetupHost decided, for the host's log.
type HostSetup struct {
	// Budget is every thread's budget when the flag set one (-1: not set,
	// workflow.yaml or DefaultBudget decides per thread).
	Budget int64
	// MemoryLimit is Go's memory limit in force (0: none), and
	// FromEnvironment whether GOMEMLIMIT set it rather than SetupHost.
	MemoryLimit     int64
	FromEnvironment bool
	// Source says what the limit was derived from ("cgroup memory.max",
	// "RLIMIT_AS", "GOMEMLIMIT", or "").
	Source string
}

// SetupHost prepares this process to be an engine host. flag is the host
// command's --memory-budget ("" when not given): when set it is every
// thread's budget. Unless GOMEMLIMIT is set, Go's memory limit is set
// from what the operating system lets the process have (see
// ProcessLimit), so the collector works harder as the heap nears it; and
// either way that limit becomes the host's overall cap (see the package
// documentation).
func SetupHost(flag string) (HostSetup, error) {
	setup := HostSetup{Budget: -1}
	if flag != "" {
		b, err := ParseSize(flag)
		if err != nil {
			return setup, err
		}
		SetOverride(b)
		setup.Budget = b
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		setup.FromEnvironment, setup.Source = true, "GOMEMLIMIT"
	} else if limit, source := ProcessLimit(); limit > 0 {
		debug.SetMemoryLimit(limit)
		setup.Source = source
	}
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
		setup.MemoryLimit = l
		Default.SetHostLimit(int64(float64(l) * hostLimitShare))
	}
	return setup, nil
}
