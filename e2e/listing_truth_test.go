package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/shared/testkit"
)

// listingFlip is hash with the character at i changed to another of the
// CAS's alphabet, picked by rng: a well-formed hash that names no blob.
func listingFlip(rng *rand.Rand, hash string, i int) string {
	a := strings.IndexByte(ids.Alphabet, hash[i])
	c := ids.Alphabet[(a+1+rng.IntN(len(ids.Alphabet)-1))%len(ids.Alphabet)]
	return hash[:i] + string(c) + hash[i+1:]
}

// listingSpoilHead rewrites the head of thread id's history line under
// root to a flip of it and returns the file and the 1-based line.
func listingSpoilHead(t *testing.T, rng *rand.Rand, root, id string, at int) (path string, line int) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "bundles", "*", "history", "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for i, l := range lines {
			var e struct{ ThreadID, Head string }
			if json.Unmarshal([]byte(l), &e) != nil || e.ThreadID != id {
				continue
			}
			bad := listingFlip(rng, e.Head, at)
			lines[i] = strings.Replace(l, `"head":"`+e.Head+`"`, `"head":"`+bad+`"`, 1)
			if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s line %d: head %s is now %s", p, i+1, e.Head, bad)
			return p, i + 1
		}
	}
	t.Fatalf("no history line names thread %s", id)
	return "", 0
}

// The reported case through the binary: one character of a history line's
// head flipped to another valid character leaves a well-formed hash whose
// blob is not in the CAS. `thread list` showed the thread as completed and
// exited 0. Now every view of it — list (table and piped lines), list --json, show, live — exits 1
// naming the file and line, and shows it as damaged, never completed; the
// other threads keep their status. Each position of the hash is tried
// (13 runs of the binary per command), with a random replacement.
func TestListingNamesAHistoryLineWhoseHeadIsGone(t *testing.T) {
	t.Parallel()
	const id = "06EZHZP3N4J2B8V6Q0T9W1X5Y4"
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for at := range ids.HashLen {
		t.Run(fmt.Sprintf("character %d", at+1), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, uint64(at)))
			root := storageFixture(t)
			p, line := listingSpoilHead(t, rng, root, id, at)
			place := fmt.Sprintf("%s, line %d: thread %s: head ", p, line, id)

			// The original's piped lines carry no status, and say the
			// damage all the same.
			r := run(t, root, "thread", "list")
			if r.code != 1 || !strings.Contains(r.stderr, place) || !strings.Contains(r.stderr, "doctor") || !strings.Contains(r.stdout, id+"\t") {
				t.Fatalf("piped thread list = %+v; want its lines and exit 1 naming %q", r, place)
			}
			r = run(t, root, "thread", "list", "-o", "table")
			if r.code != 1 || !strings.Contains(r.stderr, place) || !strings.Contains(r.stderr, "doctor") {
				t.Fatalf("thread list = %+v; want exit 1 naming %q", r, place)
			}
			statuses := map[string]string{}
			for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n")[1:] {
				if f := strings.Fields(l); len(f) >= 3 {
					statuses[f[0]] = f[2]
				}
			}
			if statuses[id] != "damaged" || statuses["06E0000000000000000000000C"] != "completed" || statuses["06EZJ3QM9Q4S5XWA0R1C7D8E2G"] != "interrupted" {
				t.Fatalf("thread list shows %v:\n%s", statuses, r.stdout)
			}

			r = run(t, root, "thread", "list", "--json")
			var rows []struct{ ThreadID, Status string }
			var report struct {
				Damaged []struct {
					Path     string
					Line     int
					ThreadID string
				}
			}
			if r.code != 1 || json.Unmarshal([]byte(r.stdout), &rows) != nil || json.Unmarshal([]byte(r.stderr), &report) != nil ||
				len(report.Damaged) != 1 || report.Damaged[0].Path != p || report.Damaged[0].Line != line || report.Damaged[0].ThreadID != id {
				t.Fatalf("thread list --json = %+v", r)
			}
			for _, row := range rows {
				if row.ThreadID == id && row.Status != "damaged" {
					t.Fatalf("thread list --json shows %+v", row)
				}
			}

			r = run(t, root, "thread", "show", id)
			var view struct {
				Status string
				Steps  []any
			}
			if r.code != 1 || json.Unmarshal([]byte(r.stdout), &view) != nil || view.Status != "damaged" || len(view.Steps) != 0 || !strings.Contains(r.stderr, place) {
				t.Fatalf("thread show = %+v", r)
			}
			if r := run(t, root, "live", id); r.code != 1 || !strings.Contains(r.stderr, place) {
				t.Fatalf("live = %+v", r)
			}
			if r := run(t, root, "doctor"); r.code != 1 || !strings.Contains(r.stdout, "thread "+id) {
				t.Fatalf("doctor = %+v", r)
			}
		})
	}
}

// The gateway's fleet memory is told the truth too: a finished thread
// whose history line's head is then flipped to another valid hash is sent
// again by the connector's change feed, as damaged — the gateway no longer
// shows it as completed.
func TestFleetIsToldAThreadWhoseHeadIsGoneIsDamaged(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	_, root := g.connector("laptop", map[string]string{"plan-code-review": "linear.esm.js"})
	id := g.startThread("laptop", "plan-code-review", "review the flux capacitor")
	finished(t, root, id)
	fleetStatus := func() string {
		for _, th := range g.searchFleet(q("machine", "laptop")).Threads {
			if th.ThreadID == id {
				return th.Status
			}
		}
		return ""
	}
	testkit.WaitUntil(t, "the fleet to show the thread completed", func() bool { return fleetStatus() == "completed" })
	listingSpoilHead(t, rand.New(rand.NewPCG(1, 2)), root, id, 0)
	testkit.WaitUntil(t, "the fleet to show the thread damaged", func() bool { return fleetStatus() == "damaged" })
	for _, th := range g.searchFleet(q("machine", "laptop")).Threads {
		if th.ThreadID == id && (th.ReturnCode != nil || th.Steps != 0) {
			t.Fatalf("the fleet shows the damaged thread as %+v", th)
		}
	}
}
