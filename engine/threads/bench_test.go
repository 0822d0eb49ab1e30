package threads

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/storage"
)

// benchRoot writes one bundle with n active threads and n finished ones in
// the layouts both implementations write.
func benchRoot(b *testing.B, n int) storage.Layout {
	l := storage.Layout{Root: b.TempDir()}
	dir := l.BundleDir("BENCH")
	idx := make(Index, n)
	var hist []byte
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("06EZ%022d", i)
		idx[id] = Entry{Head: ids.HashString(id), Start: ids.HashString(id + "s"), UpdatedAt: int64(1778000000000 + i)}
		hist = fmt.Appendf(hist, `{"threadId":"06F0%022d","head":%q,"start":%q,"completedAt":%d}`+"\n", i, ids.HashString(id+"e"), ids.HashString(id+"s"), 1778000000000+i)
	}
	b1, err := marshalIndex(idx)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(HistoryDir(dir), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(IndexFile(dir), b1, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(HistoryDir(dir), "2026-05-05.jsonl"), hist, 0o644); err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkListBundle10k reads 10k active and 10k finished threads, the
// path every thread list and GC takes.
func BenchmarkListBundle10k(b *testing.B) {
	l := benchRoot(b, 10000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		recs, err := ListBundle(l, "BENCH")
		if err != nil || len(recs) != 20000 {
			b.Fatal(len(recs), err)
		}
	}
}

// BenchmarkReadIndex10k reads one threads.json of 10k entries.
func BenchmarkReadIndex10k(b *testing.B) {
	l := benchRoot(b, 10000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		idx, err := ReadIndex(l.BundleDir("BENCH"))
		if err != nil || len(idx) != 10000 {
			b.Fatal(len(idx), err)
		}
	}
}

// BenchmarkStepOf10kIndex is one thread's step in an index of 10,000
// active threads, as a group commit makes it: read the file back and
// compare it with what was written, update the entry, write the whole
// file anew (and sync it).
func BenchmarkStepOf10kIndex(b *testing.B) {
	l := benchRoot(b, 10000)
	dir := l.BundleDir("BENCH")
	i := 0
	for b.Loop() {
		i++
		if err := Upsert(dir, "06EZ0000000000000000000000", Entry{Head: ids.HashString(fmt.Sprint(i)), Start: ids.HashString("s"), UpdatedAt: int64(i)}); err != nil {
			b.Fatal(err)
		}
	}
}
