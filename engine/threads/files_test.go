package threads

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/uncaged/workflow/engine/storage"
)

// A thread every reader listed stays listed, or its loss is reported, when
// the files and directories that hold it are swapped for symbolic links,
// links to nothing, directories, files, FIFOs or closed permissions: links
// that lead somewhere are read through, the rest is damage naming the
// place, never an empty index. Listing and Resolve see the same.
func TestEveryReaderSeesThreadsBehindLinksOrReportsWhyNot(t *testing.T) {
	t.Parallel()
	moveAndLink := func(t *testing.T, p string) {
		t.Helper()
		elsewhere := filepath.Join(t.TempDir(), "moved")
		if err := os.Rename(p, elsewhere); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(elsewhere, p); err != nil {
			t.Fatal(err)
		}
	}
	linkToNothing := func(t *testing.T, p string) {
		t.Helper()
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(t.TempDir(), "gone"), p); err != nil {
			t.Fatal(err)
		}
	}
	loop := func(t *testing.T, p string) {
		t.Helper()
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, p); err != nil {
			t.Fatal(err)
		}
	}
	replaceWithDir := func(t *testing.T, p string) {
		t.Helper()
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(p, "inside"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	replaceWithFile := func(t *testing.T, p string) {
		t.Helper()
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	replaceWithFIFO := func(t *testing.T, p string) {
		t.Helper()
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Skip("no FIFOs here:", err)
		}
	}
	closePermissions := func(t *testing.T, p string) {
		t.Helper()
		if err := os.Chmod(p, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(p, 0o755) })
	}
	const bundle = "B0000000000000"
	index := func(l storage.Layout) string { return IndexFile(l.BundleDir(bundle)) }
	historyDir := func(l storage.Layout) string { return HistoryDir(l.BundleDir(bundle)) }
	historyFile := func(l storage.Layout) string { return filepath.Join(historyDir(l), "1970-01-01.jsonl") }
	places := map[string]func(storage.Layout) string{
		"bundles":      func(l storage.Layout) string { return l.BundlesDir() },
		"bundle dir":   func(l storage.Layout) string { return l.BundleDir(bundle) },
		"threads.json": index,
		"history dir":  historyDir,
		"history file": historyFile,
	}
	damages := map[string]func(*testing.T, string){
		"moved and linked": moveAndLink, "a link to nothing": linkToNothing, "a link loop": loop,
		"a directory": replaceWithDir, "a file": replaceWithFile, "a FIFO": replaceWithFIFO, "closed": closePermissions,
	}
	// Swapping a directory for an empty one, or threads.json for "{}",
	// deletes what they held; the listing cannot know (garbage
	// collection's own check can: engine/gc).
	deletes := map[string]bool{"bundles a directory": true, "bundle dir a directory": true, "history dir a directory": true, "threads.json a file": true, "history file a file": true}
	for place, where := range places {
		for damage, apply := range damages {
			if deletes[place+" "+damage] {
				continue
			}
			t.Run(place+" "+damage, func(t *testing.T) {
				t.Parallel()
				l := storage.Layout{Root: t.TempDir()}
				dir := l.BundleDir(bundle)
				if err := Upsert(dir, "ACTIVE", Entry{Head: fake("H1"), Start: fake("S"), UpdatedAt: 1}); err != nil {
					t.Fatal(err)
				}
				if err := AppendHistory(dir, HistoryEntry{ThreadID: "DONE", Head: fake("H2"), Start: fake("S"), CompletedAt: 1}); err != nil {
					t.Fatal(err)
				}
				p := where(l)
				apply(t, p)

				recs, damaged, err := ListTolerant(l)
				listed := map[string]bool{}
				for _, r := range recs {
					listed[r.ThreadID] = true
				}
				files := map[string]string{"ACTIVE": index(l), "DONE": historyFile(l)}
				for id, file := range files {
					if listed[id] {
						continue
					}
					if err != nil {
						continue // the whole listing failed, saying why
					}
					if !reportedOnPath(damaged, file) {
						t.Errorf("thread %s is neither listed nor reported: listed %v, damage %v", id, listed, damaged)
					}
					rec, rerr := Resolve(l, id)
					if rerr == nil || !errors.Is(rerr, ErrDamaged) {
						t.Errorf("Resolve(%s) = %+v, %v; the listing reported damage", id, rec, rerr)
					}
				}
				if damage == "moved and linked" && (err != nil || len(damaged) != 0 || len(recs) != 2) {
					t.Errorf("a link to the moved %s is not read through: %v, %v, %v", place, recs, damaged, err)
				}
				for _, d := range damaged {
					if !strings.Contains(d.Error(), l.Root) || d.Reason == "" {
						t.Errorf("damage %q does not say where and what", d.Error())
					}
				}
			})
		}
	}
}

// reportedOnPath says whether some damage is about file or a directory on
// its path.
func reportedOnPath(damaged []*DamageError, file string) bool {
	for _, d := range damaged {
		if d.Path == file || strings.HasPrefix(file, d.Path+string(filepath.Separator)) {
			return true
		}
	}
	return false
}
