package jsrt

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/workflow"
	"github.com/uncaged/workflow/shared/testkit"
)

// fakeHost is an in-memory workflow.Host over a real CAS in a temp dir.
type fakeHost struct {
	store *cas.Store
	env   map[string]string

	mu    sync.Mutex
	logs  []logLine
	calls []childCall
	child func(ctx context.Context, name, prompt string) (workflow.ChildResult, error)
	// extracted records the schemas runtime.extract passed.
	extracted []string
}

// errNoExtractModel is what the fake host's Extract answers.
var errNoExtractModel = errors.New("fake host: no extract model")

// Extract implements workflow.Host: it records the schema and answers
// with meta {schemaType} for a content node, as a model would.
func (h *fakeHost) Extract(ctx context.Context, schema []byte, contentHash string) (workflow.ExtractResult, error) {
	h.mu.Lock()
	h.extracted = append(h.extracted, string(schema))
	h.mu.Unlock()
	n, err := h.store.GetNode(contentHash)
	if err != nil {
		return workflow.ExtractResult{}, errNoExtractModel
	}
	c, ok := n.(node.Content)
	if !ok {
		return workflow.ExtractResult{}, errNoExtractModel
	}
	return workflow.ExtractResult{Meta: canonyaml.Map{{Key: "schema", Value: string(schema)}}, ContentPayload: c.Payload}, nil
}

type logLine struct{ tag, content string }

type childCall struct{ name, prompt string }

func newFakeHost(t testing.TB) *fakeHost {
	t.Helper()
	return &fakeHost{store: cas.Open(filepath.Join(t.TempDir(), "cas")), env: map[string]string{}}
}

func (h *fakeHost) CAS() *cas.Store { return h.store }

func (h *fakeHost) Log(tag, content string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logs = append(h.logs, logLine{tag, content})
}

func (h *fakeHost) RunChild(ctx context.Context, name, prompt string) (workflow.ChildResult, error) {
	h.mu.Lock()
	h.calls = append(h.calls, childCall{name, prompt})
	child := h.child
	h.mu.Unlock()
	if child == nil {
		return workflow.ChildResult{}, workflow.ErrDepthLimit
	}
	return child(ctx, name, prompt)
}

func (h *fakeHost) Getenv(name string) string {
	if v, ok := h.env[name]; ok {
		return v
	}
	return os.Getenv(name)
}

func (h *fakeHost) logged(tag string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, l := range h.logs {
		if l.tag == tag {
			out = append(out, l.content)
		}
	}
	return out
}

func readTestdata(t testing.TB, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func loadTestdata(t testing.TB, file string) *Bundle {
	t.Helper()
	b, err := Load(readTestdata(t, file), filepath.Base(file), Options{})
	if err != nil {
		t.Fatalf("Load(%s): %v", file, err)
	}
	return b
}

func threadFor(b *Bundle, prompt string) workflow.ThreadContext {
	now := time.Now()
	return workflow.ThreadContext{
		ThreadID:   ids.NewThreadID(now),
		BundleHash: b.Hash(),
		Start:      workflow.StartStep{Role: node.RoleStart, Content: prompt, Timestamp: now.UnixMilli()},
	}
}

// drive runs a workflow to completion (or its first error) the way the
// executor would.
func drive(t testing.TB, b *Bundle, h *fakeHost, thread workflow.ThreadContext) ([]*workflow.Output, *workflow.Completion, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitBound)
	defer cancel()
	r, err := b.Start(ctx, thread, h)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = r.Close() }()
	var outs []*workflow.Output
	for i := 0; i < 1000; i++ {
		out, done, err := r.Next(ctx)
		if err != nil {
			return outs, nil, err
		}
		if done != nil {
			return outs, done, nil
		}
		outs = append(outs, out)
	}
	t.Fatal("workflow did not finish in 1000 steps")
	return nil, nil, nil
}

func roles(outs []*workflow.Output) string {
	var r []string
	for _, o := range outs {
		r = append(r, o.Role)
	}
	return strings.Join(r, ",")
}

// lineOf finds the 1-based line of the first line of a testdata file that
// contains needle, so tests do not hard-code line numbers.
func lineOf(t testing.TB, file, needle string) int {
	t.Helper()
	for i, line := range strings.Split(string(readTestdata(t, file)), "\n") {
		if strings.Contains(line, needle) {
			return i + 1
		}
	}
	t.Fatalf("%q not in %s", needle, file)
	return 0
}

// startKillable starts thread and calls Next on a goroutine, as the
// executor does; cancel is the thread being killed and errc gets what
// Next returned. The run is closed when the test ends.
func startKillable(t *testing.T, b *Bundle, h *fakeHost, thread workflow.ThreadContext) (r workflow.Run, cancel context.CancelFunc, errc <-chan error) {
	t.Helper()
	r, err := b.Start(context.Background(), thread, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch := make(chan error, 1)
	go func() {
		_, _, err := r.Next(ctx)
		ch <- err
	}()
	return r, cancel, ch
}
