package api

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/threads"
)

// GET /api/threads shows what it can read and names the damaged files,
// instead of answering an empty list; a healthy store's answer keeps the
// original's fields only.
func TestThreadListNamesDamagedFiles(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.Engine = nil })
	// A sound thread: its head (here its start, as a thread that made no
	// step yet) is in the CAS.
	start, err := cas.Open(f.l.CASDir()).PutNode(node.NewStart(node.StartPayload{Name: "demo", Hash: "GOOD"}, "AB2BP0Y50PSY6"))
	if err != nil {
		t.Fatal(err)
	}
	if err := threads.Upsert(f.l.BundleDir("GOOD"), "06EZJ3QM9Q4S5XWA0R1C7D8E2G", threads.Entry{Head: start, Start: start, UpdatedAt: 1778000100000}); err != nil {
		t.Fatal(err)
	}
	healthy := f.call(http.MethodGet, "/api/threads", "")
	if healthy.Code != http.StatusOK || strings.Contains(healthy.Body.String(), "damaged") {
		t.Fatalf("healthy list = %d %s", healthy.Code, healthy.Body)
	}

	bad := f.l.BundleDir("BAD")
	if err := threads.Upsert(bad, "06EZHZP3N4J2B8V6Q0T9W1X5Y4", threads.Entry{Head: "DXAGP9TW6ZX9Y", Start: "TE2CRJNW51W4G", UpdatedAt: 1778000002000}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(threads.IndexFile(bad))
	if err := os.WriteFile(threads.IndexFile(bad), b[:len(b)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	var list ThreadList
	f.want(http.MethodGet, "/api/threads", "", http.StatusOK, &list)
	if list.Total != 1 || len(list.Threads) != 1 || list.Threads[0].ThreadID != "06EZJ3QM9Q4S5XWA0R1C7D8E2G" {
		t.Fatalf("threads = %+v", list)
	}
	want := DamagedFile{Path: "bundles/BAD/threads.json", Line: 6, Reason: "the file ends in the middle of the JSON (cut short)"}
	if len(list.Damaged) != 1 || list.Damaged[0] != want {
		t.Fatalf("damaged = %+v, want %+v", list.Damaged, want)
	}
	f.wantError(http.MethodGet, "/api/threads/06EZHZP3N4J2B8V6Q0T9W1X5Y4", "", http.StatusNotFound, "a damaged thread index on this machine may name it")
	var raw map[string]json.RawMessage
	f.want(http.MethodGet, "/api/threads", "", http.StatusOK, &raw)
	for _, k := range []string{"threads", "total", "damaged"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("field %q missing from %v", k, raw)
		}
	}
}
