package procgroup

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The watchdog is this executable again; these variables make it one.
const (
	envWatchdogDir     = "UNCAGED_WORKFLOW_WATCHDOG_DIR"
	envWatchdogSession = "UNCAGED_WORKFLOW_WATCHDOG_SESSION"
)

// bye is what a host writes to its watchdog before closing the pipe when
// it shuts down cleanly: its groups have ended, nothing is to be killed.
const bye = 'q'

// killWait bounds how long a leftover group may take to die after SIGKILL
// (a process in uninterruptible sleep dies only when the kernel lets it).
var killWait = 5 * time.Second

func init() {
	if dir := os.Getenv(envWatchdogDir); dir != "" {
		os.Exit(watchdogMain(dir, os.Getenv(envWatchdogSession)))
	}
}

// reapsFirst is false: Linux can wait for an exit without reaping.
const reapsFirst = false

func setAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// start forks the leader from a goroutine locked to its own OS thread and
// keeps that goroutine (and so the thread) until the leader is reaped:
// Pdeathsig fires when the forking thread exits, and a thread Go might
// retire (see the package documentation) would kill the leader early.
func (g *Group) start() error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := g.cmd.Start()
		errc <- err
		if err == nil {
			<-g.reaped
		}
	}()
	return <-errc
}

// leaderExited blocks until pid has exited, leaving it unreaped.
func leaderExited(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// Tracker records the process groups started while it is open in one
// directory of the storage root, and kills those of dead hosts.
type Tracker struct {
	dir     string
	log     *slog.Logger
	session string

	mu       sync.Mutex
	closed   bool
	wd       *os.File // the host's end of the watchdog's pipe
	wdFailed bool     // starting it failed once; the records still stand
}

// Open opens dir (created, mode 0700) as a tracker: the groups of the
// threads bound to it (and, while it is the only one open, of unknown
// threads) are recorded there.
func Open(dir string, log *slog.Logger) (*Tracker, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("agent records: %w", err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	t := &Tracker{dir: dir, log: logger(log), session: hex.EncodeToString(b[:])}
	register(t)
	return t, nil
}

// KillLeftovers kills the groups recorded by hosts that are no longer
// alive and removes their records. It returns once the killed processes
// are gone, so nothing they did can overlap what the caller runs next.
func (t *Tracker) KillLeftovers() []Leftover {
	return t.reap(func(r Record) bool { return !ownerAlive(r) })
}

// Close stops recording and tells the watchdog that this host ends
// cleanly, so it exits without killing anything. Call it after every
// group has been waited for.
func (t *Tracker) Close() {
	unregister(t)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.wd != nil {
		_, _ = t.wd.Write([]byte{bye})
		_ = t.wd.Close()
		t.wd = nil
	}
}

// logger returns l, or a logger that discards.
func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// recorded is a group's record file.
type recorded struct{ path string }

func (r *recorded) remove() { _ = os.Remove(r.path) }

// record writes the record of the group cmd leads and makes sure the
// watchdog runs. A failure costs the group its protection against the
// host's death, not its run, so it is logged rather than returned.
func (t *Tracker) record(cmd *exec.Cmd, owner Owner) *recorded {
	pid := cmd.Process.Pid
	st, err := readStat(pid)
	if err != nil {
		t.log.Warn("could not record an agent's process group", "pid", pid, "err", err)
		return nil
	}
	self := selfIdentity()
	rec := Record{
		PGID: pid, PID: pid, Start: st.start, Sid: st.sid, Boot: bootID(),
		Host: self.pid, HostStart: self.start, Session: t.session,
		Thread: owner.Thread, Role: owner.Role, Command: cmd.Path,
	}
	b, _ := json.Marshal(rec)
	path := filepath.Join(t.dir, fmt.Sprintf("%d-%d.json", pid, st.start))
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	// No fsync: the record matters after the host's death, not the
	// machine's (a new boot makes every record stale anyway).
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.log.Warn("could not record an agent's process group", "pid", pid, "err", err)
		return nil
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		t.log.Warn("could not record an agent's process group", "pid", pid, "err", err)
		return nil
	}
	t.startWatchdog()
	return &recorded{path: path}
}

// startWatchdog starts the watchdog once per tracker. t.mu is held.
func (t *Tracker) startWatchdog() {
	if t.wd != nil || t.wdFailed {
		return
	}
	r, w, err := os.Pipe() // close-on-exec: no agent inherits the host's end
	if err != nil {
		t.wdFailed = true
		t.log.Warn("could not start the agent watchdog", "err", err)
		return
	}
	// The watchdog's end: once it started, it holds its own copy; closing
	// ours cannot fail in a way that matters.
	defer func() { _ = r.Close() }()
	cmd := &exec.Cmd{
		// /proc/self/exe still works when the binary was replaced on disk.
		Path:   "/proc/self/exe",
		Args:   []string{WatchdogName},
		Env:    append(os.Environ(), envWatchdogDir+"="+t.dir, envWatchdogSession+"="+t.session),
		Dir:    "/", // not to hold the host's working directory busy
		Stdin:  r,
		Stderr: os.Stderr, // the host's log
		// Its own session: a signal to the host's group or terminal does
		// not reach it.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		_ = w.Close()
		t.wdFailed = true
		t.log.Warn("could not start the agent watchdog", "err", err)
		return
	}
	go func() { _ = cmd.Wait() }() // it exits when this host ends or closes the tracker
	t.wd = w
}

// watchdogMain is the watchdog: it waits for its host to end and, unless
// the host said goodbye, kills the groups the host recorded.
func watchdogMain(dir, session string) int {
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT)
	b, _ := io.ReadAll(os.Stdin) // returns when the host's end closes: it exited, or closed its tracker
	if len(b) > 0 && b[0] == bye {
		return 0
	}
	t := &Tracker{dir: dir, log: slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("component", "agent watchdog"), session: session}
	t.reap(func(r Record) bool { return r.Session == session })
	return 0
}

// reap kills the groups of the records owned selects, removing each record
// once its group is gone (one that could not be killed stays for the next
// host to try again).
func (t *Tracker) reap(owned func(Record) bool) []Leftover {
	entries, err := os.ReadDir(t.dir)
	if err != nil {
		return nil
	}
	var out []Leftover
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(t.dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			continue // removed meanwhile
		}
		var r Record
		if json.Unmarshal(b, &r) != nil || r.PGID <= 1 || r.PID != r.PGID {
			t.log.Warn("removed an unreadable agent record", "file", path)
			_ = os.Remove(path)
			continue
		}
		if !owned(r) {
			continue
		}
		lo := Leftover{Record: r}
		lo.Killed, lo.Err = killGroup(r)
		if lo.Err == nil {
			_ = os.Remove(path)
		}
		t.logLeftover(lo)
		out = append(out, lo)
	}
	return out
}

func (t *Tracker) logLeftover(lo Leftover) {
	r := lo.Record
	args := []any{"pgid", r.PGID, "thread", r.Thread, "role", r.Role, "command", r.Command, "deadHost", r.Host, "killed", lo.Killed}
	switch {
	case lo.Err != nil:
		t.log.Warn("could not kill all an agent left running when its engine host died", append(args, "err", lo.Err)...)
	case lo.Killed > 0:
		t.log.Info("killed what an agent left running when its engine host died", args...)
	default:
		t.log.Info("an agent of a dead engine host had already ended", args...)
	}
}

// killGroup SIGKILLs every process that is provably in r's group and
// waits until none runs.
func killGroup(r Record) (int, error) {
	if r.Boot != bootID() {
		return 0, nil // an earlier boot's: nothing of it runs
	}
	killed := map[int]bool{}
	deadline := time.Now().Add(killWait)
	pause := time.Millisecond
	for {
		members := groupMembers(r)
		if len(members) == 0 {
			return len(killed), nil
		}
		if time.Now().After(deadline) {
			return len(killed), fmt.Errorf("%d processes of group %d still run after SIGKILL", len(members), r.PGID)
		}
		for _, pid := range members {
			if signalMember(pid, r) {
				killed[pid] = true
			}
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// groupMembers lists the live processes of r's group. None when another
// process holds the leader's pid: the id cannot be reused while any member
// of the group lives, so the group is gone.
func groupMembers(r Record) []int {
	if st, err := readStat(r.PGID); err == nil && st.start != r.Start {
		return nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if st, err := readStat(pid); err == nil && st.in(r) {
			out = append(out, pid)
		}
	}
	return out
}

// signalMember SIGKILLs pid if it is in r's group. The pidfd pins the
// process between the check and the signal.
func signalMember(pid int, r Record) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ENOSYS) { // before Linux 5.3: check, then kill
		st, err := readStat(pid)
		return err == nil && st.in(r) && syscall.Kill(pid, syscall.SIGKILL) == nil
	}
	if err != nil {
		return false
	}
	defer func() { _ = unix.Close(fd) }() // a pidfd: closing only releases it
	st, err := readStat(pid)
	if err != nil || !st.in(r) {
		return false
	}
	return unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil
}

// procStat is what /proc/<pid>/stat says about a process.
type procStat struct {
	state byte
	ppid  int
	pgrp  int
	sid   int
	start uint64 // clock ticks after boot
}

// in reports whether the process is a live member of r's group: in the
// group and the leader's session, started no earlier than the leader.
func (s procStat) in(r Record) bool {
	return s.pgrp == r.PGID && s.sid == r.Sid && s.start >= r.Start && s.state != 'Z' && s.state != 'X'
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	// The command name, in parentheses, may itself hold spaces and
	// parentheses; the fields after the last ')' start with the state.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	// f[0] is field 3 of proc(5), the state; ppid is 4, pgrp 5, session
	// 6, starttime 22.
	ppid, err0 := strconv.Atoi(f[1])
	pgrp, err1 := strconv.Atoi(f[2])
	sid, err2 := strconv.Atoi(f[3])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err0, err1, err2, err3); err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return procStat{state: f[0][0], ppid: ppid, pgrp: pgrp, sid: sid, start: start}, nil
}

// ownerAlive reports whether the host that wrote r still runs.
func ownerAlive(r Record) bool {
	if r.Boot != bootID() {
		return false
	}
	st, err := readStat(r.Host)
	return err == nil && st.start == r.HostStart && st.state != 'Z' && st.state != 'X'
}

var bootID = sync.OnceValue(func() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
})

type identity struct {
	pid   int
	start uint64
}

var selfIdentity = sync.OnceValue(func() identity {
	st, _ := readStat(os.Getpid())
	return identity{pid: os.Getpid(), start: st.start}
})
