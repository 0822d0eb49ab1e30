package cas

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
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
	idx, flaws, _, err := s.CheckRefsIndex()
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
	idx, flaws, _, err := s.CheckRefsIndex()
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

	got, flaws, _, err := s.CheckRefsIndex()
	if err != nil {
		t.Fatal(err)
	}
	if refs, ok := got[a]; ok {
		t.Fatalf("the torn line reads as %s -> %v; its blob points at %s and %s", a, refs, r1, r2)
	}
	if len(flaws) != 1 || !strings.Contains(flaws[0].Reason, "count") {
		t.Fatalf("flaws = %+v", flaws)
	}
	// Lines older versions wrote, without a count or without a check, read
	// without complaint but are not trusted: nothing tells a damaged one
	// from a sound one, so their blobs are read instead.
	old := a + " " + r1 + " " + r2 + "\n" + r1 + "\n" + a + " 2 " + r1 + " " + r2 + "\n" + r1 + " 0\n"
	if err := os.WriteFile(s.RefsIndexPath(), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, flaws, unchecked, _ := s.CheckRefsIndex(); len(got) != 0 || len(flaws) != 0 || unchecked != 4 {
		t.Fatalf("old lines read as %v, flaws %v, %d unchecked", got, flaws, unchecked)
	}
}

// The index is trusted instead of the blobs it names, so no damage to it
// may read as an entry that differs from what its blob says: a ref changed
// into another hash, the entry's own hash changed into another blob's, a
// count changed, lines cut or joined. Every run damages a real index at
// random places, in every way, many times over.
func TestNoDamageToTheIndexReadsAsAWrongEntry(t *testing.T) {
	t.Parallel()
	s := Open(t.TempDir())
	truth := map[string][]string{}
	var prev []string
	for i := 0; i < 40; i++ {
		refs := append([]string(nil), prev[max(0, len(prev)-i%5):]...)
		h, err := s.PutNode(node.NewContent(fmt.Sprintf("blob %d", i), refs))
		if err != nil {
			t.Fatal(err)
		}
		truth[h] = refs
		prev = append(prev, h)
	}
	clean, err := os.ReadFile(s.RefsIndexPath())
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.RefsIndex(); len(got) != len(truth) {
		t.Fatalf("the clean index holds %d entries, want %d", len(got), len(truth))
	}
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ \n"
	rng := rand.New(rand.NewPCG(7, 11))
	for run := 0; run < 3000; run++ {
		b := append([]byte(nil), clean...)
		for n := 1 + rng.IntN(3); n > 0; n-- {
			i := rng.IntN(len(b))
			switch rng.IntN(4) {
			case 0: // a character of the line's own alphabet for another
				b[i] = alphabet[rng.IntN(len(alphabet))]
			case 1: // a bit flipped
				b[i] ^= 1 << rng.IntN(8)
			case 2: // a byte lost
				b = append(b[:i], b[i+1:]...)
			default: // a byte added
				b = append(b[:i], append([]byte{alphabet[rng.IntN(len(alphabet))]}, b[i:]...)...)
			}
		}
		if err := os.WriteFile(s.RefsIndexPath(), b, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := s.RefsIndex()
		if err != nil {
			t.Fatal(err)
		}
		for h, refs := range got {
			want, ok := truth[h]
			if !ok {
				t.Fatalf("run %d: damaged index %q reads %s -> %v; no blob has that hash", run, b, h, refs)
			}
			if !slices.Equal(refs, want) {
				t.Fatalf("run %d: damaged index %q reads %s -> %v; the blob says %v", run, b, h, refs, want)
			}
		}
	}
}
