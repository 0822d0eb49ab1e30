package loadgen

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat times; it is
// 100 on every architecture Go supports on Linux.
const clockTicks = 100

// CPUTime is the user+system CPU a process has used, from
// /proc/<pid>/stat.
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStat(b)
}

// parseStat reads utime and stime (fields 14 and 15) of a /proc/<pid>/stat.
func parseStat(b []byte) (time.Duration, error) {
	// The command name (field 2) may hold spaces and parentheses; the
	// fields after its last closing parenthesis are plain.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat: no command name")
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("malformed /proc stat: %d fields after the command name, want at least 13", len(fields))
	}
	ut, err1 := strconv.ParseUint(fields[11], 10, 63)
	st, err2 := strconv.ParseUint(fields[12], 10, 63)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("malformed /proc stat: utime %q, stime %q", fields[11], fields[12])
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// Memory is a process's resident memory now (VmRSS) and its high-water
// mark (VmHWM), in bytes, from /proc/<pid>/status.
func Memory(pid int) (rss, peak int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	return parseStatus(b)
}

// parseStatus reads VmRSS and VmHWM ("VmRSS:   1234 kB") of a
// /proc/<pid>/status; both must be there.
func parseStatus(b []byte) (rss, peak int64, err error) {
	found := 0
	for _, line := range strings.Split(string(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("malformed %s in /proc status: %q", key, strings.TrimSpace(val))
		}
		kb, err := strconv.ParseUint(f[0], 10, 53)
		if err != nil {
			return 0, 0, fmt.Errorf("malformed %s in /proc status: %q", key, strings.TrimSpace(val))
		}
		if key == "VmRSS" {
			rss = int64(kb) << 10
		} else {
			peak = int64(kb) << 10
		}
		found++
	}
	if found != 2 {
		return 0, 0, errors.New("malformed /proc status: VmRSS or VmHWM missing")
	}
	return rss, peak, nil
}
