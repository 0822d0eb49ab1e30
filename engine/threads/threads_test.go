package threads

import (
	"errors"
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

func TestUpsertAndRemove(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bundles", "H")
	if err := Upsert(dir, "T1", Entry{Head: "A", Start: "S", UpdatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	if err := Upsert(dir, "T2", Entry{Head: "B", Start: "S", UpdatedAt: 2}); err != nil {
		t.Fatal(err)
	}
	if err := Upsert(dir, "T1", Entry{Head: "A2", Start: "S", UpdatedAt: 3}); err != nil {
		t.Fatal(err)
	}
	idx, err := ReadIndex(dir)
	if err != nil || !reflect.DeepEqual(idx, Index{"T1": {"A2", "S", 3}, "T2": {"B", "S", 2}}) {
		t.Fatalf("index = %v, %v", idx, err)
	}
	b, _ := os.ReadFile(IndexFile(dir))
	want := "{\n  \"T1\": {\n    \"head\": \"A2\",\n    \"start\": \"S\",\n    \"updatedAt\": 3\n  },\n  \"T2\": {\n    \"head\": \"B\",\n    \"start\": \"S\",\n    \"updatedAt\": 2\n  }\n}\n"
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

func TestReadIndexTolerance(t *testing.T) {
	cases := map[string]Index{
		"":         {},
		"not json": {},
		"[1,2]":    {},
		`"str"`:    {},
		`{"a": {"head": "H", "start": "S", "updatedAt": 5}, "b": {"head": 1, "start": "S", "updatedAt": 5}, "c": 7, "d": {"head": "H", "start": "S"}}`: {"a": {"H", "S", 5}},
	}
	for in, want := range cases {
		dir := t.TempDir()
		os.WriteFile(IndexFile(dir), []byte(in), 0o644)
		got, err := ReadIndex(dir)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ReadIndex(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

func TestHistoryAppendReadRemove(t *testing.T) {
	dir := t.TempDir()
	ts := time.Date(2026, 5, 9, 12, 0, 0, 0, time.UTC).UnixMilli()
	AppendHistory(dir, HistoryEntry{ThreadID: "T1", Head: "E1", Start: "S", CompletedAt: ts})
	AppendHistory(dir, HistoryEntry{ThreadID: "T2", Head: "E2", Start: "S", CompletedAt: ts + 1})
	b, err := os.ReadFile(filepath.Join(dir, "history", "2026-05-09.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 2 || lines[0] != `{"threadId":"T1","head":"E1","start":"S","completedAt":1778328000000}` {
		t.Fatalf("history lines = %q", lines)
	}
	// Garbage lines are skipped by readers and kept by removal.
	f, _ := os.OpenFile(filepath.Join(dir, "history", "2026-05-09.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("\nnot json\n{\"threadId\": 5}\n")
	f.Close()
	got, err := ReadHistory(dir)
	if err != nil || len(got) != 2 {
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

	Upsert(l.BundleDir("HASHA"), "ACTIVE", Entry{Head: s1, Start: start, UpdatedAt: 15})
	AppendHistory(l.BundleDir("HASHB"), HistoryEntry{ThreadID: "DONE", Head: end, Start: start, CompletedAt: 20})

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
	Upsert(l.BundleDir("HASHB"), "DONE", Entry{Head: s1, Start: start, UpdatedAt: 19})
	all, _ = List(l)
	if len(all) != 2 || all[1].Source != SourceHistory {
		t.Fatalf("duplicate listing: %+v", all)
	}
	if _, err := Latest(storage.Layout{Root: t.TempDir()}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("latest on empty root: %v", err)
	}
}

func TestDeriveStatusReturnCodes(t *testing.T) {
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
	}
	for i, c := range cases {
		if got := DeriveStatus(c.src, c.end, c.live); got != c.want {
			t.Errorf("case %d: %s, want %s", i, got, c.want)
		}
	}
}

func TestListOrdersAndDeduplicates(t *testing.T) {
	l := storage.Layout{Root: t.TempDir()}
	dir := l.BundleDir("B")
	Upsert(dir, "C", Entry{Head: "HC", Start: "S", UpdatedAt: 3})
	Upsert(dir, "A", Entry{Head: "HA-active", Start: "S", UpdatedAt: 1})
	AppendHistory(dir, HistoryEntry{ThreadID: "B", Head: "HB1", Start: "S", CompletedAt: 5})
	AppendHistory(dir, HistoryEntry{ThreadID: "A", Head: "HA-end", Start: "S", CompletedAt: 2})
	AppendHistory(dir, HistoryEntry{ThreadID: "B", Head: "HB2", Start: "S", CompletedAt: 6})
	recs, err := ListBundle(l, "B")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.ThreadID+"="+r.Head)
	}
	if strings.Join(got, " ") != "A=HA-end B=HB1 C=HC" {
		t.Fatalf("ListBundle = %v", got)
	}
}
