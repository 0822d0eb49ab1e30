package threads

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/storage"
)

const (
	lineA = `{"threadId":"A","head":"HA00000000000","start":"S000000000000","completedAt":1}`
	lineB = `{"threadId":"B","head":"HB00000000000","start":"S000000000000","completedAt":2}`
	lineC = `{"threadId":"C","head":"HC00000000000","start":"S000000000000","completedAt":3}`
)

func writeHistory(t *testing.T, bundleDir, name, content string) string {
	t.Helper()
	p := filepath.Join(HistoryDir(bundleDir), name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func historyIDs(t *testing.T, dir string) ([]string, []*DamageError) {
	t.Helper()
	var ids []string
	var damaged []*DamageError
	err := EachHistoryTolerant(dir, func(e HistoryEntry) error {
		ids = append(ids, e.ThreadID)
		return nil
	}, func(d *DamageError) { damaged = append(damaged, d) })
	if err != nil {
		t.Fatal(err)
	}
	return ids, damaged
}

// What the original writes, or may leave, reads without complaint: empty
// files, blank lines, a complete last line without its newline.
func TestHistoryAcceptsWhatWritersLeave(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeHistory(t, dir, "2026-01-01.jsonl", "")
	writeHistory(t, dir, "2026-01-02.jsonl", lineA+"\n\n  \n"+lineB+"\n")
	writeHistory(t, dir, "2026-01-03.jsonl", lineC)
	got, err := ReadHistory(dir)
	if err != nil || len(got) != 3 || got[2].ThreadID != "C" {
		t.Fatalf("ReadHistory = %v, %v", got, err)
	}
}

// A line that cannot be read is damage with its file and line: strict
// readers stop, tolerant ones report it and read on.
func TestHistoryDamageNamesFileAndLine(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, line, reason string
	}{
		{"a quote removed", strings.Replace(lineB, `"HB00000000000"`, `"HB00000000000`, 1), "not valid JSON"},
		{"a field missing", `{"threadId":"B","head":"HB00000000000","completedAt":2}`, "lacks start (a string)"},
		{"a wrong type", `{"threadId":5,"head":"HB00000000000","start":"S000000000000","completedAt":2}`, "lacks threadId (a string)"},
		{"not an object", `["B"]`, "not a JSON object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p := writeHistory(t, dir, "2026-05-09.jsonl", lineA+"\n"+c.line+"\n"+lineC+"\n")
			var d *DamageError
			if _, err := ReadHistory(dir); !errors.As(err, &d) || !errors.Is(err, ErrDamaged) {
				t.Fatalf("ReadHistory error = %v", err)
			}
			if d.Path != p || d.Line != 2 || !strings.Contains(d.Reason, c.reason) {
				t.Fatalf("damage = %+v, want %s line 2 with %q", d, p, c.reason)
			}
			ids, damaged := historyIDs(t, dir)
			if !reflect.DeepEqual(ids, []string{"A", "C"}) || len(damaged) != 1 || *damaged[0] != *d {
				t.Fatalf("tolerant read = %v, %v", ids, damaged)
			}
		})
	}
}

// A crash mid-append leaves a last line cut short: that is damage, and a
// later append starts a fresh line so the new entry stays readable.
func TestTornLastLineIsDamageAndLaterAppendsStayReadable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := writeHistory(t, dir, "1970-01-01.jsonl", lineA+"\n"+lineB[:20])
	ids, damaged := historyIDs(t, dir)
	if !reflect.DeepEqual(ids, []string{"A"}) || len(damaged) != 1 || damaged[0].Line != 2 || !strings.Contains(damaged[0].Reason, "cut short") {
		t.Fatalf("torn end: %v, %+v", ids, damaged)
	}
	if err := AppendHistory(dir, HistoryEntry{ThreadID: "C", Head: fake("HC"), Start: fake("S"), CompletedAt: 3}); err != nil {
		t.Fatal(err)
	}
	ids, damaged = historyIDs(t, dir)
	if !reflect.DeepEqual(ids, []string{"A", "C"}) || len(damaged) != 1 || damaged[0].Line != 2 || damaged[0].Path != p {
		t.Fatalf("after append: %v, %+v", ids, damaged)
	}
}

// Listing shows what it can and names the damage; List, ListBundle and
// Latest, whose callers need every thread, refuse.
func TestListingReportsDamageInsteadOfHidingIt(t *testing.T) {
	t.Parallel()
	l := storage.Layout{Root: t.TempDir()}
	if err := Upsert(l.BundleDir("GOOD"), "G", Entry{Head: fake("HG"), Start: fake("S"), UpdatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	bad := l.BundleDir("BAD")
	if err := Upsert(bad, "X", Entry{Head: fake("HX"), Start: fake("S"), UpdatedAt: 2}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(IndexFile(bad))
	if err := os.WriteFile(IndexFile(bad), b[:len(b)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	writeHistory(t, bad, "2026-05-09.jsonl", lineA+"\n"+strings.Replace(lineB, `"HB00000000000"`, `"HB00000000000`, 1)+"\n")

	recs, damaged, err := ListTolerant(l)
	if err != nil || len(recs) != 2 || recs[0].ThreadID != "A" || recs[1].ThreadID != "G" {
		t.Fatalf("ListTolerant = %+v, %v", recs, err)
	}
	if len(damaged) != 2 || damaged[0].Path != IndexFile(bad) || damaged[1].Line != 2 {
		t.Fatalf("damage = %+v", damaged)
	}
	if _, err := List(l); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), IndexFile(bad)) {
		t.Fatalf("List = %v", err)
	}
	if _, err := ListBundle(l, "BAD"); !errors.Is(err, ErrDamaged) {
		t.Fatalf("ListBundle = %v", err)
	}
	if _, err := Latest(l); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Latest = %v", err)
	}
	// Resolve finds what can be read, and says a thread it cannot find may
	// be in a damaged file.
	if r, err := Resolve(l, "G"); err != nil || r.Head != fake("HG") {
		t.Fatalf("Resolve G = %+v, %v", r, err)
	}
	_, err = Resolve(l, "X")
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), IndexFile(bad)) {
		t.Fatalf("Resolve X = %v", err)
	}
}

func TestKeptAsideNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeHistory(t, dir, "2026-05-09.jsonl.damaged-20260509T120000Z", "x")
	if err := os.WriteFile(filepath.Join(dir, "threads.json.damaged-20260509T120000Z"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "threads.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := KeptAside(dir)
	want := []string{filepath.Join(dir, "history", "2026-05-09.jsonl.damaged-20260509T120000Z"), filepath.Join(dir, "threads.json.damaged-20260509T120000Z")}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("KeptAside = %v, %v", got, err)
	}
	if ids, damaged := historyIDs(t, dir); len(ids)+len(damaged) != 0 {
		t.Fatalf("a kept-aside file was read as history: %v %v", ids, damaged)
	}
}
