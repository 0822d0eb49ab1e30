package server

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
)

// A pausing thread (a pause asked while its role runs) is one status like
// the others: searched for, and listed as active while its machine is
// offline.
func TestFleetKnowsPausingThreads(t *testing.T) {
	t.Parallel()
	f, _ := newFleetFixture(t)
	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	th := fakeThread("t1", "hello", "pausing", "greet the world", "", base)
	th.ReturnCode = nil
	disconnect := f.connector("laptop", newFakeConnector(th, fakeThread("t2", "hello", "completed", "greet", "said hello", base)))
	if got := ids(f.waitSearch("status=pausing", 1).Threads); got != "laptop/t1" {
		t.Fatalf("status=pausing: %s", got)
	}
	done := f.fleetReaderDone("laptop")
	disconnect()
	f.waitStatus("laptop", "offline")
	testkit.WaitUntil(t, "laptop's reader to end", func() bool { return closed(done) })
	resp, body := f.do("GET", "/api/clients/laptop/threads?status=pausing", f.dash, nil)
	var list struct {
		Threads []struct{ ThreadID, Status, Source string }
		Offline bool
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &list) != nil || !list.Offline || len(list.Threads) != 1 ||
		list.Threads[0].Status != "pausing" || list.Threads[0].Source != "active" {
		t.Fatalf("offline list of pausing threads: %d %s", resp.StatusCode, body)
	}
}
