package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/node"
)

const decisionSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "supervisor_decision",
  "description": "Decide whether to continue.",
  "type": "object",
  "properties": {"decision": {"type": "string", "enum": ["continue", "stop", "kill"]}},
  "required": ["decision"],
  "additionalProperties": false
}`

type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) log(tag, content string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, tag+": "+content)
}

func (l *logSink) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func baseRequest() Request {
	return Request{System: "sys", User: "task", Output: Output{Schema: json.RawMessage(decisionSchema)}, MaxRounds: 4}
}

func TestReactPlainStructuredReply(t *testing.T) {
	t.Parallel()
	f := newFake(t, contentReply("```json\n{\"decision\": \"stop\"}\n```"))
	sink := &logSink{}
	opts := fastOpts()
	opts.Log = sink.log
	got, err := React(context.Background(), New(f.model(), opts), baseRequest())
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"decision":"stop"}` {
		t.Fatalf("got %s", got)
	}
	if n := len(f.requests()); n != 1 {
		t.Fatalf("requests = %d", n)
	}
	if !strings.Contains(sink.all(), "round 1/4") {
		t.Fatalf("log missing round line: %q", sink.all())
	}
}

func TestReactRequestShape(t *testing.T) {
	t.Parallel()
	f := newFake(t, contentReply(`{"decision":"continue"}`))
	req := baseRequest()
	req.Tools = []Tool{{Name: "lookup", Description: "Look up.", Parameters: json.RawMessage(`{"type":"object"}`),
		Handler: func(context.Context, string) (string, error) { return "", nil }}}
	if _, err := React(context.Background(), New(f.model(), fastOpts()), req); err != nil {
		t.Fatal(err)
	}
	r := f.requests()[0]
	if r.Auth != "Bearer "+testKey {
		t.Fatalf("auth header %q", r.Auth)
	}
	if r.Body.Model != "test/model-1" {
		t.Fatalf("model %q", r.Body.Model)
	}
	if string(r.Body.ToolChoice) != `"auto"` {
		t.Fatalf("tool_choice %s", r.Body.ToolChoice)
	}
	if len(r.Body.Messages) != 2 || r.Body.Messages[0].Role != "system" || r.Body.Messages[0].Text() != "sys" ||
		r.Body.Messages[1].Role != "user" || r.Body.Messages[1].Text() != "task" {
		t.Fatalf("messages %+v", r.Body.Messages)
	}
	if len(r.Body.Tools) != 2 || r.Body.Tools[0].Function.Name != "lookup" || r.Body.Tools[0].Type != "function" {
		t.Fatalf("tools %+v", r.Body.Tools)
	}
	out := r.Body.Tools[1]
	if out.Type != "function" || out.Function.Name != "supervisor_decision" || out.Function.Description != "Decide whether to continue." {
		t.Fatalf("output tool %+v", out)
	}
	var params map[string]any
	if err := json.Unmarshal(out.Function.Parameters, &params); err != nil {
		t.Fatal(err)
	}
	if _, has := params["$schema"]; has {
		t.Fatal("$schema not stripped from tool parameters")
	}
	if params["type"] != "object" || params["required"] == nil {
		t.Fatalf("params %v", params)
	}
}

func TestOutputToolDefaultName(t *testing.T) {
	t.Parallel()
	f := newFake(t, callReply([3]string{"c1", "extract", `{"n":1}`}))
	req := Request{User: "x", Output: Output{Schema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}}
	got, err := React(context.Background(), New(f.model(), fastOpts()), req)
	if err != nil || string(got) != `{"n":1}` {
		t.Fatalf("got %s, %v", got, err)
	}
	tl := f.requests()[0].Body.Tools
	if tl[0].Function.Name != DefaultOutputName || tl[0].Function.Description != DefaultOutputDescription {
		t.Fatalf("tool %+v", tl[0])
	}
}

func TestReactToolCallThenOutputTool(t *testing.T) {
	t.Parallel()
	f := newFake(t,
		callReply([3]string{"c1", "lookup", `{"q":"a"}`}, [3]string{"c2", "nope", `{}`}, [3]string{"c3", "broken", `{}`}),
		callReply([3]string{"c4", "supervisor_decision", `{"decision": "continue"}`}),
	)
	var gotArgs string
	req := baseRequest()
	req.Tools = []Tool{
		{Name: "lookup", Handler: func(_ context.Context, a string) (string, error) { gotArgs = a; return "result-a", nil }},
		{Name: "broken", Handler: func(context.Context, string) (string, error) { return "", errors.New("disk on fire") }},
	}
	sink := &logSink{}
	req.Log = sink.log
	got, err := React(context.Background(), New(f.model(), fastOpts()), req)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"decision":"continue"}` {
		t.Fatalf("got %s", got)
	}
	if gotArgs != `{"q":"a"}` {
		t.Fatalf("handler args %q", gotArgs)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("requests = %d", len(reqs))
	}
	msgs := reqs[1].Body.Messages
	// system, user, assistant(tool_calls), tool×3
	if len(msgs) != 6 {
		t.Fatalf("round 2 messages: %d %+v", len(msgs), msgs)
	}
	if msgs[2].Role != "assistant" || len(msgs[2].ToolCalls) != 3 || msgs[2].Content != nil {
		t.Fatalf("assistant msg %+v", msgs[2])
	}
	want := []struct{ id, text string }{
		{"c1", "result-a"},
		{"c2", "Unknown tool: nope. Use one of the declared tools only."},
		{"c3", "Tool execution failed: disk on fire"},
	}
	for i, w := range want {
		m := msgs[3+i]
		if m.Role != "tool" || m.ToolCallID != w.id || m.Text() != w.text {
			t.Fatalf("tool msg %d = %+v, want %+v", i, m, w)
		}
	}
	if !strings.Contains(reqs[1].Raw, `"content":null`) {
		t.Fatalf("assistant tool-call message should carry content:null: %s", reqs[1].Raw)
	}
	for _, s := range []string{`tool lookup returned "result-a"`, "unknown tool \"nope\"", "tool broken failed"} {
		if !strings.Contains(sink.all(), s) {
			t.Fatalf("log missing %q:\n%s", s, sink.all())
		}
	}
}

func TestReactInvalidOutputThenCorrection(t *testing.T) {
	t.Parallel()
	f := newFake(t,
		callReply([3]string{"c1", "supervisor_decision", `{"decision":"maybe"}`}),
		callReply([3]string{"c2", "supervisor_decision", `not json`}),
		contentReply(`I think we should stop.`),
		contentReply(`{"decision":"stop","extra":1}`),
		callReply([3]string{"c3", "supervisor_decision", `{"decision":"stop"}`}),
	)
	sink := &logSink{}
	req := baseRequest()
	req.MaxRounds = 5
	req.Log = sink.log
	got, err := React(context.Background(), New(f.model(), fastOpts()), req)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"decision":"stop"}` {
		t.Fatalf("got %s", got)
	}
	reqs := f.requests()
	if len(reqs) != 5 {
		t.Fatalf("requests = %d", len(reqs))
	}
	last := func(i int) Message { m := reqs[i].Body.Messages; return m[len(m)-1] }
	if m := last(1); m.Role != "tool" || m.ToolCallID != "c1" || !strings.HasPrefix(m.Text(), "Schema validation failed: ") || !strings.Contains(m.Text(), "/decision") {
		t.Fatalf("round 2 correction %+v", m)
	}
	if m := last(2); m.Role != "tool" || m.Text() != "Tool arguments were not valid JSON. Provide valid JSON object arguments matching the schema." {
		t.Fatalf("round 3 correction %+v", m)
	}
	if m := last(3); m.Role != "user" || !strings.HasPrefix(m.Text(), "Your previous reply was not valid JSON") || !strings.Contains(m.Text(), "supervisor_decision") {
		t.Fatalf("round 4 correction %+v", m)
	}
	if m := reqs[3].Body.Messages[len(reqs[3].Body.Messages)-2]; m.Role != "assistant" || m.Text() != "I think we should stop." {
		t.Fatalf("assistant text not echoed: %+v", m)
	}
	if m := last(4); m.Role != "user" || !strings.HasPrefix(m.Text(), "Your previous JSON reply did not satisfy the schema: ") {
		t.Fatalf("round 5 correction %+v", m)
	}
	if !strings.Contains(sink.all(), "failed validation") {
		t.Fatalf("no validation failure logged:\n%s", sink.all())
	}
}

func TestReactMaxRounds(t *testing.T) {
	t.Parallel()
	f := newFake(t, contentReply("no"), contentReply("still no"), contentReply("never"))
	req := baseRequest()
	req.MaxRounds = 3
	_, err := React(context.Background(), New(f.model(), fastOpts()), req)
	if !errors.Is(err, ErrMaxRounds) || err.Error() != "max_react_rounds_exceeded" {
		t.Fatalf("err = %v", err)
	}
	if n := len(f.requests()); n != 3 {
		t.Fatalf("requests = %d", n)
	}
}

func TestReactBadSchema(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	req := baseRequest()
	req.Output.Schema = json.RawMessage(`{"type": 12}`)
	if _, err := React(context.Background(), New(f.model(), fastOpts()), req); err == nil {
		t.Fatal("expected schema compile error")
	}
	if len(f.requests()) != 0 {
		t.Fatal("no request expected")
	}
}

func TestRetryAfter429ThenSuccess(t *testing.T) {
	t.Parallel()
	f := newFake(t,
		step{status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "1"}, body: `{"error":"slow down"}`},
		contentReply(`{"decision":"stop"}`),
	)
	opts := fastOpts()
	start := time.Now()
	got, err := React(context.Background(), New(f.model(), opts), baseRequest())
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"decision":"stop"}` {
		t.Fatalf("got %s", got)
	}
	if el := time.Since(start); el < 900*time.Millisecond {
		t.Fatalf("Retry-After not honoured: %v", el)
	}
	if n := len(f.requests()); n != 2 {
		t.Fatalf("requests = %d", n)
	}
}

func TestServerErrorRetried(t *testing.T) {
	t.Parallel()
	f := newFake(t,
		step{status: 500, body: "boom"},
		step{status: 502, body: "bad gateway"},
		contentReply(`hello`),
	)
	msg, err := New(f.model(), fastOpts()).Chat(context.Background(), ChatRequest{Messages: []Message{UserMessage("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if msg.Text() != "hello" {
		t.Fatalf("msg %+v", msg)
	}
}

func TestRetriesExhaustedAndNonRetryable(t *testing.T) {
	t.Parallel()
	f := newFake(t, step{status: 503, body: "down"}, step{status: 503, body: "still down " + strings.Repeat("x", 2000)})
	opts := fastOpts()
	opts.MaxAttempts = 2
	_, err := New(f.model(), opts).Chat(context.Background(), ChatRequest{})
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != 503 || !strings.HasPrefix(err.Error(), "http_error:503:still down") || len(he.Body) > bodyExcerptLimit+4 {
		t.Fatalf("err = %v", err)
	}

	f2 := newFake(t, step{status: 400, body: `{"error":"bad request"}`}, contentReply("unused"))
	_, err = New(f2.model(), fastOpts()).Chat(context.Background(), ChatRequest{})
	if err == nil || !strings.Contains(err.Error(), "http_error:400:") || len(f2.requests()) != 1 {
		t.Fatalf("400 should not be retried: %v (%d requests)", err, len(f2.requests()))
	}
}

func TestNetworkErrorRetried(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	m := f.model()
	f.srv.Close()
	opts := fastOpts()
	opts.MaxAttempts = 2
	sink := &logSink{}
	opts.Log = sink.log
	_, err := New(m, opts).Chat(context.Background(), ChatRequest{})
	if err == nil || !strings.HasPrefix(err.Error(), "network_error:") {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(sink.all(), "attempt 1/2 failed") {
		t.Fatalf("retry not logged: %s", sink.all())
	}
}

func TestPerRequestTimeout(t *testing.T) {
	// Serial: a 100 ms request timeout that load from parallel tests can exceed.
	f := newFake(t, step{block: true}, contentReply("ok"))
	opts := fastOpts()
	opts.Timeout = 100 * time.Millisecond
	msg, err := New(f.model(), opts).Chat(context.Background(), ChatRequest{})
	if err != nil || msg.Text() != "ok" {
		t.Fatalf("msg %+v err %v", msg, err)
	}
}

func TestCancellationMidRequest(t *testing.T) {
	t.Parallel()
	received := make(chan struct{})
	f := newFake(t, step{block: true, received: received})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-received:
			cancel()
		case <-ctx.Done():
		}
	}()
	// Returning context.Canceled at all is the point: a call that ignored
	// the cancellation would hang until the test binary's timeout.
	_, err := React(ctx, New(f.model(), fastOpts()), baseRequest())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	// Cancelling during a Retry-After wait also returns at once.
	f2 := newFake(t, step{status: 429, header: map[string]string{"Retry-After": "30"}})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	// The 30 s Retry-After is far longer than the context: getting the
	// context's error shows the wait gave way to it.
	_, err = New(f2.model(), fastOpts()).Chat(ctx2, ChatRequest{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

func TestKeyNotLeaked(t *testing.T) {
	t.Parallel()
	// The server echoes the Authorization header back in error bodies.
	echo := fmt.Sprintf(`{"error":"invalid key Bearer %s"}`, testKey)
	f := newFake(t, step{status: 401, body: echo}, step{status: 500, body: echo}, step{status: 500, body: echo}, step{status: 500, body: echo})
	sink := &logSink{}
	opts := fastOpts()
	opts.Log = sink.log
	c := New(f.model(), opts)
	_, err := c.Chat(context.Background(), ChatRequest{})
	if err == nil || strings.Contains(err.Error(), testKey) || !strings.Contains(err.Error(), "[REDACTED]") {
		t.Fatalf("err = %v", err)
	}
	_, err = React(context.Background(), c, baseRequest())
	if err == nil || strings.Contains(err.Error(), testKey) || strings.Contains(fmt.Sprintf("%#v", err), testKey) {
		t.Fatalf("err = %v", err)
	}
	// Network error path: the key must not show in the URL or anywhere else.
	m := f.model()
	f.srv.Close()
	_, err = New(m, opts).Chat(context.Background(), ChatRequest{})
	if err == nil || strings.Contains(err.Error(), testKey) {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(sink.all(), testKey) {
		t.Fatalf("key leaked to log:\n%s", sink.all())
	}
	if sink.all() == "" {
		t.Fatal("expected retry log lines")
	}
}

func TestParseResponseErrors(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`nope`:                           "invalid_response_json:",
		`null`:                           "invalid_response_top_level",
		`{}`:                             "no_choices_in_response",
		`{"choices":[]}`:                 "no_choices_in_response",
		`{"choices":[1]}`:                "invalid_choice",
		`{"choices":[{}]}`:               "invalid_message",
		`{"choices":[{"message":null}]}`: "invalid_message",
		`{"choices":[{"message":{}}]}`:   "no_tool_calls_and_no_string_content",
		`{"choices":[{"message":{"content":1}}]}`: "invalid_message",
		`{"choices":[{"message":{"tool_calls":[{"type":"function","function":{"name":"x","arguments":"{}"}}]}}]}`: "invalid_tool_call_id:0",
		`{"choices":[{"message":{"tool_calls":[{"id":"a","function":{"arguments":"{}"}}]}}]}`:                     "invalid_tool_call_function:0",
	}
	for body, want := range cases {
		_, err := ParseResponse([]byte(body))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: err = %v, want %s", body, err, want)
		}
	}
	m, err := ParseResponse([]byte(`{"choices":[{"message":{"tool_calls":[{"id":"c1","type":"function","function":{"name":"cas_get","arguments":"{\"hash\":\"h\"}"}}]}}]}`))
	if err != nil || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Arguments != `{"hash":"h"}` {
		t.Fatalf("m %+v err %v", m, err)
	}
}

func TestCasGetTool(t *testing.T) {
	t.Parallel()
	store := cas.Open(t.TempDir())
	h, err := store.Put("model says hello")
	if err != nil {
		t.Fatal(err)
	}
	blob, err := store.Get(h)
	if err != nil {
		t.Fatal(err)
	}
	tool := CasGetTool(store)
	if tool.Name != "cas_get" {
		t.Fatal(tool.Name)
	}
	missing := strings.Repeat("0", len(h))
	cases := map[string]string{
		fmt.Sprintf(`{"hash":%q}`, h):       string(blob),
		fmt.Sprintf(`{"hash":%q}`, missing): "null",
		`{"hash":"zz"}`:                     "null",
		`{"hash":1}`:                        `cas_get requires {"hash": "<cas-hash>"}.`,
		`{}`:                                `cas_get requires {"hash": "<cas-hash>"}.`,
		`[1]`:                               `cas_get requires {"hash": "<cas-hash>"}.`,
		`{nope`:                             `cas_get arguments were not valid JSON.`,
	}
	for args, want := range cases {
		got, err := tool.Handler(context.Background(), args)
		if err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %q", args, got, err, want)
		}
	}

	// End to end through React.
	f := newFake(t,
		callReply([3]string{"c1", "cas_get", fmt.Sprintf(`{"hash":%q}`, h)}),
		contentReply(`{"decision":"continue"}`),
	)
	req := baseRequest()
	req.Tools = []Tool{tool}
	if _, err := React(context.Background(), New(f.model(), fastOpts()), req); err != nil {
		t.Fatal(err)
	}
	msgs := f.requests()[1].Body.Messages
	if m := msgs[len(msgs)-1]; m.Role != "tool" || m.Text() != string(blob) {
		t.Fatalf("cas_get result %+v", m)
	}
}

func FuzzParseResponse(f *testing.F) {
	seeds := []string{
		`{"choices":[{"message":{"content":"{\"seen\":\"direct\"}"}}]}`,
		`{"choices":[{"message":{"tool_calls":[{"id":"c1","type":"function","function":{"name":"cas_get","arguments":"{\"hash\":\"x\"}"}}]}}]}`,
		`{"choices":[{"message":{"tool_calls":[{"function":{"name":"x"}}]}}]}`,
		`{"choices":[]}`, `[]`, `null`, `{"choices":[{"message":{"content":null,"tool_calls":null}}]}`, ``,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := ParseResponse(body)
		if err != nil {
			return
		}
		if len(m.ToolCalls) == 0 && m.Content == nil {
			t.Fatalf("accepted message with neither tool calls nor content: %q", body)
		}
		for _, tc := range m.ToolCalls {
			if tc.ID == "" || tc.Function.Name == "" || tc.Type != "function" {
				t.Fatalf("accepted invalid tool call %+v from %q", tc, body)
			}
		}
	})
}

func TestHandlerPanicAndCancel(t *testing.T) {
	t.Parallel()
	f := newFake(t,
		callReply([3]string{"c1", "boom", `{}`}),
		contentReply(`{"decision":"stop"}`),
	)
	req := baseRequest()
	req.Tools = []Tool{{Name: "boom", Handler: func(context.Context, string) (string, error) { panic("kaput") }}}
	if _, err := React(context.Background(), New(f.model(), fastOpts()), req); err != nil {
		t.Fatal(err)
	}
	msgs := f.requests()[1].Body.Messages
	if m := msgs[len(msgs)-1]; m.Text() != "Tool execution failed: panic: kaput" {
		t.Fatalf("got %+v", m)
	}

	// A handler that observes cancellation ends the run with ctx's error.
	f2 := newFake(t, callReply([3]string{"c1", "slow", `{}`}), contentReply(`{"decision":"stop"}`))
	ctx, cancel := context.WithCancel(context.Background())
	req.Tools = []Tool{{Name: "slow", Handler: func(ctx context.Context, _ string) (string, error) {
		cancel()
		<-ctx.Done()
		return "", ctx.Err()
	}}}
	if _, err := React(ctx, New(f2.model(), fastOpts()), req); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if n := len(f2.requests()); n != 1 {
		t.Fatalf("requests after cancel = %d", n)
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := map[string]time.Duration{
		"":     0,
		"0":    0,
		"-3":   0,
		"2":    2 * time.Second,
		"1.5":  1500 * time.Millisecond,
		"soon": 0,
		now.Add(3 * time.Second).Format(http.TimeFormat):  3 * time.Second,
		now.Add(-3 * time.Second).Format(http.TimeFormat): 0,
	}
	for in, want := range cases {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("%q: got %v want %v", in, got, want)
		}
	}
}

func TestRetryAfterCapped(t *testing.T) {
	t.Parallel()
	f := newFake(t, step{status: 429, header: map[string]string{"Retry-After": "3600"}}, contentReply("ok"))
	opts := fastOpts()
	opts.MaxRetryAfter = 10 * time.Millisecond
	// An uncapped wait would be an hour; this context gives up long before
	// that, so the call only succeeds if the cap applied.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := New(f.model(), opts).Chat(ctx, ChatRequest{ToolChoice: ForceTool("x")}); err != nil {
		t.Fatalf("Retry-After not capped: %v", err)
	}
	if tc := string(f.requests()[0].Body.ToolChoice); tc != `{"function":{"name":"x"},"type":"function"}` {
		t.Fatalf("tool_choice %s", tc)
	}
}

func TestExtract(t *testing.T) {
	t.Parallel()
	store := cas.Open(t.TempDir())
	h, err := store.PutNode(node.NewContent("model says hello", nil))
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(t, contentReply(`{"confidence":0.9}`))
	schema := json.RawMessage(`{"type":"object","properties":{"confidence":{"type":"number"}},"required":["confidence"]}`)
	res, err := Extract(context.Background(), New(f.model(), fastOpts()), store, schema, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Meta) != `{"confidence":0.9}` || res.ContentPayload != "model says hello" || res.Refs == nil || len(res.Refs) != 0 {
		t.Fatalf("res %+v", res)
	}
	r := f.requests()[0].Body
	if r.Messages[0].Text() != ExtractSystemPrompt("extract") ||
		r.Messages[1].Text() != "model says hello\n\nExtract structured metadata according to the schema." {
		t.Fatalf("messages %+v", r.Messages)
	}
	if len(r.Tools) != 2 || r.Tools[0].Function.Name != "cas_get" || r.Tools[1].Function.Name != "extract" {
		t.Fatalf("tools %+v", r.Tools)
	}

	missing := strings.Repeat("0", len(h))
	if _, err := Extract(context.Background(), New(f.model(), fastOpts()), store, schema, missing, nil); err == nil ||
		err.Error() != "extract: missing CAS content node for hash "+missing {
		t.Fatalf("err = %v", err)
	}
	f2 := newFake(t, contentReply("x"))
	c := New(f2.model(), Options{MaxAttempts: 1})
	if _, err := Extract(context.Background(), c, store, schema, h, nil); err == nil || !strings.HasPrefix(err.Error(), "extract failed: ") {
		t.Fatalf("err = %v", err)
	}
}

func TestRequestLogGetsRetryLines(t *testing.T) {
	t.Parallel()
	f := newFake(t, step{status: 500, body: "oops " + testKey}, contentReply(`{"decision":"stop"}`))
	sink := &logSink{}
	req := baseRequest()
	req.Log = sink.log
	if _, err := React(context.Background(), New(f.model(), fastOpts()), req); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sink.all(), "attempt 1/3 failed (http_error:500:oops [REDACTED])") || strings.Contains(sink.all(), testKey) {
		t.Fatalf("log:\n%s", sink.all())
	}
}
