package api

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// writeFinishedThreads writes n finished threads of one bundle straight
// into l (plain writes: setup needs no durability), every tenth with a
// usage file, and returns the bundle hash.
func writeFinishedThreads(b *testing.B, l storage.Layout, n int) string {
	b.Helper()
	bundle := ids.HashString("bench")
	put := func(nd node.Node) string {
		data, err := nd.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		h := ids.HashBytes(data)
		if err := os.WriteFile(filepath.Join(l.CASDir(), h+".txt"), data, 0o644); err != nil {
			b.Fatal(err)
		}
		return h
	}
	for _, d := range []string{l.CASDir(), threads.HistoryDir(l.BundleDir(bundle)), l.LogsDir(bundle)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	var hist strings.Builder
	for i := range n {
		id := ids.NewThreadID(time.UnixMilli(int64(1_700_000_000_000 + i)))
		prompt := put(node.NewContent(fmt.Sprintf("prompt %d: %s", i, strings.Repeat("words ", 50)), nil))
		start := put(node.NewStart(node.StartPayload{Name: "bench", Hash: bundle}, prompt))
		end := put(node.NewState(node.StatePayload{Role: node.RoleEnd, Start: start, Content: prompt,
			Meta: canonyaml.Map{{Key: "returnCode", Value: 0}, {Key: "summary", Value: "done"}}}))
		fmt.Fprintf(&hist, `{"threadId":%q,"head":%q,"start":%q,"completedAt":%d}`+"\n", id, end, start, 1_700_000_000_000+i)
		if i%10 == 0 {
			line := fmt.Sprintf(`{"ts":%d,"thread":%q,"workflow":"bench","step":1,"source":"role","model":"p/m","promptTokens":10,"completionTokens":5}`+"\n", 1_700_000_000_000+i, id)
			if err := os.WriteFile(filepath.Join(l.LogsDir(bundle), id+".usage.jsonl"), []byte(line), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(threads.HistoryDir(l.BundleDir(bundle)), "2026-01-01.jsonl"), []byte(hist.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	return bundle
}

// BenchmarkThreadList is GET /api/threads over 10,000 finished threads: a
// dashboard's page, and the whole list as original clients ask for it.
func BenchmarkThreadList(b *testing.B) {
	f := newFixture(b)
	writeFinishedThreads(b, f.l, 10_000)
	for _, q := range []string{"?limit=50", ""} {
		b.Run("query="+q, func(b *testing.B) {
			for b.Loop() {
				if rec := f.call(http.MethodGet, "/api/threads"+q, ""); rec.Code != http.StatusOK {
					b.Fatal(rec.Code, rec.Body)
				}
			}
		})
	}
}
