// Package llm is an OpenAI-compatible chat-completions client and the ReAct
// loop ("reactor") built on it: tool calls, a structured output tool whose
// parameters are the role's JSON Schema, and validation of the result
// (the original's llmAdapter and reactAdapter).
package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/uncaged/workflow/engine/registry"
)

// Defaults applied by New to zero Options fields.
const (
	DefaultMaxAttempts = 3
	DefaultTimeout     = 120 * time.Second
	DefaultBaseBackoff = 500 * time.Millisecond
	DefaultMaxBackoff  = 30 * time.Second
	// DefaultMaxRetryAfter caps how long a server's Retry-After is honoured.
	DefaultMaxRetryAfter = 60 * time.Second
	// DefaultIdleTimeout is how long a response may go without a byte
	// before the attempt is abandoned and retried.
	DefaultIdleTimeout = 60 * time.Second
	// bodyExcerptLimit bounds the response body quoted in errors.
	bodyExcerptLimit = 512
	// maxResponseBytes bounds how much of a response body is read.
	maxResponseBytes = 16 << 20
)

// Options tunes a Client. Zero values select the defaults above.
type Options struct {
	// HTTPClient sends the requests; nil uses a fresh http.Client.
	HTTPClient *http.Client
	// MaxAttempts is the total number of attempts per Chat call (>= 1).
	MaxAttempts int
	// Timeout bounds how long each attempt waits for the response headers.
	// Once the response has started only IdleTimeout applies, so a long
	// generation that keeps streaming is never cut off by a wall clock.
	Timeout time.Duration
	// IdleTimeout abandons an attempt whose response body produces no bytes
	// for this long (a stalled stream); the attempt is retried like a 5xx.
	IdleTimeout time.Duration
	// NoStream asks for a plain JSON response instead of a server-sent
	// event stream, for endpoints that reject "stream": true.
	NoStream bool
	// BaseBackoff is the first retry delay; it doubles per attempt, with
	// full jitter, up to MaxBackoff.
	BaseBackoff time.Duration
	// MaxBackoff caps the exponential backoff delay.
	MaxBackoff time.Duration
	// MaxRetryAfter caps a Retry-After delay requested by the server.
	MaxRetryAfter time.Duration
	// Log, if set, receives progress lines (tag, content): retries, and the
	// model's text and tool calls as they stream in (tag LogTagModel). The
	// API key is never passed to it.
	Log func(tag, content string)
	// OnUsage, if set, is told the tokens of every call Chat completes
	// (once per call, after its retries); a server that reports no usage
	// yields a Usage whose Reported is false.
	OnUsage func(Usage)
}

// Usage is what one model call consumed, from the response's "usage"
// (the last chunk's, with stream_options.include_usage, when streamed).
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
	// Reported is false when the server sent no usage: the counts are then
	// unknown, not zero.
	Reported bool
}

// Client talks to one OpenAI-compatible model endpoint.
type Client struct {
	model registry.Model
	url   string
	opts  Options
	// noStreamOptions is set once the server refused a request carrying
	// stream_options (older OpenAI-compatible servers reject unknown
	// fields); shared by the copies React makes, so it is learnt once.
	noStreamOptions *atomic.Bool
}

// New returns a Client for model. The URL is model.BaseURL with trailing
// slashes stripped plus "/chat/completions".
func New(model registry.Model, opts Options) *Client {
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	if opts.MaxAttempts < 1 {
		opts.MaxAttempts = DefaultMaxAttempts
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.BaseBackoff <= 0 {
		opts.BaseBackoff = DefaultBaseBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.MaxRetryAfter <= 0 {
		opts.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	return &Client{
		model: model,
		url:   strings.TrimRight(model.BaseURL, "/") + "/chat/completions",
		opts:  opts,

		noStreamOptions: new(atomic.Bool),
	}
}

// Model returns the model name sent in requests.
func (c *Client) Model() string { return c.model.Model }

// Message is one chat message. Content is nil only for an assistant message
// that carries tool calls and no text (it is then sent as JSON null).
type Message struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// Text returns the message content, or "" when it is null.
func (m Message) Text() string {
	if m.Content == nil {
		return ""
	}
	return *m.Content
}

// SystemMessage returns a system message with content s.
func SystemMessage(s string) Message { return Message{Role: "system", Content: &s} }

// UserMessage returns a user message with content s.
func UserMessage(s string) Message { return Message{Role: "user", Content: &s} }

// ToolMessage returns the result s of the tool call id.
func ToolMessage(id, s string) Message { return Message{Role: "tool", Content: &s, ToolCallID: id} }

// ToolCall is a function call requested by the model.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its JSON-encoded arguments.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolDef declares a function tool to the model.
type ToolDef struct {
	Type     string      `json:"type"`
	Function FunctionDef `json:"function"`
}

// FunctionDef is the function part of a ToolDef; Parameters is a JSON Schema.
type FunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// ChatRequest is one chat-completions call. ToolChoice is sent as given
// ("auto", "none", "required" or {"type":"function","function":{"name":…}});
// nil omits it.
type ChatRequest struct {
	Messages   []Message
	Tools      []ToolDef
	ToolChoice any
}

// ForceTool returns the tool_choice value that forces a call of the named
// function tool (the single-shot extractor shape of spec §8.1).
func ForceTool(name string) any {
	return map[string]any{"type": "function", "function": map[string]string{"name": name}}
}

type wireRequest struct {
	Model      string    `json:"model"`
	Messages   []Message `json:"messages"`
	Tools      []ToolDef `json:"tools,omitempty"`
	ToolChoice any       `json:"tool_choice,omitempty"`
	Stream     bool      `json:"stream,omitempty"`
	// StreamOptions asks a streaming server for a last chunk with the
	// call's usage.
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// wireUsage is the response's "usage" object.
type wireUsage struct {
	PromptTokens     *int64 `json:"prompt_tokens"`
	CompletionTokens *int64 `json:"completion_tokens"`
}

// usage converts a usage object; nil or one without counts is unreported.
func (w *wireUsage) usage() Usage {
	if w == nil || w.PromptTokens == nil && w.CompletionTokens == nil {
		return Usage{}
	}
	u := Usage{Reported: true}
	if w.PromptTokens != nil && *w.PromptTokens > 0 {
		u.PromptTokens = *w.PromptTokens
	}
	if w.CompletionTokens != nil && *w.CompletionTokens > 0 {
		u.CompletionTokens = *w.CompletionTokens
	}
	return u
}

// ResponseUsage reads the "usage" of a chat-completions response body;
// Reported is false when it has none.
func ResponseUsage(body []byte) Usage {
	var top struct {
		Usage *wireUsage `json:"usage"`
	}
	if json.Unmarshal(body, &top) != nil {
		return Usage{}
	}
	return top.Usage.usage()
}

// HTTPError is a non-2xx response. Body is a short, key-redacted excerpt.
type HTTPError struct {
	Status int
	Body   string
}

// Error renders "http_error:<status>:<body excerpt>".
func (e *HTTPError) Error() string { return fmt.Sprintf("http_error:%d:%s", e.Status, e.Body) }

// Retryable reports whether the status is 429 or 5xx.
func (e *HTTPError) Retryable() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// Chat posts req and returns choices[0].message. The response is streamed
// (server-sent events, logged as it arrives) unless Options.NoStream is set
// or the server answers with plain JSON. 429, 5xx, network errors and
// stalled streams are retried with exponential backoff and jitter
// (honouring Retry-After) up to MaxAttempts; cancelling ctx aborts at once
// with ctx's error.
func (c *Client) Chat(ctx context.Context, req ChatRequest) (Message, error) {
	if strings.TrimSpace(c.model.BaseURL) == "" {
		return Message{}, errors.New("llm: model has no baseUrl")
	}
	wire := wireRequest{Model: c.model.Model, Messages: req.Messages, Tools: req.Tools, ToolChoice: req.ToolChoice, Stream: !c.opts.NoStream}
	withOptions := wire.Stream && !c.noStreamOptions.Load()
	if withOptions {
		wire.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	body, err := json.Marshal(wire)
	if err != nil {
		return Message{}, fmt.Errorf("llm: encode request: %w", err)
	}
	var lastErr error
	for attempt := 1; attempt <= c.opts.MaxAttempts; attempt++ {
		if err := ctx.Err(); err != nil {
			return Message{}, err
		}
		msg, retryAfter, used, err := c.once(ctx, body)
		if withOptions && refused(err, "stream_options") {
			// A server that does not know stream_options: ask again
			// without it, at once, and keep to that if it works. Usage is
			// then whatever the server sends unasked.
			withOptions = false
			wire.StreamOptions = nil
			plain, merr := json.Marshal(wire)
			if merr != nil {
				return Message{}, fmt.Errorf("llm: encode request: %w", merr)
			}
			if msg, retryAfter, used, err = c.once(ctx, plain); !refused(err, "") {
				c.noStreamOptions.Store(true)
				c.log("llm", "the server refused stream_options; streaming without it (usage only if the server sends it unasked)")
				body = plain
			}
		}
		if err == nil {
			if c.opts.OnUsage != nil {
				c.opts.OnUsage(used)
			}
			return msg, nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return Message{}, ctxErr
		}
		err = c.redactErr(err)
		lastErr = err
		var he *HTTPError
		retryable := !errors.As(err, &he) || he.Retryable()
		var pe *parseError
		if errors.As(err, &pe) {
			retryable = false
		}
		if !retryable || attempt == c.opts.MaxAttempts {
			break
		}
		delay := c.backoff(attempt)
		if retryAfter > 0 {
			delay = min(retryAfter, c.opts.MaxRetryAfter)
		}
		c.log("llm", fmt.Sprintf("attempt %d/%d failed (%s); retrying in %s", attempt, c.opts.MaxAttempts, excerpt(err.Error(), 200), delay))
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return Message{}, ctx.Err()
		case <-t.C:
		}
	}
	return Message{}, lastErr
}

// refused reports whether err is the server refusing the request as such
// (400 or 422), naming field in its answer when field is not "" (as
// servers that do not know a field do).
func refused(err error, field string) bool {
	var he *HTTPError
	return errors.As(err, &he) && (he.Status == http.StatusBadRequest || he.Status == http.StatusUnprocessableEntity) &&
		strings.Contains(he.Body, field)
}

// Causes of an attempt's own cancellation, told apart from the caller's.
var (
	errNoHeaders = errors.New("no response headers in time")
	errIdle      = errors.New("response idle")
)

// once performs a single attempt. retryAfter is the server-requested delay.
func (c *Client) once(ctx context.Context, body []byte) (Message, time.Duration, Usage, error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	headerTimer := time.AfterFunc(c.opts.Timeout, func() { cancel(errNoHeaders) })
	hreq, err := http.NewRequestWithContext(actx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		headerTimer.Stop()
		return Message{}, 0, Usage{}, &parseError{fmt.Sprintf("llm: build request: %v", err)}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream, application/json")
	if c.model.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.model.APIKey)
	}
	resp, err := c.opts.HTTPClient.Do(hreq)
	headerTimer.Stop()
	if err != nil {
		return Message{}, 0, Usage{}, c.attemptErr(actx, err)
	}
	defer resp.Body.Close()
	watched := newIdleReader(resp.Body, c.opts.IdleTimeout, func() { cancel(errIdle) })
	defer watched.stop()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		raw, _ := io.ReadAll(io.LimitReader(watched, bodyExcerptLimit*8))
		return Message{}, parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()), Usage{},
			&HTTPError{Status: resp.StatusCode, Body: excerpt(c.redact(string(raw)), bodyExcerptLimit)}
	}
	br := bufio.NewReader(&limitedReader{r: watched, n: maxResponseBytes})
	thinking := newTextLog(func(s string) { c.log(LogTagModel, "thinking: "+s) })
	text := newTextLog(func(s string) { c.log(LogTagModel, s) })
	// The answer follows the reasoning; flushing the reasoning first keeps
	// the log in the order the model produced them.
	onText := func(s string) { thinking.flush(); text.write(s) }
	var msg Message
	var used Usage
	if isJSONBody(br) {
		raw, rerr := io.ReadAll(br)
		if rerr != nil {
			return Message{}, 0, Usage{}, c.bodyErr(actx, rerr)
		}
		if msg, err = ParseResponse(raw); err != nil {
			return Message{}, 0, Usage{}, &parseError{err.Error()}
		}
		used = ResponseUsage(raw)
		text.write(msg.Text())
	} else if msg, used, err = readStream(br, onText, thinking.write); err != nil {
		thinking.flush()
		text.flush()
		return Message{}, 0, Usage{}, c.bodyErr(actx, err)
	}
	thinking.flush()
	text.flush()
	for _, tc := range msg.ToolCalls {
		c.log(LogTagModel, fmt.Sprintf("tool %s %s", tc.Function.Name, excerpt(tc.Function.Arguments, toolArgsLogLimit)))
	}
	return msg, 0, used, nil
}

// bodyErr classifies a failure while reading the response body: the
// attempt's own timeouts and network errors as attemptErr does, malformed
// or failed streams as they are.
func (c *Client) bodyErr(actx context.Context, err error) error {
	var pe *parseError
	var se *streamError
	if actx.Err() == nil && (errors.As(err, &pe) || errors.As(err, &se)) {
		return err
	}
	return c.attemptErr(actx, err)
}

// attemptErr names why an attempt's I/O failed: the attempt's own header
// or idle timeout, or the network. The caller's cancellation is checked by
// Chat before this error is looked at.
func (c *Client) attemptErr(actx context.Context, err error) error {
	switch context.Cause(actx) {
	case errNoHeaders:
		return fmt.Errorf("network_error:no response within %s", c.opts.Timeout)
	case errIdle:
		return fmt.Errorf("stream_idle_timeout:no data received for %s", c.opts.IdleTimeout)
	}
	return fmt.Errorf("network_error:%v", err)
}

// parseError marks non-retryable response decoding failures.
type parseError struct{ msg string }

func (e *parseError) Error() string { return e.msg }

func (c *Client) backoff(attempt int) time.Duration {
	d := c.opts.BaseBackoff << (attempt - 1)
	if d <= 0 || d > c.opts.MaxBackoff {
		d = c.opts.MaxBackoff
	}
	// Full jitter in [d/2, d].
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		if s > 1e6 {
			s = 1e6
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

func (c *Client) log(tag, content string) {
	if c.opts.Log != nil {
		c.opts.Log(tag, c.redact(content))
	}
}

// redact removes the API key from s.
func (c *Client) redact(s string) string {
	if k := c.model.APIKey; k != "" {
		s = strings.ReplaceAll(s, k, "[REDACTED]")
	}
	return s
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func (c *Client) redactErr(err error) error {
	if c.model.APIKey == "" || !strings.Contains(err.Error(), c.model.APIKey) {
		return err
	}
	return &redactedError{msg: c.redact(err.Error()), err: err}
}

func excerpt(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary.
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// ParseResponse decodes a chat-completions response body and returns
// choices[0].message. A message must carry tool calls (each with id, type
// "function", function name and arguments) or string content.
func ParseResponse(body []byte) (Message, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return Message{}, fmt.Errorf("invalid_response_json:%s", excerpt(err.Error(), 200))
	}
	if top == nil {
		return Message{}, errors.New("invalid_response_top_level")
	}
	var choices []json.RawMessage
	if err := json.Unmarshal(top["choices"], &choices); err != nil || len(choices) == 0 {
		return Message{}, errors.New("no_choices_in_response")
	}
	var choice map[string]json.RawMessage
	if err := json.Unmarshal(choices[0], &choice); err != nil || choice == nil {
		return Message{}, errors.New("invalid_choice")
	}
	var m struct {
		Role      string            `json:"role"`
		Content   *string           `json:"content"`
		ToolCalls []json.RawMessage `json:"tool_calls"`
	}
	if raw, ok := choice["message"]; !ok || json.Unmarshal(raw, &m) != nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return Message{}, errors.New("invalid_message")
	}
	out := Message{Role: "assistant", Content: m.Content}
	for i, rc := range m.ToolCalls {
		var tc struct {
			ID       *string `json:"id"`
			Type     *string `json:"type"`
			Function *struct {
				Name      *string `json:"name"`
				Arguments *string `json:"arguments"`
			} `json:"function"`
		}
		if err := json.Unmarshal(rc, &tc); err != nil {
			return Message{}, fmt.Errorf("invalid_tool_call:%d", i)
		}
		switch {
		case tc.ID == nil || *tc.ID == "":
			return Message{}, fmt.Errorf("invalid_tool_call_id:%d", i)
		case tc.Type != nil && *tc.Type != "function":
			return Message{}, fmt.Errorf("invalid_tool_call_type:%d", i)
		case tc.Function == nil || tc.Function.Name == nil || *tc.Function.Name == "":
			return Message{}, fmt.Errorf("invalid_tool_call_function:%d", i)
		}
		args := ""
		if tc.Function.Arguments != nil {
			args = *tc.Function.Arguments
		}
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: *tc.ID, Type: "function", Function: FunctionCall{Name: *tc.Function.Name, Arguments: args}})
	}
	if len(out.ToolCalls) == 0 && out.Content == nil {
		return Message{}, errors.New("no_tool_calls_and_no_string_content")
	}
	return out, nil
}
