package cas

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/node"
)

// A check of the refs index names every line a collection has to skip.
func TestCheckRefsIndexNamesUnusableLines(t *testing.T) {
	t.Parallel()
	s := Open(t.TempDir())
	a, _ := s.Put("a")
	b, _ := s.PutNode(node.NewContent("b", []string{a}))
	f, _ := os.OpenFile(s.RefsIndexPath(), os.O_APPEND|os.O_WRONLY, 0)
	if _, err := f.WriteString("not a line\n" + b + " " + a); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	idx, flaws, err := s.CheckRefsIndex()
	if err != nil || !reflect.DeepEqual(idx[b], []string{a}) {
		t.Fatalf("index = %v, %v", idx, err)
	}
	want := []RefsIndexFlaw{{Line: 3, Reason: "does not start with a hash"}, {Line: 4, Reason: "the last line is cut short"}}
	if !reflect.DeepEqual(flaws, want) {
		t.Fatalf("flaws = %+v, want %+v", flaws, want)
	}
}

// A rebuild writes what the caller read from the blobs, replacing a wrong
// entry, and indexes a blob stored since from its own bytes.
func TestRebuildRefsIndexTrustsOnlyBlobs(t *testing.T) {
	t.Parallel()
	s := Open(t.TempDir())
	a, _ := s.Put("a")
	b, _ := s.PutNode(node.NewContent("b", []string{a}))
	f, _ := os.OpenFile(s.RefsIndexPath(), os.O_APPEND|os.O_WRONLY, 0)
	// a wrong entry: b "points" nowhere
	if _, err := f.WriteString(b + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.RebuildRefsIndex(map[string][]string{a: {}}); err != nil {
		t.Fatal(err)
	}
	idx, flaws, err := s.CheckRefsIndex()
	if err != nil || len(flaws) != 0 || !reflect.DeepEqual(idx, map[string][]string{a: {}, b: {a}}) {
		t.Fatalf("rebuilt index = %v, %v, %v", idx, flaws, err)
	}
}

// An append cut short right after a ref (a full disk, a crash) is finished
// by the next append's line. That merged line must never read as an entry:
// it would drop the blob's remaining refs, and a collection trusting it
// would sweep what they name.
func TestATornAppendNeverReadsAsAWrongEntry(t *testing.T) {
	t.Parallel()
	s := Open(t.TempDir())
	r1, _ := s.Put("first ref")
	r2, _ := s.Put("second ref")
	a, _ := s.PutNode(node.NewContent("a", []string{r1, r2}))
	idx, _ := os.ReadFile(s.RefsIndexPath())
	start := bytes.Index(idx, []byte(a))
	cut := start + bytes.Index(idx[start:], []byte(r1)) + len(r1) + 1
	if err := os.WriteFile(s.RefsIndexPath(), idx[:cut], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put("the next blob"); err != nil {
		t.Fatal(err)
	}

	got, flaws, err := s.CheckRefsIndex()
	if err != nil {
		t.Fatal(err)
	}
	if refs, ok := got[a]; ok {
		t.Fatalf("the torn line reads as %s -> %v; its blob points at %s and %s", a, refs, r1, r2)
	}
	if len(flaws) != 1 || !strings.Contains(flaws[0].Reason, "count") {
		t.Fatalf("flaws = %+v", flaws)
	}
	// Lines from before the count existed still read.
	if err := os.WriteFile(s.RefsIndexPath(), []byte(a+" "+r1+" "+r2+"\n"+r1+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.RefsIndex(); !reflect.DeepEqual(got, map[string][]string{a: {r1, r2}, r1: {}}) {
		t.Fatalf("old lines read as %v", got)
	}
}
