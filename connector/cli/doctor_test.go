package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	fixtureBundle   = "bundles/HEXEJQQQ6EVYJ"
	fixtureActive   = "06EZJ3QM9Q4S5XWA0R1C7D8E2G"
	fixtureFinished = "06EZHZP3N4J2B8V6Q0T9W1X5Y4"
	fixtureLegacy   = "06E0000000000000000000000C"
)

// damageFixture cuts the last 3 bytes of the fixture's threads.json and
// removes one quote from a history line, as the reported loss did, and
// returns the files' paths and bytes from before.
func damageFixture(t *testing.T, c *cli) (index, history, indexBefore, historyBefore string) {
	t.Helper()
	index = filepath.Join(c.root, fixtureBundle, "threads.json")
	history = filepath.Join(c.root, fixtureBundle, "history", "2026-05-05.jsonl")
	b, _ := os.ReadFile(index)
	indexBefore = string(b)
	if err := os.WriteFile(index, b[:len(b)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(history)
	historyBefore = string(b)
	if err := os.WriteFile(history, []byte(strings.Replace(string(b), `"head":"DX`, `"head":DX`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return index, history, indexBefore, historyBefore
}

// Lists name damaged files and fail; cas gc, thread rm and thread show
// refuse with the file and line; nothing changes on disk.
func TestDamagedIndexesAreReportedNeverSwept(t *testing.T) {
	t.Parallel()
	c := fixtureCLI(t)
	index, history, _, _ := damageFixture(t, c)
	before := c.snapshot()

	out, errs, code := c.run("thread", "list", "-o", "table")
	if lines := strings.Split(out, "\n"); code != 1 || len(lines) != 3 || !strings.HasPrefix(lines[1], fixtureLegacy+"  demo-flow  ") {
		t.Fatalf("thread list: exit %d\n%s", code, out)
	}
	for _, want := range []string{index + ", line 6: the file ends in the middle", history + ", line 1: not valid JSON", "uncaged-workflow doctor --repair"} {
		if !strings.Contains(errs, want) {
			t.Errorf("thread list stderr lacks %q:\n%s", want, errs)
		}
	}
	out, errs, code = c.run("thread", "list", "demo-flow", "--json")
	var rows []threadRow
	var report struct {
		Damaged []struct {
			Path string
			Line int
		}
	}
	if code != 1 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || json.Unmarshal([]byte(errs), &report) != nil ||
		len(report.Damaged) != 2 || report.Damaged[0].Path != index || report.Damaged[0].Line != 6 {
		t.Fatalf("thread list --json: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}

	c.fails(index+", line 6", "cas", "gc")
	c.fails("thread "+fixtureLegacy+" was not removed", "thread", "rm", fixtureLegacy)
	c.fails("a damaged file may name it", "thread", "show", fixtureActive)
	c.fails(index+", line 6", "live", "--latest")
	c.unchanged(before)
}

// doctor reports the damage and exits 1; doctor --repair rebuilds both files
// byte for byte from what was left and the CAS, keeps the damaged ones
// aside, and every thread is back, whole.
func TestDoctorRepairsADamagedFixture(t *testing.T) {
	t.Parallel()
	c := fixtureCLI(t)
	if out := c.ok("doctor"); !strings.HasSuffix(out, "no problems found\n") {
		t.Fatalf("doctor on a healthy store:\n%s", out)
	}
	index, history, indexBefore, historyBefore := damageFixture(t, c)
	before := c.snapshot()

	out, _, code := c.run("doctor")
	if code != 1 || !strings.Contains(out, "PROBLEM index: "+index+", line 6") || !strings.Contains(out, "PROBLEM history: "+history+", line 1") ||
		!strings.Contains(out, "2 problems, 2 of them repairable") {
		t.Fatalf("doctor: exit %d\n%s", code, out)
	}
	out, _, code = c.run("doctor", "--json")
	var rep struct {
		Findings []struct {
			Kind       string
			Problem    bool
			Repairable bool
		}
	}
	if code != 1 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Findings) != 2 || !rep.Findings[0].Repairable {
		t.Fatalf("doctor --json: exit %d\n%s", code, out)
	}
	c.unchanged(before)

	out = c.ok("doctor", "--repair")
	if !strings.Contains(out, "repaired index: "+index) || !strings.Contains(out, "1 recovered") || !strings.HasSuffix(out, "repaired 2; no problems found\n") {
		t.Fatalf("doctor --repair:\n%s", out)
	}
	if b, _ := os.ReadFile(index); string(b) != indexBefore {
		t.Errorf("threads.json after repair =\n%s\nwant\n%s", b, indexBefore)
	}
	if b, _ := os.ReadFile(history); string(b) != historyBefore {
		t.Errorf("history after repair = %q, want %q", b, historyBefore)
	}
	if aside, _ := filepath.Glob(filepath.Join(c.root, fixtureBundle, "threads.json.damaged-*")); len(aside) != 1 {
		t.Errorf("damaged threads.json kept as %v", aside)
	}
	if got := c.ok("thread", "list", "-o", "table"); strings.Count(got, "  demo-flow  ") != 3 {
		t.Fatalf("thread list after repair:\n%s", got)
	}
	if got := c.ok("cas", "gc"); !strings.HasSuffix(got, "deleted 1 entries\n") {
		t.Fatalf("gc after repair = %q (only the fixture's orphan may go)", got)
	}
	var done threadView
	if err := json.Unmarshal([]byte(c.ok("thread", "show", fixtureFinished)), &done); err != nil || len(done.Steps) != 1 || done.Result == nil {
		t.Fatalf("finished thread after repair = %+v, %v", done, err)
	}
	c.fails("doctor takes no arguments", "doctor", "--repair", "extra")
}

func TestDoctorOnAMissingRoot(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.fails("does not exist: nothing to check", "doctor")
	if _, err := os.Stat(c.root); !os.IsNotExist(err) {
		t.Fatal("doctor created the storage root")
	}
}
