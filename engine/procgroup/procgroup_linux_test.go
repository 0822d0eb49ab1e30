package procgroup

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uncaged/workflow/shared/testkit"
)

// testWaitDelay bounds a Wait that a failing test would leave hanging.
const testWaitDelay = 30 * time.Second

// envFakeHost makes the test binary a stand-in engine host (fakeHost).
const envFakeHost = "PROCGROUP_TEST_FAKE_HOST"

func TestMain(m *testing.M) {
	if dir := os.Getenv(envFakeHost); dir != "" {
		fakeHost(dir)
		return
	}
	os.Exit(m.Run())
}

// fakeHost opens a tracker on dir/records, starts a shell that starts a
// long sleep in its group, writes both pids (dir/leader, dir/child) and
// waits to be killed.
func fakeHost(dir string) {
	t, err := Open(filepath.Join(dir, "records"), nil)
	if err != nil {
		panic(err)
	}
	defer t.Close()
	g := New(exec.Command("/bin/sh", "-c", `sleep 600 & echo $! > "$1/c.tmp"; mv "$1/c.tmp" "$1/child"; wait`, "sh", dir), Owner{Thread: "T", Role: "r"})
	if err := g.Start(); err != nil {
		panic(err)
	}
	writeFile(filepath.Join(dir, "leader"), strconv.Itoa(g.PID()))
	select {}
}

func writeFile(path, s string) {
	if err := os.WriteFile(path+".tmp", []byte(s), 0o600); err != nil {
		panic(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		panic(err)
	}
}

// killOnCleanup makes sure the test leaves no process behind, without
// killing another that took a pid over.
func killOnCleanup(t *testing.T, pids ...int) {
	for _, pid := range pids {
		st, err := readStat(pid)
		if err != nil || pid <= 1 {
			continue
		}
		t.Cleanup(func() {
			if now, err := readStat(pid); err == nil && now.start == st.start {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		})
	}
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	testkit.WaitUntil(t, path, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool { return !testkit.ProcessGone(pid) }

// startFakeHost runs fakeHost in a child process and returns it with the
// pids of its agent's leader and child.
func startFakeHost(t *testing.T, dir string) (host *exec.Cmd, log *testkit.Buffer, leader, child int) {
	t.Helper()
	log = &testkit.Buffer{}
	host = exec.Command(os.Args[0], "-test.run=^$")
	host.Env = append(os.Environ(), envFakeHost+"="+dir)
	host.Stderr = log
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	killOnCleanup(t, host.Process.Pid)
	t.Cleanup(func() { _ = host.Wait() })
	leader = readPID(t, filepath.Join(dir, "leader"))
	child = readPID(t, filepath.Join(dir, "child"))
	killOnCleanup(t, leader, child)
	return host, log, leader, child
}

// watchdogOf finds the watchdog the process host started.
func watchdogOf(t *testing.T, host int) int {
	t.Helper()
	var wd int
	testkit.WaitUntil(t, "the watchdog of "+strconv.Itoa(host), func() bool {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			st, err := readStat(pid)
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if err == nil && st.ppid == host && strings.HasPrefix(string(cmdline), WatchdogName+"\x00") {
				wd = pid
				return true
			}
		}
		return false
	})
	return wd
}

func TestTheWatchdogKillsTheGroupsOfAHostKilledHard(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	host, log, leader, child := startFakeHost(t, dir)
	if err := host.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the agent's leader and its child to die with the host", func() bool {
		return testkit.ProcessGone(leader) && testkit.ProcessGone(child)
	})
	testkit.WaitUntil(t, "the watchdog to remove the record", func() bool {
		ents, _ := os.ReadDir(filepath.Join(dir, "records"))
		return len(ents) == 0
	})
	testkit.WaitUntil(t, "the watchdog to log the kill", func() bool {
		return strings.Contains(log.String(), "killed what an agent left running when its engine host died")
	})
}

// Without its watchdog (killed with the host, as a whole process tree may
// be), Pdeathsig still ends the leader, and the next host kills the rest
// before doing anything.
func TestTheNextHostKillsWhatADeadHostLeft(t *testing.T) {
	// Serial: opens a tracker, and the open trackers are process-wide (see trackerFor).
	dir := t.TempDir()
	host, _, leader, child := startFakeHost(t, dir)
	wd := watchdogOf(t, host.Process.Pid)
	killOnCleanup(t, wd)
	if err := syscall.Kill(wd, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the watchdog to die", func() bool { return testkit.ProcessGone(wd) })
	if err := host.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "Pdeathsig to kill the leader", func() bool { return testkit.ProcessGone(leader) })
	if !alive(child) {
		t.Fatal("the leader's child died too: nothing was left for the next host to kill")
	}
	// The kernel signals the leader while the host is still exiting, before
	// it is a zombie: until then the next host rightly takes it for alive.
	testkit.WaitUntil(t, "the host to be dead", func() bool { return testkit.ProcessGone(host.Process.Pid) })

	next, err := Open(filepath.Join(dir, "records"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	left := next.KillLeftovers()
	if !testkit.ProcessGone(child) {
		t.Fatal("KillLeftovers returned with the dead host's process still running")
	}
	if len(left) != 1 || left[0].Killed != 1 || left[0].Err != nil || left[0].Record.Thread != "T" || left[0].Record.Role != "r" {
		t.Fatalf("leftovers = %+v", left)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "records")); len(ents) != 0 {
		t.Fatalf("records left: %v", ents)
	}
}

// startAlone starts a process in its own group, outside this package.
func startAlone(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killOnCleanup(t, cmd.Process.Pid)
	t.Cleanup(func() { _ = cmd.Wait() })
	return cmd
}

// recordOf writes into dir the record a dead host would have left for
// the group pid leads, with the given leader start time.
func recordOf(t *testing.T, dir string, pid int, start uint64) {
	t.Helper()
	st, err := readStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	self := selfIdentity()
	r := Record{PGID: pid, PID: pid, Start: start, Sid: st.sid, Boot: bootID(),
		Host: self.pid, HostStart: self.start + 1, // this pid, but not this process: a dead host
		Session: "dead", Command: "/bin/sleep"}
	b, _ := json.Marshal(r)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d-%d.json", pid, start)), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestALeftoverRecordOfAReusedPidKillsNothing(t *testing.T) {
	// Serial: opens a tracker, and the open trackers are process-wide (see trackerFor).
	dir := filepath.Join(t.TempDir(), "records")
	other := startAlone(t, "sleep", "600") // holds the recorded pid now; it is not the recorded process
	st, err := readStat(other.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	recordOf(t, dir, other.Process.Pid, st.start-1)
	tr, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	left := tr.KillLeftovers()
	if !alive(other.Process.Pid) {
		t.Fatal("a process that merely reused a recorded pid was killed")
	}
	if len(left) != 1 || left[0].Killed != 0 || left[0].Err != nil {
		t.Fatalf("leftovers = %+v", left)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("the stale record was kept: %v", ents)
	}

	// The same process, recorded with its own start time, is killed.
	recordOf(t, dir, other.Process.Pid, st.start)
	if left := tr.KillLeftovers(); len(left) != 1 || left[0].Killed != 1 || !testkit.ProcessGone(other.Process.Pid) {
		t.Fatalf("the recorded process survived: %+v", left)
	}
}

func TestALiveHostsRecordsAreLeftAlone(t *testing.T) {
	// Serial: opens a tracker, and the open trackers are process-wide (see trackerFor).
	dir := filepath.Join(t.TempDir(), "records")
	tr, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	g := New(exec.Command("sleep", "600"), Owner{Thread: "T", Role: "r"})
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	killOnCleanup(t, g.PID())
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("records while the group runs: %v", ents)
	}
	other, err := Open(dir, nil) // a second tracker of the same process sees a live owner
	if err != nil {
		t.Fatal(err)
	}
	if left := other.KillLeftovers(); len(left) != 0 || !alive(g.PID()) {
		t.Fatalf("a live host's group was treated as a leftover: %+v", left)
	}
	other.Close()
	_ = g.Signal(syscall.SIGKILL)
	_ = g.Wait(false)
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("records after Wait: %v", ents)
	}
}

// The thread that forks a leader may be retired by Go (here: a goroutine
// locked to it ends); Pdeathsig must not take the leader with it.
func TestALeaderOutlivesTheThreadThatStartedIt(t *testing.T) {
	// Serial: a group it starts would be recorded by another test's tracker (see trackerFor).
	type started struct {
		g   *Group
		tid int
		err error
	}
	var s started
	for {
		ch := make(chan started)
		go func() {
			runtime.LockOSThread() // never unlocked: Go ends this thread with the goroutine
			g := New(exec.Command("sleep", "600"), Owner{})
			err := g.Start()
			ch <- started{g, unix.Gettid(), err}
		}()
		s = <-ch
		if s.err != nil {
			t.Fatal(s.err)
		}
		killOnCleanup(t, s.g.PID())
		if s.tid != os.Getpid() {
			break
		}
		// The main thread never exits (Go parks it instead, and runs no
		// goroutine on it again): try again on another.
		_ = s.g.Signal(syscall.SIGKILL)
		_ = s.g.Wait(false)
	}
	testkit.WaitUntil(t, "the caller's thread to exit", func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", s.tid))
		return os.IsNotExist(err)
	})
	// The thread's exit has sent any Pdeathsig by now, but the leader may
	// not have died of it yet. A SIGSTOP tells without timing: a process
	// already marked for death ignores it and exits, a live one stops.
	if err := syscall.Kill(s.g.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, s.g.PID(), &info, unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	const cldStopped = 5 // CLD_STOPPED in siginfo's si_code
	if info.Code != cldStopped {
		t.Fatalf("the leader died with the thread that called Start (si_code %d)", info.Code)
	}
	_ = s.g.Signal(syscall.SIGKILL)
	if err := s.g.Wait(false); err == nil {
		t.Fatal("Wait after SIGKILL returned no error")
	}
}

func TestWaitKillsTheRestOfTheGroup(t *testing.T) {
	// Serial: a group it starts would be recorded by another test's tracker (see trackerFor).
	var out bytes.Buffer
	cmd := exec.Command("/bin/sh", "-c", "sleep 600 & echo $!")
	cmd.Stdout = &out
	cmd.WaitDelay = testWaitDelay // the child holds stdout: without the kill, Wait would wait for it
	g := New(cmd, Owner{})
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	killOnCleanup(t, g.PID())
	if err := g.Wait(true); err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatalf("output %q", out.String())
	}
	killOnCleanup(t, child)
	testkit.WaitUntil(t, "the leader's child to die", func() bool { return testkit.ProcessGone(child) })
	if err := g.Signal(syscall.SIGKILL); !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("Signal after Wait: %v, want os.ErrProcessDone", err)
	}
}

// With several hosts in one process (tests run them), a group is recorded
// in its own thread's host's root, and one of an unknown thread nowhere.
func TestAGroupIsRecordedWithItsThreadsTracker(t *testing.T) {
	// Serial: opens trackers, and the open trackers are process-wide (see procgroup's trackerFor).
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	a, err := Open(dirA, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(dirB, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	defer a.Bind("thread-a")()
	count := func(dir string) int {
		ents, _ := os.ReadDir(dir)
		return len(ents)
	}
	for _, owner := range []Owner{{Thread: "thread-a", Role: "r"}, {}} {
		g := New(exec.Command("sleep", "600"), owner)
		if err := g.Start(); err != nil {
			t.Fatal(err)
		}
		killOnCleanup(t, g.PID())
		na, nb := count(dirA), count(dirB)
		_ = g.Signal(syscall.SIGKILL)
		_ = g.Wait(false)
		want := 0
		if owner.Thread != "" {
			want = 1
		}
		if na != want || nb != 0 {
			t.Errorf("owner %+v: %d records with its thread's tracker (want %d), %d with the other", owner, na, want, nb)
		}
	}
}
