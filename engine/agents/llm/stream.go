package llm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// LogTagModel tags the debug-log lines that show the model's own output:
// its text as it streams in, and one "tool <name> <args>" line per call.
const LogTagModel = "model"

const (
	// textLogChunk is the size at which streamed text without a newline is
	// flushed to the log anyway, so a long line still shows progress.
	textLogChunk = 256
	// toolArgsLogLimit bounds the arguments quoted in a tool-call log line.
	toolArgsLogLimit = 200
	// maxStreamLine bounds one server-sent-event line.
	maxStreamLine = 4 << 20
	// maxStreamToolCalls bounds the tool calls one streamed reply may make.
	maxStreamToolCalls = 256
)

// readStream assembles a chat-completions server-sent event stream into
// the message the non-streaming response would have carried. Content
// deltas are concatenated and passed to onText as they arrive; reasoning
// deltas (the "reasoning" or "reasoning_content" some providers stream
// before the answer) only go to onReasoning; tool-call deltas are joined
// by their index. The stream ends at "data: [DONE]" or at
// EOF after a finish_reason. Malformed chunks are parse errors (not
// retried); an error event or a stream cut short is an error the caller
// retries. The usage is the last one a chunk carried (the final chunk's
// when the request asked for stream_options.include_usage).
func readStream(r io.Reader, onText, onReasoning func(string)) (Message, Usage, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxStreamLine)
	a := &assembler{onText: onText, onReasoning: onReasoning}
	var data []string
	var foreign string // first line that is not server-sent-event syntax
	dispatch := func() error {
		if len(data) == 0 {
			return nil
		}
		payload := strings.Join(data, "\n")
		data = data[:0]
		return a.event(payload)
	}
	for !a.done && sc.Scan() {
		line := sc.Text()
		if line == "" {
			if err := dispatch(); err != nil {
				return Message{}, Usage{}, err
			}
			continue
		}
		if strings.HasPrefix(line, ":") { // comment / keep-alive
			continue
		}
		field, value, hasColon := strings.Cut(line, ":")
		switch {
		case field == "data":
			data = append(data, strings.TrimPrefix(value, " "))
		case !hasColon || !sseField(field):
			if foreign == "" {
				foreign = line
			}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Message{}, Usage{}, &parseError{fmt.Sprintf("invalid_response_stream:line longer than %d bytes", maxStreamLine)}
		}
		return Message{}, Usage{}, err
	}
	if err := dispatch(); err != nil {
		return Message{}, Usage{}, err
	}
	switch {
	case a.events == 0 && foreign != "":
		return Message{}, Usage{}, &parseError{"invalid_response_stream:not a server-sent event stream: " + excerpt(foreign, 200)}
	case !a.done && !a.finished:
		return Message{}, Usage{}, &streamError{fmt.Sprintf("stream_incomplete:the stream ended after %d events without [DONE] or a finish_reason", a.events)}
	}
	msg, err := a.message()
	if err != nil {
		return Message{}, Usage{}, err
	}
	return msg, a.usage.usage(), nil
}

// streamError is a stream that failed part-way (an error event from the
// server, or a cut-off stream); unlike a parseError it is retried.
type streamError struct{ msg string }

func (e *streamError) Error() string { return e.msg }

// sseField reports whether name is a field of the event-stream format.
func sseField(name string) bool {
	switch name {
	case "data", "event", "id", "retry":
		return true
	}
	return false
}

// streamChunk is one chat.completion.chunk (or an error event).
type streamChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          *string `json:"content"`
			Reasoning        string  `json:"reasoning"`
			ReasoningContent string  `json:"reasoning_content"`
			ToolCalls        []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Error json.RawMessage `json:"error"`
	Usage *wireUsage      `json:"usage"`
}

// assembler accumulates the deltas of choice 0.
type assembler struct {
	onText      func(string)
	onReasoning func(string)
	events      int
	done        bool // saw [DONE]
	finished    bool // saw a finish_reason
	content     strings.Builder
	hasText     bool
	calls       []*partialCall
	byIndex     map[int]*partialCall
	usage       *wireUsage // the last chunk's that had one
}

type partialCall struct {
	id, typ, name string
	args          strings.Builder
}

func (a *assembler) event(payload string) error {
	a.events++
	if strings.TrimSpace(payload) == "[DONE]" {
		a.done = true
		return nil
	}
	var ch streamChunk
	if err := json.Unmarshal([]byte(payload), &ch); err != nil {
		return &parseError{fmt.Sprintf("invalid_stream_chunk:%s", excerpt(err.Error(), 200))}
	}
	if len(ch.Error) > 0 && string(ch.Error) != "null" {
		return &streamError{"stream_error:" + excerpt(string(ch.Error), bodyExcerptLimit)}
	}
	if ch.Usage != nil {
		a.usage = ch.Usage
	}
	for _, choice := range ch.Choices {
		if choice.Index != 0 {
			continue
		}
		if a.onReasoning != nil {
			for _, r := range []string{choice.Delta.Reasoning, choice.Delta.ReasoningContent} {
				if r != "" {
					a.onReasoning(r)
				}
			}
		}
		if d := choice.Delta.Content; d != nil {
			a.hasText = true
			a.content.WriteString(*d)
			if *d != "" && a.onText != nil {
				a.onText(*d)
			}
		}
		for _, tc := range choice.Delta.ToolCalls {
			p, err := a.call(tc.Index, tc.ID)
			if err != nil {
				return err
			}
			if p.id == "" {
				p.id = tc.ID
			}
			if p.typ == "" {
				p.typ = tc.Type
			}
			if p.name == "" {
				p.name = tc.Function.Name
			}
			p.args.WriteString(tc.Function.Arguments)
		}
		if choice.FinishReason != nil && *choice.FinishReason != "" {
			a.finished = true
		}
	}
	return nil
}

// call finds the partial call a delta continues. Deltas carry an index;
// for servers that omit it, a delta with a new id starts a call and one
// without continues the latest.
func (a *assembler) call(index *int, id string) (*partialCall, error) {
	if index == nil {
		if n := len(a.calls); n > 0 && (id == "" || id == a.calls[n-1].id) {
			return a.calls[n-1], nil
		}
		return a.newCall(-1)
	}
	if *index < 0 || *index >= maxStreamToolCalls {
		return nil, &parseError{fmt.Sprintf("invalid_stream_chunk:tool call index %d out of range", *index)}
	}
	if p, ok := a.byIndex[*index]; ok {
		return p, nil
	}
	return a.newCall(*index)
}

func (a *assembler) newCall(index int) (*partialCall, error) {
	if len(a.calls) >= maxStreamToolCalls {
		return nil, &parseError{fmt.Sprintf("invalid_stream_chunk:more than %d tool calls", maxStreamToolCalls)}
	}
	p := &partialCall{}
	a.calls = append(a.calls, p)
	if index >= 0 {
		if a.byIndex == nil {
			a.byIndex = map[int]*partialCall{}
		}
		a.byIndex[index] = p
	}
	return p, nil
}

// message validates the assembled reply exactly as ParseResponse validates
// a non-streamed one, by building that response.
func (a *assembler) message() (Message, error) {
	msg := map[string]any{"role": "assistant"}
	if a.hasText {
		msg["content"] = a.content.String()
	}
	if len(a.calls) > 0 {
		calls := make([]map[string]any, len(a.calls))
		for i, p := range a.calls {
			fn := map[string]any{"name": p.name, "arguments": p.args.String()}
			calls[i] = map[string]any{"id": p.id, "function": fn}
			if p.typ != "" {
				calls[i]["type"] = p.typ
			}
		}
		msg["tool_calls"] = calls
	}
	raw, err := json.Marshal(map[string]any{"choices": []any{map[string]any{"message": msg}}})
	if err != nil {
		return Message{}, &parseError{"invalid_response_stream:" + err.Error()}
	}
	m, err := ParseResponse(raw)
	if err != nil {
		return Message{}, &parseError{err.Error()}
	}
	return m, nil
}

// isJSONBody reports whether the buffered body is a plain JSON document
// rather than an event stream: a server may ignore "stream": true.
// Leading whitespace is consumed.
func isJSONBody(br *bufio.Reader) bool {
	for {
		b, err := br.Peek(1)
		if err != nil {
			return false
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			_, _ = br.ReadByte()
		case '{', '[':
			return true
		default:
			return false
		}
	}
}

// textLog turns a stream of text pieces into readable log lines: complete
// lines are flushed as they end, a long run without a newline every
// textLogChunk bytes, and the rest on flush.
type textLog struct {
	emit func(string)
	buf  []byte
}

func newTextLog(emit func(string)) *textLog { return &textLog{emit: emit} }

func (t *textLog) write(s string) {
	t.buf = append(t.buf, s...)
	for {
		if i := bytes.IndexByte(t.buf, '\n'); i >= 0 && i < textLogChunk {
			t.emitN(i, 1)
			continue
		}
		if len(t.buf) < textLogChunk {
			return
		}
		// Cut on a rune boundary so a multi-byte character is not split
		// across two lines.
		n := textLogChunk
		for n > 0 && !utf8.RuneStart(t.buf[n]) {
			n--
		}
		if n == 0 {
			n = textLogChunk
		}
		t.emitN(n, 0)
	}
}

// emitN logs buf[:n] (unless blank) and drops it plus skip more bytes.
func (t *textLog) emitN(n, skip int) {
	line := strings.TrimRight(string(t.buf[:n]), "\r")
	if strings.TrimSpace(line) != "" {
		t.emit(line)
	}
	t.buf = append(t.buf[:0], t.buf[n+skip:]...)
}

func (t *textLog) flush() {
	if len(t.buf) > 0 {
		t.emitN(len(t.buf), 0)
	}
}

// idleReader fails reads once no byte has arrived for d: it calls onIdle
// (which cancels the request, unblocking a pending Read) when its timer
// fires, and every read that returns data re-arms the timer.
type idleReader struct {
	r     io.Reader
	d     time.Duration
	mu    sync.Mutex
	timer *time.Timer
}

func newIdleReader(r io.Reader, d time.Duration, onIdle func()) *idleReader {
	return &idleReader{r: r, d: d, timer: time.AfterFunc(d, onIdle)}
}

func (ir *idleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	if n > 0 {
		ir.mu.Lock()
		ir.timer.Reset(ir.d)
		ir.mu.Unlock()
	}
	return n, err
}

func (ir *idleReader) stop() {
	ir.mu.Lock()
	ir.timer.Stop()
	ir.mu.Unlock()
}

// limitedReader fails, rather than silently ending, past n bytes.
type limitedReader struct {
	r io.Reader
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, &parseError{fmt.Sprintf("invalid_response:body larger than %d bytes", maxResponseBytes)}
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}
