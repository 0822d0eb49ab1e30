package store

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestTruncateRunes(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"", 3, ""},
		{"abc", 3, "abc"},
		{"abcd", 3, "abc"},
		{"日本語です", 3, "日本語"},
		{"a😀b", 2, "a😀"},
	} {
		if got := truncateRunes(c.in, c.n); got != c.want || !utf8.ValidString(got) {
			t.Errorf("truncateRunes(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func TestLooksLikeJWT(t *testing.T) {
	for s, want := range map[string]bool{
		"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.sig": true,
		"Bearer eyJa.eyJb.c":                       true,
		"01JTOKENID":                               false,
		"10.0.0.1":                                 false,
		"laptop":                                   false,
	} {
		if got := looksLikeJWT(s); got != want {
			t.Errorf("looksLikeJWT(%q) = %v", s, got)
		}
	}
}

func TestFTSQuery(t *testing.T) {
	const in = `{prompt summary} : `
	for q, want := range map[string]string{
		"deploy":             in + `"deploy"`,
		`say "hi" now`:       in + `"say" AND ` + in + `"""hi""" AND ` + in + `"now"`,
		"a AND b":            in + `"a" AND ` + in + `"AND" AND ` + in + `"b"`,
		" - * ( ":            "",
		"payments* NEAR(x y": in + `"payments*" AND ` + in + `"NEAR(x" AND ` + in + `"y"`,
	} {
		if got := ftsQuery(q); got != want {
			t.Errorf("ftsQuery(%q) = %s, want %s", q, got, want)
		}
	}
}

func TestFTSFilterQuery(t *testing.T) {
	got := ftsFilterQuery(ThreadQuery{Q: "deploy", Machine: "m-1", Workflow: "", Status: "done"})
	want := `{prompt summary} : "deploy" AND facets : "m6D2D31" AND facets : "s646F6E65"`
	if got != want {
		t.Errorf("ftsFilterQuery = %s, want %s", got, want)
	}
}

func TestSeqSlot(t *testing.T) {
	epoch := time.UnixMicro(seqEpoch)
	for _, c := range []struct {
		t    time.Time
		want int64
	}{
		{epoch, 0},
		{epoch.Add(time.Microsecond), seqTies},
		{epoch.Add(-time.Microsecond), -seqTies},
		{epoch.Add(1500 * time.Nanosecond), seqTies}, // stored to the microsecond
		{time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), seqMaxSlot << seqTieBits},
		{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), seqMinSlot << seqTieBits},
	} {
		if got := seqSlot(c.t); got != c.want {
			t.Errorf("seqSlot(%v) = %d, want %d", c.t, got, c.want)
		}
		if got := slotOf(c.want + seqTies - 1); got != c.want {
			t.Errorf("slotOf(%d) = %d, want %d", c.want+seqTies-1, got, c.want)
		}
	}
	// Later times, later slots: the order of seqs is the order of times.
	a, b := seqSlot(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), seqSlot(time.Date(2026, 3, 1, 12, 0, 0, 1000, time.UTC))
	if b-a != seqTies {
		t.Errorf("a microsecond later is %d seqs later, want %d", b-a, seqTies)
	}
}

func TestChunkIDs(t *testing.T) {
	if got := chunkIDs(nil); len(got) != 1 || len(got[0]) != 0 {
		t.Fatalf("chunkIDs(nil) = %v, want one empty chunk", got)
	}
	var ids []string
	for i := range 2000 {
		ids = append(ids, strings.Repeat("x", 20)+string(rune('a'+i%26)))
	}
	chunks := chunkIDs(ids)
	n := 0
	for _, c := range chunks {
		b, err := json.Marshal(Change{Kind: ChangeRevocation, IDs: c})
		if err != nil {
			t.Fatal(err)
		}
		if len(b) >= 8000 {
			t.Fatalf("a chunk's payload is %d bytes, over PostgreSQL's limit", len(b))
		}
		n += len(c)
	}
	if n != len(ids) || len(chunks) < 2 {
		t.Fatalf("%d ids in %d chunks, want all %d in several", n, len(chunks), len(ids))
	}
}

// TestHubSlowSubscriber checks that a subscriber that stops reading costs
// bounded memory and learns it missed changes, and that others still get
// every change.
func TestHubSlowSubscriber(t *testing.T) {
	h := newHub()
	defer h.close()
	ctx := context.Background()
	slow, _ := h.subscribe(ctx)
	fast, _ := h.subscribe(ctx)
	// The fast one reads each change before the next is published.
	for i := range 3 * maxQueued {
		h.publish(Change{Kind: ChangeRevocation, IDs: []string{"x"}})
		if c := <-fast; c.Kind != ChangeRevocation {
			t.Fatalf("fast subscriber's change %d is %+v", i, c)
		}
	}
	// Nobody reads the slow one: its pump holds the first change, blocked,
	// and its queue collapsed into a reload followed by fewer than
	// maxQueued changes.
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.out != slow {
			continue
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.queue) > maxQueued || len(s.queue) == 0 || s.queue[0].Kind != ChangeReload {
			t.Fatalf("slow subscriber's queue holds %d changes, first %+v; want at most %d, a reload first", len(s.queue), s.queue[0], maxQueued)
		}
		return
	}
	t.Fatal("slow subscriber not found")
}

func TestHubCancelAndClose(t *testing.T) {
	h := newHub()
	ctx, cancel := context.WithCancel(context.Background())
	a, _ := h.subscribe(ctx)
	b, _ := h.subscribe(context.Background())
	cancel()
	for range a {
		t.Fatal("change after cancel")
	}
	h.close()
	for range b {
		t.Fatal("change after close")
	}
	c, _ := h.subscribe(context.Background())
	if _, ok := <-c; ok {
		t.Fatal("subscription after close is open")
	}
}

func TestFTSFilterQueryWithoutWords(t *testing.T) {
	got := ftsFilterQuery(ThreadQuery{Q: " -- ", Machine: "m", Workflow: "w"})
	if want := `facets : "m6D" AND facets : "w77"`; got != want {
		t.Errorf("ftsFilterQuery = %s, want %s", got, want)
	}
}
