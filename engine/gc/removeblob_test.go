package gc

import (
	"context"
	"errors"
	"testing"
	"time"
)

// `cas rm` is a sweep of one blob: every blob a thread reaches, from an
// active thread's chain or a finished one's, is refused and kept; an
// unreachable one goes; and on a damaged root nothing goes, since what
// is needed cannot be told.
func TestRemovingOneBlobNeverTakesOneAThreadReaches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newTwoThreads(t)
	var all []string
	if err := r.store.Each(func(h string) error { all = append(all, h); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(all) < 5 {
		t.Fatalf("a root of two threads holds %d blobs", len(all))
	}
	for _, h := range all {
		if h == r.orphan {
			continue
		}
		deleted, err := RemoveBlob(ctx, r.l, r.store, h, Options{})
		if deleted || !errors.Is(err, ErrNeeded) {
			t.Errorf("removing %s, which a thread reaches: deleted %v, %v", h, deleted, err)
		}
		if ok, _ := r.store.Exists(h); !ok {
			t.Fatalf("%s, which a thread reaches, was deleted", h)
		}
	}
	// Within the grace an unreachable blob is spared: a running step may
	// be about to link it.
	if deleted, err := RemoveBlob(ctx, r.l, r.store, r.orphan, Options{Grace: time.Hour}); deleted || err != nil {
		t.Fatalf("a blob stored within the grace: deleted %v, %v", deleted, err)
	}
	// Damage anywhere: nothing goes, not even the orphan.
	editFile(t, r.histFile, r.fHead, r.fHead[:12])
	if deleted, err := RemoveBlob(ctx, r.l, r.store, r.orphan, Options{}); deleted || !errors.Is(err, ErrRefused) {
		t.Fatalf("on a damaged root: deleted %v, %v", deleted, err)
	}
	editFile(t, r.histFile, `"`+r.fHead[:12]+`"`, `"`+r.fHead+`"`)
	if deleted, err := RemoveBlob(ctx, r.l, r.store, r.orphan, Options{}); !deleted || err != nil {
		t.Fatalf("the orphan: deleted %v, %v", deleted, err)
	}
	if ok, _ := r.store.Exists(r.orphan); ok {
		t.Fatal("the orphan is still there")
	}
}
