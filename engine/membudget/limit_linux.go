package membudget

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime/metrics"
	"slices"
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

// cgroupMax is the smallest memory limit on the process's cgroup path and
// its parents: memory.max under cgroup v2, memory.limit_in_bytes under v1
// (0: none).
func cgroupMax() int64 {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }() // opened read-only
	least := int64(0)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var mount, file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			mount, file = "/sys/fs/cgroup", "memory.max"
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			mount, file = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
		default:
			continue
		}
		if n := smallestLimit(mount, parts[2], file); n > 0 && (least == 0 || n < least) {
			least = n
		}
	}
	return least
}

// smallestLimit reads file in mount/path and each parent up to mount. v1
// writes "no limit" as a number near 2^63, v2 as "max".
func smallestLimit(mount, path, file string) int64 {
	least := int64(0)
	for dir := filepath.Join(mount, path); ; dir = filepath.Dir(dir) {
		if b, err := os.ReadFile(filepath.Join(dir, file)); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && n < 1<<62 && (least == 0 || n < least) {
				least = n
			}
		}
		if dir == mount || !strings.HasPrefix(dir, mount) {
			return least
		}
	}
}

// addrMargin is address space a large allocation needs beyond its bytes:
// Go maps the heap in 64 MiB arenas, with metadata beside them.
const addrMargin = 64 << 20

// osRoom reports to consider what RLIMIT_AS leaves of the address space
// (beside reusable, the heap pages Go has mapped and not in use) and what
// memory the system has available.
func osRoom(reusable int64, consider func(room, limit int64, source string)) {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_AS, &rl) == nil && rl.Cur != unix.RLIM_INFINITY {
		if vm := vmSize(); vm > 0 {
			consider(int64(rl.Cur)-vm-addrMargin+reusable, int64(rl.Cur), "RLIMIT_AS")
		}
	}
	if avail, total := memAvailable(); total > 0 {
		consider(avail, total, "available memory")
	}
}

// memAvailable reads /proc/meminfo: what the system can give without
// swapping, and all it has (bytes; 0 when unknown).
func memAvailable() (avail, total int64) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "MemAvailable":
			avail = n << 10
		case "MemTotal":
			total = n << 10
		}
	}
	if avail == 0 {
		return 0, 0
	}
	return avail, total
}
