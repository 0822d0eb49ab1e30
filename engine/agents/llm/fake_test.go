package llm

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/registry"
)

const testKey = "sk-test-SECRET-0123456789"

// step is one scripted response of the fake server.
type step struct {
	status int
	header map[string]string
	body   string
	// block makes the handler wait for the request to be cancelled.
	block bool
	// received, when set, is closed once the request has been read.
	received chan struct{}
	// events, when set, are sent as a server-sent event stream, each
	// written and flushed on its own ("data: " and the blank line added).
	events []string
	// holdAfter events have been sent, the handler waits for hold to be
	// closed (or the request to be cancelled) before sending the rest.
	holdAfter int
	hold      chan struct{}
	// stall makes the handler, after its events, wait for the request to
	// be cancelled instead of ending the stream.
	stall bool
}

// recorded is one request received by the fake server.
type recorded struct {
	Auth string
	Body wireBody
	Raw  string
}

type wireBody struct {
	Model      string          `json:"model"`
	Messages   []Message       `json:"messages"`
	Tools      []ToolDef       `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
}

// fakeServer is an in-process OpenAI-compatible endpoint that replays a
// script of responses, one per request, and records the requests.
type fakeServer struct {
	t     *testing.T
	srv   *httptest.Server
	mu    sync.Mutex
	steps []step
	reqs  []recorded
}

func newFake(t *testing.T, steps ...step) *fakeServer {
	t.Helper()
	f := &fakeServer{t: t, steps: steps}
	f.srv = httptest.NewServer(http.HandlerFunc(f.handle))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) handle(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.Error(w, "bad path "+r.URL.Path, http.StatusNotFound)
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var b wireBody
	_ = json.Unmarshal(raw, &b)
	f.mu.Lock()
	f.reqs = append(f.reqs, recorded{Auth: r.Header.Get("Authorization"), Body: b, Raw: string(raw)})
	var s step
	if len(f.steps) == 0 {
		f.mu.Unlock()
		http.Error(w, "script exhausted", http.StatusTeapot)
		return
	}
	s, f.steps = f.steps[0], f.steps[1:]
	f.mu.Unlock()
	if s.received != nil {
		close(s.received)
	}
	if s.block {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		return
	}
	for k, v := range s.header {
		w.Header().Set(k, v)
	}
	if s.events != nil {
		f.stream(w, r, s)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if s.status == 0 {
		s.status = http.StatusOK
	}
	w.WriteHeader(s.status)
	_, _ = io.WriteString(w, s.body)
}

// stream writes s.events as server-sent events, flushing each one so the
// client sees them arrive separately.
func (f *fakeServer) stream(w http.ResponseWriter, r *http.Request, s step) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	for i, ev := range s.events {
		if s.hold != nil && i == s.holdAfter {
			select {
			case <-s.hold:
			case <-r.Context().Done():
				return
			}
		}
		if _, err := io.WriteString(w, "data: "+ev+"\n\n"); err != nil {
			return
		}
		fl.Flush()
	}
	if s.stall {
		<-r.Context().Done()
	}
}

func (f *fakeServer) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func (f *fakeServer) model() registry.Model {
	return registry.Model{BaseURL: f.srv.URL + "/v1/", APIKey: testKey, Model: "test/model-1"}
}

// fastOpts retries quickly.
func fastOpts() Options {
	return Options{MaxAttempts: 3, BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Timeout: 5 * time.Second}
}

// contentReply is a response whose message is plain text content.
func contentReply(content string) step {
	b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": content}}}})
	return step{body: string(b)}
}

// callReply is a response with tool calls given as (id, name, args) triples.
func callReply(calls ...[3]string) step {
	var tcs []any
	for _, c := range calls {
		tcs = append(tcs, map[string]any{"id": c[0], "type": "function", "function": map[string]any{"name": c[1], "arguments": c[2]}})
	}
	b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": nil, "tool_calls": tcs}}}})
	return step{body: string(b)}
}

// textChunk is a streamed chunk carrying a piece of the reply's text.
func textChunk(piece string) string {
	b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": piece}, "finish_reason": nil}}})
	return string(b)
}

// callChunk is a streamed chunk carrying part of tool call index: the id
// and name (when non-empty) and a piece of its arguments.
func callChunk(index int, id, name, argsPiece string) string {
	tc := map[string]any{"index": index, "function": map[string]any{"arguments": argsPiece}}
	if id != "" {
		tc["id"], tc["type"] = id, "function"
		tc["function"].(map[string]any)["name"] = name
	}
	b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{tc}}}}})
	return string(b)
}

// finishChunk ends choice 0 with reason.
func finishChunk(reason string) string {
	return `{"choices":[{"index":0,"delta":{},"finish_reason":"` + reason + `"}]}`
}

// streamReply streams text in the given pieces, then finishes with [DONE].
func streamReply(pieces ...string) step {
	var ev []string
	for _, p := range pieces {
		ev = append(ev, textChunk(p))
	}
	return step{events: append(ev, finishChunk("stop"), "[DONE]")}
}
