package e2e

import (
	"bufio"
	"strconv"
	"strings"
	"testing"
)

// initBudgetBytes is what one of our packages may allocate while it is
// initialised. Every command, `version` included, pays for every package
// the binary links, so work a command may never need (compiling regular
// expressions, building tables) waits for first use. Allocation is the
// measure, not time: it is the same on a busy machine as on an idle one.
const initBudgetBytes = 64 << 10

// TestCLIStartLeavesWorkForFirstUse runs `version` with the runtime's
// init trace on and checks that no package of ours allocates more than
// initBudgetBytes before main runs: start-up is the cost every command
// pays, and `make bench-engine` reports it against a hello-world binary.
func TestCLIStartLeavesWorkForFirstUse(t *testing.T) {
	t.Parallel()
	r := runEnv(t, []string{"GODEBUG=inittrace=1"}, "", t.TempDir(), "version")
	if r.code != 0 {
		t.Fatalf("version = %+v", r)
	}
	ours := 0
	sc := bufio.NewScanner(strings.NewReader(r.stderr))
	for sc.Scan() {
		// init github.com/x/y @1.2 ms, 0.31 ms clock, 1234 bytes, 5 allocs
		f := strings.Fields(sc.Text())
		if len(f) < 8 || f[0] != "init" || !strings.HasPrefix(f[1], "github.com/uncaged/workflow/") {
			continue
		}
		ours++
		bytes, err := strconv.Atoi(f[7])
		if err != nil {
			t.Fatalf("unreadable init trace line %q", sc.Text())
		}
		if bytes > initBudgetBytes {
			t.Errorf("%s allocates %d bytes at init (budget %d): make what it builds lazy (sync.OnceValue)", f[1], bytes, initBudgetBytes)
		}
	}
	if ours == 0 {
		t.Fatalf("no init trace lines of ours in stderr:\n%s", r.stderr)
	}
}
