package gctune

import (
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
)

func TestPercentFor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		live uint64
		want int64
	}{
		{0, 100},
		{1 << 10, maxPercent},
		{1 << 20, maxPercent},
		{2 << 20, 800},
		{4 << 20, 400},
		{8 << 20, 200},
		{12 << 20, 133},
		{16 << 20, 100},
		{1 << 30, 100},
	} {
		if got := PercentFor(tc.live); got != tc.want {
			t.Errorf("PercentFor(%d) = %d, want %d", tc.live, got, tc.want)
		}
	}
}

// The tuner changes process-wide settings, so each case runs in a child
// process of its own: the test binary again, running only that test, whose
// body GCTUNE_CHILD lets run.
func runChild(t *testing.T, test string, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v")
	cmd.Env = append(append(os.Environ(), "GCTUNE_CHILD=1"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+test) {
		t.Fatalf("child %s: %v\n%s", test, err, out)
	}
}

// inParent runs the calling test in a child process (with env added) and
// reports true when this is the parent, which is then done: the test's own
// body runs only in the child.
func inParent(t *testing.T, env ...string) bool {
	t.Helper()
	if os.Getenv("GCTUNE_CHILD") != "" {
		return false
	}
	t.Parallel()
	runChild(t, t.Name(), env...)
	return true
}

var keep [][]byte

// TestSmallHeapGetsHeadroom collects with a small live heap until the tuner has raised
// GOGC, and checks the runtime runs with the value the tuner reports.
func TestSmallHeapGetsHeadroom(t *testing.T) {
	if inParent(t, "GOGC=") {
		return
	}
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	Start()
	testkit.WaitUntil(t, "the tuner to raise GOGC", func() bool {
		if Percent() > 100 {
			return true
		}
		keep = append(keep[:0], make([]byte, 1<<20))
		runtime.GC()
		return false
	})
	// The runtime runs with what the tuner reports (read without changing
	// it; a cleanup may still be adjusting, so wait for the two to agree).
	gogc := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	testkit.WaitUntil(t, "the runtime's GOGC to be the tuner's", func() bool {
		metrics.Read(gogc)
		got := gogc[0].Value.Uint64()
		return got > 100 && int64(got) == int64(Percent())
	})
}

// TestOperatorGOGCIsLeftAlone checks a GOGC from the environment survives collections
// untouched.
func TestOperatorGOGCIsLeftAlone(t *testing.T) {
	if inParent(t, "GOGC=150") {
		return
	}
	Start()
	for range 5 {
		runtime.GC()
		// Not a wait for anything: the pause lets a tuner that wrongly
		// runs after a collection do its harm.
		time.Sleep(time.Millisecond)
	}
	if got := debug.SetGCPercent(-1); got != 150 || Percent() != 0 {
		t.Fatalf("GOGC %d, tuner %d", got, Percent())
	}
}

// TestTransientLargeHeapIsReturned holds 256 MB through a collection, drops
// it and then allocates nothing: without the follow-up nothing collects
// again for two minutes, and the memory stays with the process.
func TestTransientLargeHeapIsReturned(t *testing.T) {
	if inParent(t, "GOGC=") {
		return
	}
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	firstRecheck = 100 * time.Millisecond
	Start()
	big := make([]byte, 256<<20)
	for i := range big {
		big[i] = byte(i)
	}
	keep = append(keep[:0], big)
	runtime.GC() // finds 256 MB live
	keep, big = nil, nil
	held := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/free:bytes"}}
	testkit.WaitUntil(t, "the dropped 256 MB to be returned to the system", func() bool {
		metrics.Read(held)
		return held[0].Value.Uint64()+held[1].Value.Uint64() < 64<<20
	})
}
