package llm

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

func chat(t *testing.T, f *fakeServer, opts Options) (Message, error) {
	t.Helper()
	return New(f.model(), opts).Chat(context.Background(), ChatRequest{Messages: []Message{UserMessage("hi")}})
}

func TestStreamAssemblesContentAndToolCalls(t *testing.T) {
	t.Parallel()
	f := newFake(t, step{events: []string{
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
		textChunk("Let me "),
		textChunk("look."),
		callChunk(0, "c1", "lookup", `{"q":`),
		callChunk(1, "c2", "cas_get", `{"hash"`),
		callChunk(0, "", "", `"a b"}`),
		callChunk(1, "", "", `:"X"}`),
		finishChunk("tool_calls"),
		"[DONE]",
	}})
	sink := &logSink{}
	opts := fastOpts()
	opts.Log = sink.log
	msg, err := chat(t, f, opts)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Text() != "Let me look." || len(msg.ToolCalls) != 2 {
		t.Fatalf("msg %+v", msg)
	}
	want := []ToolCall{
		{ID: "c1", Type: "function", Function: FunctionCall{Name: "lookup", Arguments: `{"q":"a b"}`}},
		{ID: "c2", Type: "function", Function: FunctionCall{Name: "cas_get", Arguments: `{"hash":"X"}`}},
	}
	for i := range want {
		if msg.ToolCalls[i] != want[i] {
			t.Fatalf("call %d = %+v, want %+v", i, msg.ToolCalls[i], want[i])
		}
	}
	if !strings.Contains(f.requests()[0].Raw, `"stream":true`) {
		t.Fatalf("request did not ask for a stream: %s", f.requests()[0].Raw)
	}
	log := sink.all()
	for _, line := range []string{"model: Let me look.", `model: tool lookup {"q":"a b"}`, `model: tool cas_get {"hash":"X"}`} {
		if !strings.Contains(log, line) {
			t.Fatalf("log lacks %q:\n%s", line, log)
		}
	}
}

func TestReasoningIsLoggedNotReturned(t *testing.T) {
	t.Parallel()
	f := newFake(t, step{events: []string{
		`{"choices":[{"index":0,"delta":{"reasoning":"First I read "}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning_content":"the file."}}]}`,
		textChunk("Answer."),
		finishChunk("stop"),
	}})
	sink := &logSink{}
	opts := fastOpts()
	opts.Log = sink.log
	msg, err := chat(t, f, opts)
	if err != nil || msg.Text() != "Answer." {
		t.Fatalf("msg %+v err %v", msg, err)
	}
	if got := sink.all(); got != "model: thinking: First I read the file.\nmodel: Answer." {
		t.Fatalf("log:\n%s", got)
	}
}

func TestNoStreamOptionAndJSONFallback(t *testing.T) {
	t.Parallel()
	f := newFake(t, contentReply("plain"))
	opts := fastOpts()
	opts.NoStream = true
	msg, err := chat(t, f, opts)
	if err != nil || msg.Text() != "plain" {
		t.Fatalf("msg %+v err %v", msg, err)
	}
	if strings.Contains(f.requests()[0].Raw, `"stream"`) {
		t.Fatalf("NoStream still asked for a stream: %s", f.requests()[0].Raw)
	}
}

// A slow stream shows in the log while it is still running: the server
// holds the rest of the reply until the first line has been logged.
func TestSlowStreamIsLoggedBeforeItEnds(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	s := streamReply("Thinking about ", "the task\nstill ", "going", "\ndone")
	s.hold, s.holdAfter = release, 2
	f := newFake(t, s)
	sink := &logSink{}
	var once sync.Once
	opts := fastOpts()
	opts.Log = func(tag, content string) {
		sink.log(tag, content)
		if content == "Thinking about the task" {
			once.Do(func() { close(release) })
		}
	}
	msg, err := chat(t, f, opts)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Text() != "Thinking about the task\nstill going\ndone" {
		t.Fatalf("text %q", msg.Text())
	}
	if got := sink.all(); got != "model: Thinking about the task\nmodel: still going\nmodel: done" {
		t.Fatalf("log:\n%s", got)
	}
}

func TestStalledStreamHitsIdleWatchdogAndIsRetried(t *testing.T) {
	// Serial: a 50 ms idle timeout that load from parallel tests can exceed.
	stalled := step{events: []string{textChunk("partial")}, stall: true}
	f := newFake(t, stalled, streamReply("second try"))
	sink := &logSink{}
	opts := fastOpts()
	opts.IdleTimeout = 50 * time.Millisecond
	opts.Log = sink.log
	msg, err := chat(t, f, opts)
	if err != nil || msg.Text() != "second try" {
		t.Fatalf("msg %+v err %v", msg, err)
	}
	if !strings.Contains(sink.all(), "attempt 1/3 failed (stream_idle_timeout:") {
		t.Fatalf("log:\n%s", sink.all())
	}

	// Every attempt stalling exhausts the retries with the watchdog's error.
	g := newFake(t, stalled, stalled)
	opts.MaxAttempts = 2
	_, err = chat(t, g, opts)
	if err == nil || !strings.HasPrefix(err.Error(), "stream_idle_timeout:") {
		t.Fatalf("err = %v", err)
	}
}

// The header timeout does not cut off a stream that keeps producing data.
func TestLongStreamOutlivesHeaderTimeout(t *testing.T) {
	t.Parallel()
	// The header timeout is long enough that the first chunk arrives within
	// it even on a loaded machine; the rest is held until well after it.
	const headerTimeout = 2 * time.Second
	release := make(chan struct{})
	s := streamReply("slow ", "but steady")
	s.hold, s.holdAfter = release, 1
	f := newFake(t, s)
	opts := fastOpts()
	opts.Timeout = headerTimeout
	opts.MaxAttempts = 1
	go func() {
		// Deliberately outlast the header timeout before the rest arrives.
		time.Sleep(headerTimeout + 500*time.Millisecond)
		close(release)
	}()
	msg, err := chat(t, f, opts)
	if err != nil || msg.Text() != "slow but steady" {
		t.Fatalf("msg %+v err %v", msg, err)
	}
}

func TestCancelMidStream(t *testing.T) {
	t.Parallel()
	f := newFake(t, step{events: []string{textChunk("working\n")}, stall: true}, streamReply("unused"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := fastOpts()
	opts.Log = func(tag, content string) {
		if content == "working" {
			cancel()
		}
	}
	_, err := React(ctx, New(f.model(), opts), baseRequest())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if n := len(f.requests()); n != 1 {
		t.Fatalf("requests = %d; a cancelled stream must not be retried", n)
	}
}

func TestStreamErrorsRetried(t *testing.T) {
	t.Parallel()
	f := newFake(t,
		step{events: []string{`{"error":{"message":"overloaded ` + testKey + `"}}`}},
		step{events: []string{textChunk("cut short")}},
		streamReply("fine"),
	)
	sink := &logSink{}
	opts := fastOpts()
	opts.Log = sink.log
	msg, err := chat(t, f, opts)
	if err != nil || msg.Text() != "fine" {
		t.Fatalf("msg %+v err %v", msg, err)
	}
	log := sink.all()
	if !strings.Contains(log, "attempt 1/3 failed (stream_error:") || !strings.Contains(log, "attempt 2/3 failed (stream_incomplete:") {
		t.Fatalf("log:\n%s", log)
	}
	if strings.Contains(log, testKey) {
		t.Fatalf("key leaked:\n%s", log)
	}
}

func TestStreamedReactRun(t *testing.T) {
	t.Parallel()
	f := newFake(t,
		step{events: []string{textChunk("not json"), finishChunk("stop")}},
		step{events: []string{callChunk(0, "c1", "supervisor_decision", `{"decision"`), callChunk(0, "", "", `:"kill"}`), "[DONE]"}},
	)
	got, err := React(context.Background(), New(f.model(), fastOpts()), baseRequest())
	if err != nil || string(got) != `{"decision":"kill"}` {
		t.Fatalf("got %s, %v", got, err)
	}
	msgs := f.requests()[1].Body.Messages
	if len(msgs) != 4 || msgs[2].Text() != "not json" || !strings.Contains(msgs[3].Text(), "was not valid JSON") {
		t.Fatalf("second request messages %+v", msgs)
	}
}

func TestReadStreamShapes(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		in         string
		text, args string
	}{
		"crlf, comments, event and id fields": {
			in:   ": keep-alive\r\nevent: message\r\nid: 1\r\ndata: " + textChunk("a") + "\r\n\r\n: OPENROUTER PROCESSING\r\n\r\ndata: " + textChunk("b") + "\r\n\r\ndata: [DONE]\r\n\r\n",
			text: "ab",
		},
		"multi-line data joined by newline": {
			in:   "data: {\"choices\":[{\"index\":0,\ndata: \"delta\":{\"content\":\"x\"}}]}\n\ndata: [DONE]\n",
			text: "x",
		},
		"finish reason without [DONE], no trailing blank line": {
			in:   "data: " + textChunk("y") + "\n\ndata: " + finishChunk("stop"),
			text: "y",
		},
		"tool call deltas without index": {
			in:   "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"c9\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\ndata: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\":1}\"}}]}}]}\n\ndata: [DONE]\n\n",
			args: `{"a":1}`,
		},
		"other choices ignored": {
			in:   "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"no\"}},{\"index\":0,\"delta\":{\"content\":\"yes\"}}]}\n\ndata: [DONE]\n\n",
			text: "yes",
		},
	}
	for name, c := range cases {
		var seen strings.Builder
		msg, _, err := readStream(strings.NewReader(c.in), func(s string) { seen.WriteString(s) }, nil)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if msg.Text() != c.text || seen.String() != c.text {
			t.Errorf("%s: text %q, streamed %q, want %q", name, msg.Text(), seen.String(), c.text)
		}
		if c.args != "" && (len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Arguments != c.args || msg.ToolCalls[0].ID != "c9") {
			t.Errorf("%s: calls %+v", name, msg.ToolCalls)
		}
	}
}

func TestReadStreamErrors(t *testing.T) {
	t.Parallel()
	var manyCalls strings.Builder
	for i := 0; i <= maxStreamToolCalls; i++ {
		manyCalls.WriteString("data: " + callChunk(i, "c", "f", "{}") + "\n\n")
	}
	cases := map[string]struct {
		in, want  string
		retryable bool
	}{
		"empty body":           {"", "stream_incomplete:", true},
		"html page":            {"<html>oops</html>\n", "invalid_response_stream:not a server-sent event stream", false},
		"chunk not json":       {"data: {nope\n\n", "invalid_stream_chunk:", false},
		"error event":          {`data: {"error":{"message":"boom"}}` + "\n\n", `stream_error:{"message":"boom"}`, true},
		"cut short":            {"data: " + textChunk("x") + "\n\n", "stream_incomplete:", true},
		"no content, no calls": {"data: " + finishChunk("stop") + "\n\n", "no_tool_calls_and_no_string_content", false},
		"call without id":      {"data: " + callChunk(0, "", "", "{}") + "\n\ndata: [DONE]\n\n", "invalid_tool_call_id:0", false},
		"call without name":    {"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\"}]}}]}\n\ndata: [DONE]\n\n", "invalid_tool_call_function:0", false},
		"index out of range":   {"data: " + callChunk(-1, "c", "f", "{}") + "\n\n", "out of range", false},
		"too many tool calls":  {manyCalls.String(), "out of range", false},
		"line too long":        {"data: " + strings.Repeat("x", maxStreamLine+1), "longer than", false},
	}
	for name, c := range cases {
		_, _, err := readStream(strings.NewReader(c.in), nil, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", name, err, c.want)
			continue
		}
		var pe *parseError
		if retryable := !errors.As(err, &pe); retryable != c.retryable {
			t.Errorf("%s: retryable = %v, want %v (%v)", name, retryable, c.retryable, err)
		}
	}
}

func TestTextLogLines(t *testing.T) {
	t.Parallel()
	var lines []string
	tl := newTextLog(func(s string) { lines = append(lines, s) })
	tl.write("one\ntw")
	tl.write("o\r\n\n   \nthr")
	if strings.Join(lines, "|") != "one|two" {
		t.Fatalf("lines %q", lines)
	}
	long := strings.Repeat("é", textLogChunk) // two bytes each
	tl.write(long)
	tl.flush()
	got := strings.Join(lines[2:], "")
	if got != "thr"+long {
		t.Fatalf("long text mangled")
	}
	for _, l := range lines {
		if len(l) > textLogChunk || !utf8.ValidString(l) {
			t.Fatalf("bad line %q", l)
		}
	}
}

func FuzzReadStream(f *testing.F) {
	f.Add("data: " + textChunk("hi") + "\n\ndata: [DONE]\n\n")
	f.Add("data: " + callChunk(0, "c1", "f", `{"a":`) + "\n\ndata: " + callChunk(0, "", "", "1}") + "\n\ndata: " + finishChunk("tool_calls") + "\n\n")
	f.Add(": ping\r\n\r\ndata: {\"error\":{}}\r\n\r\n")
	f.Add("event: x\ndata\ndata:\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		msg, _, err := readStream(strings.NewReader(in), func(string) {}, func(string) {})
		if err != nil {
			return
		}
		if msg.Role != "assistant" || (msg.Content == nil && len(msg.ToolCalls) == 0) {
			t.Fatalf("accepted an empty message: %+v", msg)
		}
		for _, c := range msg.ToolCalls {
			if c.ID == "" || c.Function.Name == "" || c.Type != "function" {
				t.Fatalf("accepted an incomplete call: %+v", c)
			}
		}
	})
}

func TestResultGist(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                       `""`,
		"one line":               `"one line"`,
		"1|a\n2|b\n3|c\n":        `"1|a … (2 more lines)"`,
		strings.Repeat("x", 300): `"` + strings.Repeat("x", 160) + `…"`,
	} {
		if got := resultGist(in); got != want {
			t.Errorf("resultGist(%q) = %s, want %s", in, got, want)
		}
	}
}
