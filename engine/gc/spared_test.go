package gc

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A collection under a grace period counts what the period spared, so the
// CLI can say why unreachable blobs are still there; without one nothing
// is spared and the JSON keeps the original's shape.
func TestResultCountsWhatTheGracePeriodSpared(t *testing.T) {
	t.Parallel()
	l, store := newRoot(t)
	young, _ := store.Put("stored a moment ago, not linked yet")
	old, _ := store.Put("unreachable for an hour")
	hourAgo := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(store.Dir(), old+".txt"), hourAgo, hourAgo); err != nil {
		t.Fatal(err)
	}
	res, err := Collect(context.Background(), l, store, Options{Grace: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.DeletedEntries != 1 || res.DeletedHashes[0] != old || res.SparedEntries != 1 {
		t.Fatalf("with grace: %+v", res)
	}
	if ok, _ := store.Exists(young); !ok {
		t.Fatal("the young blob was collected")
	}
	b, _ := json.Marshal(res)
	if !strings.Contains(string(b), `"sparedEntries":1`) {
		t.Fatalf("JSON lacks the spared count: %s", b)
	}

	res, err = Collect(context.Background(), l, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.DeletedEntries != 1 || res.SparedEntries != 0 {
		t.Fatalf("without grace: %+v", res)
	}
	if b, _ := json.Marshal(res); strings.Contains(string(b), "spared") {
		t.Fatalf("JSON names spared entries when there are none: %s", b)
	}
}
