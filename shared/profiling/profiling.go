// Package profiling lets a person profile the binaries where they run:
// with UNCAGED_CPUPROFILE=/some/dir set, a process writes its CPU profile to
// /some/dir/<program>.<pid>.prof when it exits, and what it allocated
// (pprof's allocs profile) to <program>.<pid>.allocs.prof beside it.
package profiling

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
)

// EnvCPUProfile names the directory profiles are written to.
const EnvCPUProfile = "UNCAGED_CPUPROFILE"

// Start begins CPU profiling when EnvCPUProfile is set; call the returned
// function before the process exits.
func Start() func() {
	dir := os.Getenv(EnvCPUProfile)
	if dir == "" {
		return func() {}
	}
	path := filepath.Join(dir, fmt.Sprintf("%s.%d.prof", filepath.Base(os.Args[0]), os.Getpid()))
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "profiling:", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close() // nothing written to keep
		fmt.Fprintln(os.Stderr, "profiling:", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "profiling:", err)
		}
		allocs, err := os.Create(strings.TrimSuffix(path, ".prof") + ".allocs.prof")
		if err != nil {
			fmt.Fprintln(os.Stderr, "profiling:", err)
			return
		}
		err = pprof.Lookup("allocs").WriteTo(allocs, 0)
		if cerr := allocs.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "profiling:", err)
		}
	}
}
