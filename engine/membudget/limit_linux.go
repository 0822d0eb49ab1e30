package membudget

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Shares of what the operating system allows that ProcessLimit gives Go.
// Agents' processes count against the same cgroup, and a growing heap
// needs address space beyond its bytes (arena metadata, new threads'
// stacks and malloc arenas), so neither is given in full.
const (
	cgroupShare = 0.75
	addrShare   = 0.66
)

// ProcessLimit is how much memory Go's heap may take in this process as far
// as the operating system says, and what said so: the smallest of
// cgroupShare of the cgroup's memory.max (and its parents') and addrShare
// of the address space RLIMIT_AS leaves beyond what is mapped now and is
// not Go's (the binary, libc, reservations). 0 when neither is limited.
func ProcessLimit() (int64, string) {
	best, source := int64(0), ""
	consider := func(n int64, what string) {
		if n > 0 && (best == 0 || n < best) {
			best, source = n, what
		}
	}
	if m := cgroupMax(); m > 0 {
		consider(int64(float64(m)*cgroupShare), "cgroup memory.max")
	}
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_AS, &rl) == nil && rl.Cur != unix.RLIM_INFINITY {
		if vm := vmSize(); vm > 0 {
			s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
			metrics.Read(s)
			notGo := vm - int64(s[0].Value.Uint64())
			if room := int64(rl.Cur) - max(notGo, 0); room > 0 {
				consider(int64(float64(room)*addrShare), "RLIMIT_AS")
			}
		}
	}
	return best, source
}

// vmSize is the process's mapped address space in bytes (0: unknown).
func vmSize() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	pages, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// cgroupMax is the smallest memory.max on the process's cgroup v2 path
// (0: none, or not cgroup v2).
func cgroupMax() int64 {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return 0
	}
	defer f.Close()
	var path string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			path = p
		}
	}
	if path == "" {
		return 0
	}
	least := int64(0)
	for dir := filepath.Join("/sys/fs/cgroup", path); strings.HasPrefix(dir, "/sys/fs/cgroup"); dir = filepath.Dir(dir) {
		if b, err := os.ReadFile(filepath.Join(dir, "memory.max")); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && (least == 0 || n < least) {
				least = n
			}
		}
		if dir == "/sys/fs/cgroup" {
			break
		}
	}
	return least
}
