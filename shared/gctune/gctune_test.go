package gctune

import (
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercentFor(t *testing.T) {
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
// process of its own.
func TestMain(m *testing.M) {
	switch os.Getenv("GCTUNE_CHILD") {
	case "small":
		os.Exit(childSmallHeap())
	case "operator":
		os.Exit(childOperatorGOGC())
	}
	os.Exit(m.Run())
}

func runChild(t *testing.T, mode string, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "GCTUNE_CHILD="+mode), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child %s: %v\n%s", mode, err, out)
	}
}

func TestSmallHeapGetsHeadroom(t *testing.T) { runChild(t, "small", "GOGC=") }

func TestOperatorGOGCIsLeftAlone(t *testing.T) { runChild(t, "operator", "GOGC=150") }

var keep [][]byte

// childSmallHeap collects with a small live heap until the tuner has raised
// GOGC, and checks the runtime runs with the value the tuner reports.
func childSmallHeap() int {
	if err := os.Unsetenv("GOGC"); err != nil {
		println("unset GOGC:", err.Error())
		return 1
	}
	Start()
	deadline := time.Now().Add(20 * time.Second)
	for Percent() <= 100 {
		if time.Now().After(deadline) {
			println("GOGC never raised; percent", Percent())
			return 1
		}
		keep = append(keep[:0], make([]byte, 1<<20))
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	// The runtime runs with what the tuner reports (read without changing
	// it; a cleanup may still be adjusting, so wait for the two to agree).
	gogc := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	for {
		metrics.Read(gogc)
		if got := gogc[0].Value.Uint64(); got > 100 && int64(got) == int64(Percent()) {
			return 0
		}
		if time.Now().After(deadline) {
			println("runtime GOGC", gogc[0].Value.Uint64(), "tuner", Percent())
			return 1
		}
		time.Sleep(time.Millisecond)
	}
}

// childOperatorGOGC checks a GOGC from the environment survives
// collections untouched.
func childOperatorGOGC() int {
	Start()
	for range 5 {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if got := debug.SetGCPercent(-1); got != 150 || Percent() != 0 {
		println("GOGC", got, "tuner", Percent())
		return 1
	}
	return 0
}
