package cas_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/gc"
	"github.com/uncaged/workflow/engine/storage"
)

// age sets a blob's modification time to an hour ago, as if it had been
// stored long before the collection.
func age(t *testing.T, s *cas.Store, h string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(s.Dir(), h+".txt"), old, old); err != nil {
		t.Fatal(err)
	}
}

// A running thread may store content that an old, unreachable blob already
// holds, and link it a moment later. The collection's grace period must
// cover that second put as it covers a first one.
func TestCollectionSparesContentStoredAgainWithinGrace(t *testing.T) {
	t.Parallel()
	l := storage.Layout{Root: t.TempDir()}
	s := cas.Open(l.CASDir())
	h, err := s.Put("step output written twice")
	if err != nil {
		t.Fatal(err)
	}
	stale, _ := s.Put("nobody stores this again")
	age(t, s, h)
	age(t, s, stale)
	if again, err := s.Put("step output written twice"); err != nil || again != h {
		t.Fatalf("second put = %s, %v", again, err)
	}
	res, err := gc.Collect(context.Background(), l, s, gc.Options{Grace: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Exists(h); !ok {
		t.Fatalf("content stored again a moment ago was collected: %+v", res)
	}
	if ok, _ := s.Exists(stale); ok || res.DeletedEntries != 1 {
		t.Fatalf("old unreachable blob survived: %+v", res)
	}
	b, err := s.Get(h)
	if err != nil || !strings.Contains(string(b), "written twice") {
		t.Fatalf("blob after re-put = %q, %v", b, err)
	}
}

func TestDeleteUnlessNewer(t *testing.T) {
	t.Parallel()
	s := cas.Open(filepath.Join(t.TempDir(), "cas"))
	old, _ := s.Put("old")
	young, _ := s.Put("young")
	age(t, s, old)
	cutoff := time.Now().Add(-time.Minute)
	if gone, err := s.DeleteUnlessNewer(young, cutoff); err != nil || gone {
		t.Fatalf("young blob: %v, %v", gone, err)
	}
	if gone, err := s.DeleteUnlessNewer(old, cutoff); err != nil || !gone {
		t.Fatalf("old blob: %v, %v", gone, err)
	}
	if gone, err := s.DeleteUnlessNewer(old, cutoff); err != nil || gone {
		t.Fatalf("missing blob: %v, %v", gone, err)
	}
	if _, err := s.DeleteUnlessNewer("../secret", cutoff); err == nil {
		t.Fatal("bad hash accepted")
	}
	got, _ := s.List()
	if len(got) != 1 || got[0] != young {
		t.Fatalf("left = %v", got)
	}
	entries, _ := os.ReadDir(s.Dir())
	for _, e := range entries {
		if strings.Contains(e.Name(), ".gc.") {
			t.Fatalf("private name left behind: %s", e.Name())
		}
	}
}
