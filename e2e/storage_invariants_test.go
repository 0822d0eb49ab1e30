//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
)

// storageFixture copies the original's storage root for a test to damage.
func storageFixture(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	if err := os.CopyFS(root, os.DirFS("../connector/cli/testdata/original-root")); err != nil {
		t.Fatal(err)
	}
	return root
}

// storageBlobs lists the blob files of a root, as a set.
func storageBlobs(t *testing.T, root string) map[string]bool {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(root, "cas", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range m {
		out[strings.TrimSuffix(filepath.Base(p), ".txt")] = true
	}
	return out
}

// The reported loss through the binary: a history line whose head is cut
// to 12 characters, has one character changed, or is emptied was listed as
// a completed thread while `cas gc` deleted 6 of the root's blobs. Now
// every sweep refuses, pointing at doctor, and deletes nothing; doctor
// names the line. A bundle directory moved away and linked back, which
// lost 19 of 21 blobs, is read through: listed, and its nodes kept.
func TestStorageBadHeadsAndLinkedBundlesCostNoNode(t *testing.T) {
	t.Parallel()
	const (
		bundle  = "bundles/HEXEJQQQ6EVYJ"
		history = bundle + "/history/2026-05-05.jsonl"
		head    = "DXAGP9TW6ZX9Y"
		other   = "06EZJ3QM9Q4S5XWA0R1C7D8E2G"
	)
	for name, value := range map[string]string{"cut to 12": head[:12], "one character changed": "DXAGP9TW6ZX8Y", "empty": ""} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := storageFixture(t)
			p := filepath.Join(root, history)
			b, _ := os.ReadFile(p)
			if err := os.WriteFile(p, []byte(strings.Replace(string(b), `"head":"`+head+`"`, `"head":"`+value+`"`, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			blobs := storageBlobs(t, root)
			if len(value) != 13 {
				if r := run(t, root, "thread", "list"); r.code != 1 || !strings.Contains(r.stderr, p+", line 1") {
					t.Fatalf("thread list = %+v; want the damaged line named", r)
				}
			}
			r := run(t, root, "cas", "gc")
			if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "nothing was deleted") || !strings.Contains(r.stderr, "doctor") {
				t.Fatalf("cas gc = %+v", r)
			}
			if r := run(t, root, "thread", "rm", other); r.code != 1 || !strings.Contains(r.stderr, "was not removed") {
				t.Fatalf("thread rm of another thread = %+v", r)
			}
			if after := storageBlobs(t, root); len(after) != len(blobs) {
				t.Fatalf("%d of %d blobs left after refusals", len(after), len(blobs))
			}
			if r := run(t, root, "doctor"); r.code != 1 || !strings.Contains(r.stdout, history) {
				t.Fatalf("doctor = %+v", r)
			}
		})
	}
	t.Run("bundle behind a link", func(t *testing.T) {
		t.Parallel()
		root := storageFixture(t)
		moved := filepath.Join(t.TempDir(), "elsewhere")
		if err := os.Rename(filepath.Join(root, bundle), moved); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(moved, filepath.Join(root, bundle)); err != nil {
			t.Fatal(err)
		}
		if r := run(t, root, "thread", "list", "-o", "table"); r.code != 0 || strings.Count(r.stdout, "demo-flow") != 3 {
			t.Fatalf("thread list = %+v; want the bundle's 3 threads", r)
		}
		blobs := storageBlobs(t, root)
		if r := run(t, root, "cas", "gc"); r.code != 0 || !strings.HasSuffix(r.stdout, "deleted 1 entries\n") {
			t.Fatalf("cas gc = %+v; want only the fixture's orphan deleted", r)
		}
		if after := storageBlobs(t, root); len(after) != len(blobs)-1 || after["HS1ZY1EMPG0NY"] {
			t.Fatalf("%d of %d blobs left", len(after), len(blobs))
		}
	})
}

// A running thread — here one whose start node is older than gc's grace
// period, as in the report — is not removed: `thread rm` refuses, naming
// its status and --force, and the thread runs on with every node. Pausing,
// likewise. --force kills it, waits until it has stopped, and removes it:
// it does not come back in history, and nothing it leaves refuses a
// collection.
func TestStorageThreadRmRefusesARunningThread(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	reports := orphanFlow(t, root)
	id, agent, child := blockedRun(t, root, reports)
	var rec struct {
		Start string `json:"start"`
	}
	if r := run(t, root, "thread", "list", "--json"); r.code == 0 {
		var rows []struct {
			ThreadID, Start string
		}
		_ = json.Unmarshal([]byte(r.stdout), &rows)
		for _, row := range rows {
			if row.ThreadID == id {
				rec.Start = row.Start
			}
		}
	}
	if rec.Start == "" {
		t.Fatal("the running thread is not listed")
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(root, "cas", rec.Start+".txt"), old, old); err != nil {
		t.Fatal(err)
	}
	blobs := storageBlobs(t, root)
	// Paused while its role never finishes, it stays pausing.
	for _, status := range []string{"running", "pausing"} {
		if status == "pausing" {
			if r := run(t, root, "thread", "pause", id); r.code != 0 {
				t.Fatalf("pause: %+v", r)
			}
		}
		r := run(t, root, "thread", "rm", id)
		if r.code != 1 || !strings.Contains(r.stderr, "is "+status) || !strings.Contains(r.stderr, "--force") || !strings.Contains(r.stderr, "was not removed") {
			t.Fatalf("thread rm of a %s thread = %+v", status, r)
		}
		if r := run(t, root, "thread", "ps"); !strings.Contains(r.stdout, id) {
			t.Fatalf("the %s thread stopped running: %+v", status, r)
		}
		for h := range blobs {
			if _, err := os.Stat(filepath.Join(root, "cas", h+".txt")); err != nil {
				t.Fatalf("a refused removal cost blob %s", h)
			}
		}
	}
	if r := run(t, root, "thread", "rm", "--force", id); r.code != 0 || r.stdout != "removed thread "+id+"\n" {
		t.Fatalf("thread rm --force = %+v", r)
	}
	testkit.WaitUntil(t, "the killed thread's agent to die", func() bool {
		return testkit.ProcessGone(agent) && testkit.ProcessGone(child)
	})
	if r := run(t, root, "thread", "show", id); r.code == 0 {
		t.Fatalf("the removed thread came back: %+v", r)
	}
	if r := run(t, root, "thread", "list"); strings.Contains(r.stdout, id) || r.code != 0 {
		t.Fatalf("thread list after the removal = %+v", r)
	}
	if r := run(t, root, "doctor"); r.code != 0 {
		t.Fatalf("doctor after the removal = %+v", r)
	}
	if r := run(t, root, "cas", "gc"); r.code != 0 {
		t.Fatalf("cas gc after the removal = %+v", r)
	}
}

// A fixed-seed slice of the randomized damage test (engine/gc,
// TestRandomDamageNeverCostsANamedNode) through the binary, on the
// original's root: after `cas gc` and after `thread rm`, either the
// command failed and the root is unchanged, or every node a thread that
// still has a record reached before the damage is there, unless the damage
// deleted that node's own file.
func TestStorageRandomDamageThroughTheBinary(t *testing.T) {
	t.Parallel()
	ids := []string{"06EZJ3QM9Q4S5XWA0R1C7D8E2G", "06EZHZP3N4J2B8V6Q0T9W1X5Y4", "06E0000000000000000000000C"}
	for seed := uint64(1); seed <= 10; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			root := storageFixture(t)
			reach := map[string]map[string]bool{}
			for _, id := range ids {
				reach[id] = storageReach(t, root, id)
			}
			rng := rand.New(rand.NewPCG(seed, 7))
			deleted, what := storageDamage(t, rng, root)
			recorded := storageRecorded(t, root, ids)
			victim := ids[rng.IntN(len(ids))]
			for _, args := range [][]string{{"cas", "gc"}, {"thread", "rm", victim}} {
				before := storageSnapshot(t, root)
				r := run(t, root, args...)
				if storageSnapshotsEqual(before, storageSnapshot(t, root)) {
					continue
				}
				if r.code != 0 && strings.Contains(r.stderr, "was not removed") {
					t.Fatalf("damage %v: %v failed (%+v) but changed the root", what, args, r)
				}
				for _, id := range ids {
					if (args[0] == "thread" && id == victim) || !recorded[id] {
						continue
					}
					for h := range reach[id] {
						p := filepath.Join(root, "cas", h+".txt")
						if _, err := os.Lstat(p); err == nil || deleted(p) {
							continue
						}
						t.Fatalf("damage %v: after %v (%+v), node %s of thread %s is gone", what, args, r, h, id)
					}
				}
			}
		})
	}
}

// storageRecorded says which threads the damage left a record of: listed,
// in a bundle whose damage the listing reports (the thread may be in what
// it cannot read), or with a debug log. A thread with none cannot be told
// from one that never was.
func storageRecorded(t *testing.T, root string, ids []string) map[string]bool {
	t.Helper()
	r := run(t, root, "thread", "list", "--json")
	out := map[string]bool{}
	for _, id := range ids {
		if strings.Contains(r.stdout, `"`+id+`"`) || strings.Contains(r.stderr, "HEXEJQQQ6EVYJ") || r.code > 1 {
			out[id] = true
		}
		if _, err := os.Stat(filepath.Join(root, "logs", "HEXEJQQQ6EVYJ", id+".info.jsonl")); err == nil {
			out[id] = true
		}
	}
	return out
}

// storageReach is every node thread id reaches, read with the binary
// before any damage.
func storageReach(t *testing.T, root, id string) map[string]bool {
	t.Helper()
	r := run(t, root, "thread", "list", "--json")
	var rows []struct{ ThreadID, Head, Start string }
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("thread list --json: %v (%+v)", err, r)
	}
	out := map[string]bool{}
	var walk func(h string)
	walk = func(h string) {
		if out[h] {
			return
		}
		b, err := os.ReadFile(filepath.Join(root, "cas", h+".txt"))
		if err != nil {
			return
		}
		out[h] = true
		for _, line := range strings.Split(string(b), "\n") {
			if ref, ok := strings.CutPrefix(line, "  - "); ok && len(ref) == 13 {
				walk(ref)
			}
		}
	}
	for _, row := range rows {
		if row.ThreadID == id {
			walk(row.Head)
			walk(row.Start)
		}
	}
	if len(out) == 0 {
		t.Fatalf("thread %s reaches nothing", id)
	}
	return out
}

// storageDamage applies one to three random damages to root: the kinds
// of engine/gc's randomized test that a thread's every record cannot all
// lose at once (the fixture's finished threads have no debug log). It
// returns what says whether a path's content was deleted, and what it did.
func storageDamage(t *testing.T, rng *rand.Rand, root string) (func(string) bool, []string) {
	t.Helper()
	gone := map[string]bool{}
	var what []string
	list := func(keep func(p string, e fs.DirEntry) bool) []string {
		var out []string
		_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err == nil && p != root && keep(p, e) {
				out = append(out, p)
			}
			return nil
		})
		sort.Strings(out)
		return out
	}
	for n := 1 + rng.IntN(3); n > 0; n-- {
		files := list(func(p string, e fs.DirEntry) bool { return e.Type().IsRegular() && !strings.HasSuffix(p, ".lock") })
		p := files[rng.IntN(len(files))]
		b, _ := os.ReadFile(p)
		switch rng.IntN(4) {
		case 0:
			if len(b) > 0 {
				b[rng.IntN(len(b))] ^= 1 << rng.IntN(8)
			}
			what = append(what, "flipped a bit of "+p)
		case 1:
			if len(b) > 0 {
				b = b[:rng.IntN(len(b))]
			}
			what = append(what, "cut "+p)
		case 2:
			if tokens := strings.FieldsFunc(string(b), func(r rune) bool { return r == '"' }); len(tokens) > 0 {
				tok := tokens[rng.IntN(len(tokens))]
				if len(tok) == 13 {
					edit := []string{tok[:12], strings.ToLower(tok), "", tok[:5] + "Z" + tok[6:]}[rng.IntN(4)]
					b = []byte(strings.Replace(string(b), tok, edit, 1))
					what = append(what, fmt.Sprintf("%s became %q in %s", tok, edit, p))
				}
			}
		default:
			if strings.Contains(p, "/cas/") {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(p+".nowhere", p); err != nil {
					t.Fatal(err)
				}
				gone[p] = true
				what = append(what, "made "+p+" a link to nothing")
				continue
			}
			moved := filepath.Join(t.TempDir(), "moved")
			if err := os.Rename(p, moved); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(moved, p); err != nil {
				t.Fatal(err)
			}
			what = append(what, "moved "+p+" away and linked it")
			continue
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return func(p string) bool { return gone[p] }, what
}

// storageSnapshot records every path under root with its content (a
// regular file's bytes, a link's target), lock files aside.
func storageSnapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case strings.HasSuffix(p, ".lock"):
		case e.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[p] = "-> " + target
		case e.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[p] = string(b)
		default:
			out[p] = e.Type().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func storageSnapshotsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			return false
		}
	}
	return true
}
