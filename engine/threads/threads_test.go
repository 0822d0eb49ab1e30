package threads

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
)

// fake makes a canonical hash out of a short test name (letters and
// digits of the hash alphabet, padded with zeros), so that index lines
// written by tests are well formed.
func fake(name string) string { return (name + "0000000000000")[:13] }

func TestUpsertAndRemove(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "bundles", "H")
	if err := Upsert(dir, "T1", Entry{Head: fake("A"), Start: fake("S"), UpdatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	if err := Upsert(dir, "T2", Entry{Head: fake("B"), Start: fake("S"), UpdatedAt: 2}); err != nil {
		t.Fatal(err)
	}
	if err := Upsert(dir, "T1", Entry{Head: fake("A2"), Start: fake("S"), UpdatedAt: 3}); err != nil {
		t.Fatal(err)
	}
	idx, err := ReadIndex(dir)
	if err != nil || !reflect.DeepEqual(idx, Index{"T1": {fake("A2"), fake("S"), 3}, "T2": {fake("B"), fake("S"), 2}}) {
		t.Fatalf("index = %v, %v", idx, err)
	}
	b, _ := os.ReadFile(IndexFile(dir))
	want := "{\n  \"T1\": {\n    \"head\": \"A200000000000\",\n    \"start\": \"S000000000000\",\n    \"updatedAt\": 3\n  },\n  \"T2\": {\n    \"head\": \"B000000000000\",\n    \"start\": \"S000000000000\",\n    \"updatedAt\": 2\n  }\n}\n"
	if string(b) != want {
		t.Errorf("file layout:\n%s\nwant\n%s", b, want)
	}
	for _, id := range []string{"T1", "T2"} {
		if ok, err := Remove(dir, id); !ok || err != nil {
			t.Fatalf("remove %s: %v %v", id, ok, err)
		}
	}
	b, _ = os.ReadFile(IndexFile(dir))
	if string(b) != "{}\n" {
		t.Errorf("empty index file = %q", b)
	}
	missing := filepath.Join(t.TempDir(), "none")
	if ok, err := Remove(missing, "T"); ok || err != nil {
		t.Fatalf("remove from missing: %v %v", ok, err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("removing from a missing index created files")
	}
}

// What both implementations write, and what JSON allows them to, reads
// without complaint.
func TestReadIndexAcceptsWhatWritersWrite(t *testing.T) {
	t.Parallel()
	h, st := fake("H"), fake("S")
	cases := map[string]Index{
		"{}":        {},
		"{}\n":      {},
		"{\n}\n":    {},
		"\n  {} \n": {},
		"{\n  \"06EZ\": {\n    \"head\": \"" + h + "\",\n    \"start\": \"" + st + "\",\n    \"updatedAt\": 1778000100000\n  }\n}\n": {"06EZ": {h, st, 1778000100000}},
		`{"a": {"head": "` + h + `", "start": "` + st + `", "updatedAt": 5, "extra": {"x": [1]}}}`:                                   {"a": {h, st, 5}},
		`{"a": {"head": "\u0048` + h[1:] + `", "start": "` + st + `", "updatedAt": 5e0}}`:                                            {"a": {h, st, 5}},
	}
	for in, want := range cases {
		dir := t.TempDir()
		if err := os.WriteFile(IndexFile(dir), []byte(in), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ReadIndex(dir)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ReadIndex(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if got, err := ReadIndex(t.TempDir()); err != nil || len(got) != 0 {
		t.Errorf("missing threads.json = %v, %v", got, err)
	}
}

// A threads.json that cannot be read completely is damage with its file and
// line, never an empty index: GC would take it for "no threads".
func TestReadIndexReportsDamageWithItsLine(t *testing.T) {
	t.Parallel()
	h1, h2, st := fake("H1"), fake("H2"), fake("S")
	canonical := "{\n  \"T1\": {\n    \"head\": \"" + h1 + "\",\n    \"start\": \"" + st + "\",\n    \"updatedAt\": 1\n  },\n  \"T2\": {\n    \"head\": \"" + h2 + "\",\n    \"start\": \"" + st + "\",\n    \"updatedAt\": 2\n  }\n}\n"
	cases := []struct {
		name, in string
		line     int
		reason   string
		intact   Index
	}{
		{"cut by 3 bytes", canonical[:len(canonical)-3], 11, "cut short", Index{}},
		{"a quote removed", strings.Replace(canonical, `"`+h2+`"`, `"`+h2, 1), 8, "not valid JSON", Index{}},
		{"empty file", "", 1, "empty", Index{}},
		{"blank file", "\n\n", 1, "empty", Index{}},
		{"not JSON", "not json", 1, "not valid JSON", Index{}},
		{"an array", "\n[1,2]", 2, "not a JSON object", Index{}},
		{"a string", `"str"`, 1, "not a JSON object", Index{}},
		{"null", "null", 1, "not a JSON object", Index{}},
		{"an entry without updatedAt", strings.Replace(canonical, ",\n    \"updatedAt\": 2", "", 1), 7, `thread "T2" lacks updatedAt (a number)`, Index{"T1": {h1, st, 1}}},
		{"an entry that is a number", "{\"T1\": {\"head\": \"" + h1 + "\", \"start\": \"" + st + "\", \"updatedAt\": 1},\n \"T2\": 7}", 2, `thread "T2" is not a JSON object`, Index{"T1": {h1, st, 1}}},
		{"a null head", `{"T1": {"head": null, "start": "S", "updatedAt": 1}}`, 1, `thread "T1" lacks head (a string)`, Index{}},
		// A head or start in any form but a node hash names no node.
		{"a head cut to 12 characters", strings.Replace(canonical, h2, h2[:12], 1), 7, `thread "T2": head "H20000000000" is not a node hash`, Index{"T1": {h1, st, 1}}},
		{"a head one character longer", strings.Replace(canonical, h2, h2+"0", 1), 7, `thread "T2": head "H2000000000000" is not a node hash`, Index{"T1": {h1, st, 1}}},
		{"an empty head", strings.Replace(canonical, h2, "", 1), 7, `thread "T2": head "" is not a node hash`, Index{"T1": {h1, st, 1}}},
		{"a lower-case head", strings.Replace(canonical, h2, strings.ToLower(h2), 1), 7, `head "h200000000000" is not a node hash`, Index{"T1": {h1, st, 1}}},
		{"a letter outside the alphabet", strings.Replace(canonical, h2, "U"+h2[1:], 1), 7, `head "U200000000000" is not a node hash`, Index{"T1": {h1, st, 1}}},
		{"a start cut short", strings.Replace(canonical, `"start": "`+st+`",
    "updatedAt": 2`, `"start": "`+st[:5]+`",
    "updatedAt": 2`, 1), 7, `start "S0000" is not a node hash`, Index{"T1": {h1, st, 1}}},
		// No writer names a thread twice; either entry's nodes would be
		// named by nothing.
		{"a thread named twice", strings.Replace(canonical, `"T2"`, `"T1"`, 1), 7, `thread "T1" appears more than once`, Index{"T1": {h2, st, 2}}},
		{"a head that is a number", strings.Replace(canonical, `"`+h2+`"`, "12", 1), 7, `thread "T2" lacks head (a string)`, Index{"T1": {h1, st, 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(IndexFile(dir), []byte(c.in), 0o644); err != nil {
				t.Fatal(err)
			}
			if idx, err := ReadIndex(dir); !errors.Is(err, ErrDamaged) || idx != nil {
				t.Fatalf("ReadIndex = %v, %v; want ErrDamaged", idx, err)
			}
			idx, d, err := ReadIndexTolerant(dir)
			if err != nil || d == nil {
				t.Fatalf("ReadIndexTolerant = %v, %v, %v", idx, d, err)
			}
			if d.Path != IndexFile(dir) || d.Line != c.line || !strings.Contains(d.Reason, c.reason) {
				t.Errorf("damage = %+v; want line %d, reason with %q", d, c.line, c.reason)
			}
			if !strings.Contains(d.Error(), IndexFile(dir)) || !strings.Contains(d.Error(), fmt.Sprintf("line %d", c.line)) {
				t.Errorf("message %q names neither file nor line", d.Error())
			}
			if !reflect.DeepEqual(idx, c.intact) {
				t.Errorf("intact entries = %v, want %v", idx, c.intact)
			}
		})
	}
}

// Writing to a damaged index would replace every entry it still holds with
// one: Upsert and Remove refuse and leave the file as it was.
func TestModifyRefusesADamagedIndex(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := Upsert(dir, "T1", Entry{Head: fake("H1"), Start: fake("S"), UpdatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(IndexFile(dir))
	damaged := b[:len(b)-3]
	if err := os.WriteFile(IndexFile(dir), damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Upsert(dir, "T2", Entry{Head: fake("H2"), Start: fake("S"), UpdatedAt: 2}); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Upsert on a damaged index = %v", err)
	}
	if ok, err := Remove(dir, "T1"); ok || !errors.Is(err, ErrDamaged) {
		t.Fatalf("Remove on a damaged index = %v, %v", ok, err)
	}
	if after, _ := os.ReadFile(IndexFile(dir)); string(after) != string(damaged) {
		t.Fatalf("damaged index changed to %q", after)
	}
}

func TestHistoryAppendReadRemove(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := time.Date(2026, 5, 9, 12, 0, 0, 0, time.UTC).UnixMilli()
	if err := AppendHistory(dir, HistoryEntry{ThreadID: "T1", Head: fake("E1"), Start: fake("S"), CompletedAt: ts}); err != nil {
		t.Fatal(err)
	}
	if err := AppendHistory(dir, HistoryEntry{ThreadID: "T2", Head: fake("E2"), Start: fake("S"), CompletedAt: ts + 1}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "history", "2026-05-09.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 2 || lines[0] != `{"threadId":"T1","head":"E100000000000","start":"S000000000000","completedAt":1778328000000}` {
		t.Fatalf("history lines = %q", lines)
	}
	// Blank lines are skipped; garbage lines are damage to readers and kept
	// by removal.
	f, _ := os.OpenFile(filepath.Join(dir, "history", "2026-05-09.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if _, err := f.WriteString("\nnot json\n{\"threadId\": 5}\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadHistory(dir)
	var d *DamageError
	if !errors.As(err, &d) || d.Line != 4 || len(got) != 2 {
		t.Fatalf("ReadHistory = %v, %v", got, err)
	}
	n, err := RemoveHistory(dir, "T1")
	if err != nil || n != 1 {
		t.Fatalf("RemoveHistory = %d, %v", n, err)
	}
	b, _ = os.ReadFile(filepath.Join(dir, "history", "2026-05-09.jsonl"))
	if strings.Contains(string(b), "T1") || !strings.Contains(string(b), "not json") || !strings.Contains(string(b), "T2") {
		t.Fatalf("after remove: %q", b)
	}
	if n, err := RemoveHistory(t.TempDir(), "T1"); n != 0 || err != nil {
		t.Fatalf("missing dir: %d %v", n, err)
	}
}

func TestResolveListLatestAndWalk(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	l := storage.Layout{Root: root}
	store := cas.Open(l.CASDir())
	prompt, _ := store.Put("go")
	start, _ := store.PutNode(node.NewStart(node.StartPayload{Name: "demo", Hash: "HASHA"}, prompt))
	c1, _ := store.Put("one")
	s1p := node.StatePayload{Role: "planner", Start: start, Content: c1, Ancestors: node.Ancestors("", nil), Timestamp: 10}
	s1, _ := store.PutNode(node.NewState(s1p))
	c2, _ := store.Put("done")
	endP := node.StatePayload{Role: node.RoleEnd, Meta: canonyaml.Map{{Key: "returnCode", Value: 0.0}, {Key: "summary", Value: "done"}}, Start: start, Content: c2, Ancestors: node.Ancestors(s1, s1p.Ancestors), Timestamp: 20}
	end, _ := store.PutNode(node.NewState(endP))

	if err := Upsert(l.BundleDir("HASHA"), "ACTIVE", Entry{Head: s1, Start: start, UpdatedAt: 15}); err != nil {
		t.Fatal(err)
	}
	if err := AppendHistory(l.BundleDir("HASHB"), HistoryEntry{ThreadID: "DONE", Head: end, Start: start, CompletedAt: 20}); err != nil {
		t.Fatal(err)
	}

	r, err := Resolve(l, "DONE")
	if err != nil || r.Source != SourceHistory || r.BundleHash != "HASHB" || r.Head != end {
		t.Fatalf("resolve DONE = %+v, %v", r, err)
	}
	r, err = Resolve(l, "ACTIVE")
	if err != nil || r.Source != SourceActive || r.UpdatedAt != 15 {
		t.Fatalf("resolve ACTIVE = %+v, %v", r, err)
	}
	if _, err := Resolve(l, "GHOST"); !errors.Is(err, ErrNotFound) || err.Error() != "thread not found: GHOST" {
		t.Fatalf("ghost: %v", err)
	}
	all, _ := List(l)
	if len(all) != 2 || all[0].ThreadID != "ACTIVE" || all[1].ThreadID != "DONE" {
		t.Fatalf("List = %+v", all)
	}
	latest, _ := Latest(l)
	if latest.ThreadID != "DONE" {
		t.Fatalf("Latest = %+v", latest)
	}
	frames, err := Walk(store, end)
	if err != nil || len(frames) != 2 || frames[0].State.Payload.Role != "planner" || frames[1].Hash != end {
		t.Fatalf("Walk = %+v, %v", frames, err)
	}
	if f, _ := Walk(store, start); len(f) != 0 {
		t.Fatalf("walk from start node = %v", f)
	}
	e, _ := HeadEnd(store, end)
	if e == nil || DeriveStatus(SourceHistory, e, NotExecuting) != StatusCompleted {
		t.Fatal("end status")
	}
	if e, _ := HeadEnd(store, s1); e != nil || DeriveStatus(SourceActive, nil, NotExecuting) != StatusInterrupted {
		t.Fatal("active without a host must be interrupted")
	}
	// A thread caught in both indexes is listed once, as finished.
	if err := Upsert(l.BundleDir("HASHB"), "DONE", Entry{Head: s1, Start: start, UpdatedAt: 19}); err != nil {
		t.Fatal(err)
	}
	all, _ = List(l)
	if len(all) != 2 || all[1].Source != SourceHistory {
		t.Fatalf("duplicate listing: %+v", all)
	}
	if _, err := Latest(storage.Layout{Root: t.TempDir()}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("latest on empty root: %v", err)
	}
}

func TestDeriveStatusReturnCodes(t *testing.T) {
	t.Parallel()
	mk := func(meta canonyaml.Map) *node.State {
		return &node.State{Payload: node.StatePayload{Role: node.RoleEnd, Meta: meta}}
	}
	cases := []struct {
		end  *node.State
		src  Source
		live Liveness
		want Status
	}{
		{mk(canonyaml.Map{{Key: "returnCode", Value: 0.0}}), SourceActive, Executing, StatusCompleted},
		{mk(canonyaml.Map{{Key: "returnCode", Value: 1.0}}), SourceHistory, NotExecuting, StatusFailed},
		{mk(canonyaml.Map{{Key: "returnCode", Value: 130.0}}), SourceHistory, NotExecuting, StatusKilled},
		{mk(canonyaml.Map{{Key: "returnCode", Value: "zero"}}), SourceHistory, NotExecuting, StatusFailed},
		{nil, SourceHistory, NotExecuting, StatusCompleted},
		{nil, SourceActive, Executing, StatusRunning},
		{nil, SourceActive, HeldPaused, StatusPaused},
		{nil, SourceActive, Pausing, StatusPausing},
		{nil, SourceActive, ExecutingElsewhere, StatusRunning},
		{nil, SourceActive, NotExecuting, StatusInterrupted},
		// An end or a history line decides whoever runs the thread.
		{mk(canonyaml.Map{{Key: "returnCode", Value: 130.0}}), SourceActive, Pausing, StatusKilled},
		{nil, SourceHistory, ExecutingElsewhere, StatusCompleted},
	}
	for i, c := range cases {
		if got := DeriveStatus(c.src, c.end, c.live); got != c.want {
			t.Errorf("case %d: %s, want %s", i, got, c.want)
		}
	}
}

func TestListOrdersAndDeduplicates(t *testing.T) {
	t.Parallel()
	l := storage.Layout{Root: t.TempDir()}
	dir := l.BundleDir("B")
	if err := Upsert(dir, "C", Entry{Head: fake("HC"), Start: fake("S"), UpdatedAt: 3}); err != nil {
		t.Fatal(err)
	}
	if err := Upsert(dir, "A", Entry{Head: fake("HAACT"), Start: fake("S"), UpdatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	if err := AppendHistory(dir, HistoryEntry{ThreadID: "B", Head: fake("HB1"), Start: fake("S"), CompletedAt: 5}); err != nil {
		t.Fatal(err)
	}
	if err := AppendHistory(dir, HistoryEntry{ThreadID: "A", Head: fake("HAEND"), Start: fake("S"), CompletedAt: 2}); err != nil {
		t.Fatal(err)
	}
	if err := AppendHistory(dir, HistoryEntry{ThreadID: "B", Head: fake("HB2"), Start: fake("S"), CompletedAt: 6}); err != nil {
		t.Fatal(err)
	}
	recs, err := ListBundle(l, "B")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.ThreadID+"="+strings.TrimRight(r.Head, "0"))
	}
	if strings.Join(got, " ") != "A=HAEND B=HB1 C=HC" {
		t.Fatalf("ListBundle = %v", got)
	}
}
