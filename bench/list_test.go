// Package bench holds benchmarks of the storage layer that need generated
// data; the figures with in-run baselines come from ./cmd/storebench.
package bench

import (
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/connector/cli"
	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// makeThreads writes n finished threads over 20 bundles as history files.
func makeThreads(b *testing.B, root string, n int) {
	rng := rand.New(rand.NewSource(1))
	l := storage.Layout{Root: root}
	files := map[string]*strings.Builder{}
	store := l.CASDir()
	if err := os.MkdirAll(store, 0o755); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i++ {
		bundle := ids.HashString(fmt.Sprint(rng.Intn(20)))
		id := ids.NewThreadID(time.UnixMilli(int64(i)))
		p := filepath.Join(threads.HistoryDir(l.BundleDir(bundle)), fmt.Sprintf("2026-11-%02d.jsonl", 1+rng.Intn(28)))
		if files[p] == nil {
			files[p] = &strings.Builder{}
		}
		head, start := endedThreadNodes(b, store, id)
		fmt.Fprintf(files[p], `{"threadId":%q,"head":%q,"start":%q,"completedAt":%d}`+"\n", id, head, start, i)
	}
	for p, sb := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// endedThreadNodes writes a finished thread's start and __end__ head into
// the CAS directory casDir (plain writes: setup needs no durability) and
// returns them: a list reports a head that is not in the CAS as damaged.
func endedThreadNodes(b *testing.B, casDir, id string) (head, start string) {
	put := func(nd node.Node) string {
		data, err := nd.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		h := ids.HashBytes(data)
		if err := os.WriteFile(filepath.Join(casDir, h+".txt"), data, 0o644); err != nil {
			b.Fatal(err)
		}
		return h
	}
	prompt := put(node.NewContent("prompt of "+id, nil))
	start = put(node.NewStart(node.StartPayload{Name: "flow", Hash: "BENCH"}, prompt))
	end := node.StatePayload{Role: node.RoleEnd, Meta: canonyaml.Map{{Key: "returnCode", Value: 0}}, Start: start, Content: prompt}
	return put(node.NewState(end)), start
}

func BenchmarkThreadsList100k(b *testing.B) {
	root := b.TempDir()
	makeThreads(b, root, 100000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		recs, err := threads.List(storage.Layout{Root: root})
		if err != nil || len(recs) != 100000 {
			b.Fatal(len(recs), err)
		}
	}
}

func BenchmarkThreadListCommand100k(b *testing.B) {
	root := b.TempDir()
	makeThreads(b, root, 100000)
	env := cli.Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string {
		if k == storage.EnvRoot {
			return root
		}
		return ""
	}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if code := cli.Run([]string{"thread", "list"}, env); code != 0 {
			b.Fatal(code)
		}
	}
}
