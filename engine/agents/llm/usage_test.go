package llm

import (
	"context"
	"strings"
	"testing"
)

// usageChunk is the last chunk a server sends when asked for
// stream_options.include_usage: no choices, only usage.
func usageChunk(prompt, completion int) string {
	return `{"choices":[],"usage":{"prompt_tokens":` + itoa(prompt) + `,"completion_tokens":` + itoa(completion) + `,"total_tokens":` + itoa(prompt+completion) + `}}`
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		if n /= 10; n == 0 {
			return string(b[i:])
		}
	}
}

// chatUsage makes one Chat call on c and returns its message.
func chatUsage(t *testing.T, c *Client) Message {
	t.Helper()
	msg, err := c.Chat(context.Background(), ChatRequest{Messages: []Message{UserMessage("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func usageClient(f *fakeServer, opts Options, calls *[]Usage) *Client {
	opts.OnUsage = func(u Usage) { *calls = append(*calls, u) }
	return New(f.model(), opts)
}

func TestStreamedUsageIsAskedForAndRead(t *testing.T) {
	t.Parallel()
	reply := streamReply("hel", "lo")
	reply.events = append(reply.events[:len(reply.events)-1], usageChunk(12, 3), "[DONE]")
	f := newFake(t, reply)
	var calls []Usage
	c := usageClient(f, fastOpts(), &calls)
	if msg := chatUsage(t, c); msg.Text() != "hello" {
		t.Fatalf("text %q", msg.Text())
	}
	if len(calls) != 1 || calls[0] != (Usage{PromptTokens: 12, CompletionTokens: 3, Reported: true}) {
		t.Fatalf("usage = %+v", calls)
	}
	if raw := f.requests()[0].Raw; !strings.Contains(raw, `"stream_options":{"include_usage":true}`) {
		t.Errorf("request did not ask for usage: %s", raw)
	}
}

func TestPlainJSONUsageIsRead(t *testing.T) {
	t.Parallel()
	f := newFake(t, step{body: `{"choices":[{"message":{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":7,"completion_tokens":2}}`})
	var calls []Usage
	opts := fastOpts()
	opts.NoStream = true
	c := usageClient(f, opts, &calls)
	chatUsage(t, c)
	if len(calls) != 1 || calls[0] != (Usage{PromptTokens: 7, CompletionTokens: 2, Reported: true}) {
		t.Fatalf("usage = %+v", calls)
	}
	if raw := f.requests()[0].Raw; strings.Contains(raw, "stream_options") {
		t.Errorf("a request that does not stream carries stream_options: %s", raw)
	}
}

// A server that sends no usage still answers; the call is recorded as
// unreported rather than as zero tokens, and nothing fails.
func TestNoUsageIsUnreportedNotAnError(t *testing.T) {
	t.Parallel()
	f := newFake(t, streamReply("a"), contentReply("b"), step{body: `{"choices":[{"message":{"role":"assistant","content":"c"}}],"usage":null}`})
	var calls []Usage
	c := usageClient(f, fastOpts(), &calls)
	for range 3 {
		chatUsage(t, c)
	}
	for i, u := range calls {
		if u.Reported || u.PromptTokens != 0 {
			t.Errorf("call %d: usage %+v, want unreported", i, u)
		}
	}
	if len(calls) != 3 {
		t.Fatalf("%d usages for 3 calls", len(calls))
	}
}

// A server that refuses the unknown stream_options field is asked again
// without it, at once, and the client keeps to that afterwards, also in
// the copies React makes of it.
func TestServerRefusingStreamOptionsKeepsWorking(t *testing.T) {
	t.Parallel()
	refusal := step{status: 400, body: `{"error":{"message":"Unrecognized request argument supplied: stream_options"}}`}
	f := newFake(t, refusal, streamReply("one"), callReply([3]string{"c1", "extract", `{"v":1}`}))
	var calls []Usage
	c := usageClient(f, Options{MaxAttempts: 1}, &calls)
	if msg := chatUsage(t, c); msg.Text() != "one" {
		t.Fatalf("text %q", msg.Text())
	}
	if _, err := React(context.Background(), c, Request{User: "x", Output: Output{Schema: []byte(`{"type":"object"}`)}}); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 3 || !strings.Contains(reqs[0].Raw, "stream_options") || strings.Contains(reqs[1].Raw, "stream_options") || strings.Contains(reqs[2].Raw, "stream_options") {
		t.Fatalf("requests: %d, stream_options in each: %v", len(reqs), func() []bool {
			var out []bool
			for _, r := range reqs {
				out = append(out, strings.Contains(r.Raw, "stream_options"))
			}
			return out
		}())
	}
	if len(calls) != 2 || calls[0].Reported {
		t.Errorf("usage = %+v", calls)
	}
}

// A request the server refuses for another reason still fails at once, or
// after one try without stream_options when the refusal names it, and
// records no usage.
func TestRefusedRequestStillFails(t *testing.T) {
	t.Parallel()
	bad := step{status: 400, body: `{"error":"bad messages"}`}
	f := newFake(t, bad, contentReply("unused"))
	var calls []Usage
	c := usageClient(f, fastOpts(), &calls)
	if _, err := c.Chat(context.Background(), ChatRequest{Messages: []Message{UserMessage("hi")}}); err == nil || len(f.requests()) != 1 {
		t.Fatalf("err = %v after %d requests", err, len(f.requests()))
	}
	bad = step{status: 422, body: `{"error":"stream_options: extra fields not permitted"}`}
	f = newFake(t, bad, bad)
	c = usageClient(f, fastOpts(), &calls)
	_, err := c.Chat(context.Background(), ChatRequest{Messages: []Message{UserMessage("hi")}})
	if err == nil || !strings.Contains(err.Error(), "http_error:422") {
		t.Fatalf("err = %v", err)
	}
	if n := len(f.requests()); n != 2 || len(calls) != 0 {
		t.Errorf("%d requests, usage %+v", n, calls)
	}
	if c.noStreamOptions.Load() {
		t.Error("a request refused either way taught the client to drop stream_options")
	}
}

func TestResponseUsageRejectsJunk(t *testing.T) {
	t.Parallel()
	for _, in := range []string{``, `[]`, `{"usage":"x"}`, `{"usage":{}}`, `{"usage":{"prompt_tokens":"7"}}`} {
		if u := ResponseUsage([]byte(in)); u.Reported {
			t.Errorf("ResponseUsage(%q) = %+v", in, u)
		}
	}
	if u := ResponseUsage([]byte(`{"usage":{"prompt_tokens":-4,"completion_tokens":5}}`)); !u.Reported || u.PromptTokens != 0 || u.CompletionTokens != 5 {
		t.Errorf("negative counts: %+v", u)
	}
}
