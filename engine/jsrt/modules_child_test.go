package jsrt

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/procgroup"
	"github.com/uncaged/workflow/shared/testkit"
)

// A bundle's child process is recorded as an agent's program is, so a
// later engine host can kill it if this one dies (package procgroup).
func TestAChildProcessIsRecordedAsAProcessGroup(t *testing.T) {
	// Serial: opens a tracker, and the open trackers are process-wide (see procgroup's trackerFor).
	if runtime.GOOS != "linux" {
		t.Skip("process groups are recorded on Linux only")
	}
	dir := filepath.Join(t.TempDir(), "records")
	tr, err := procgroup.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	b := loadTestdata(t, "host_apis.esm.js")
	h := newFakeHost(t)
	_, cancel, errc := startKillable(t, b, h, threadFor(b, "sleeper"))
	var pid int
	testkit.WaitUntil(t, "the child's pid in the console log", func() bool {
		for _, line := range h.logged("CONSOLE") {
			if rest, ok := strings.CutPrefix(line, "pids "); ok {
				pid, _ = strconv.Atoi(strings.Fields(rest)[0])
				return true // startKillable's cleanup kills it if the test fails
			}
		}
		return false
	})
	ents, _ := os.ReadDir(dir)
	var recs []procgroup.Record
	for _, e := range ents {
		var r procgroup.Record
		if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && json.Unmarshal(b, &r) == nil {
			recs = append(recs, r)
		}
	}
	if len(recs) != 1 || recs[0].PGID != pid || !strings.HasSuffix(recs[0].Command, "/sh") {
		t.Fatalf("records while the child runs: %+v (child %d)", recs, pid)
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(testkit.WaitBound):
		t.Fatal("Next did not return")
	}
	testkit.WaitUntil(t, "the record to go with the child", func() bool {
		ents, _ := os.ReadDir(dir)
		return len(ents) == 0
	})
}
