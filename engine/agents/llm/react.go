package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/uncaged/workflow/engine/roleschema"
)

// DefaultMaxRounds is the round limit used when Request.MaxRounds is zero
// (MAX_REACT_ROUNDS in spec §7.5).
const DefaultMaxRounds = 10

// ErrMaxRounds is returned by React when no valid output arrives within
// MaxRounds model calls.
var ErrMaxRounds = errors.New("max_react_rounds_exceeded")

// Default structured-tool naming (spec §7.4).
const (
	DefaultOutputName        = "extract"
	DefaultOutputDescription = "Extract structured data from the input text."
)

// Tool is a function the model may call. Parameters is its JSON Schema
// (nil means an empty object schema). Handler receives the raw JSON
// arguments; a returned error is reported to the model as the tool result.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
	Handler     func(ctx context.Context, argsJSON string) (string, error)
}

// Output describes the structured output tool. Schema is the JSON Schema the
// result must satisfy and the tool's parameters. Name defaults to the
// schema's "title", then DefaultOutputName; Description to the schema's
// "description", then DefaultOutputDescription.
type Output struct {
	Name        string
	Description string
	Schema      json.RawMessage
}

// Request is one ReAct run.
type Request struct {
	System    string
	User      string
	Tools     []Tool
	Output    Output
	MaxRounds int
	// Log overrides the client's Options.Log for this run (including the
	// client's retry lines when c is a *Client).
	Log func(tag, content string)
}

// Chatter is the model call React drives; *Client implements it.
type Chatter interface {
	Chat(ctx context.Context, req ChatRequest) (Message, error)
}

// React runs the ReAct loop: each round sends the conversation with the
// tools plus the structured output tool (tool_choice "auto"). A valid call
// of the output tool, or a plain JSON reply (optionally ```json fenced) that
// validates against the output schema, ends the run with that JSON. Invalid
// output, unknown tools and tool failures are reported back to the model and
// the loop continues; after MaxRounds model calls it fails with ErrMaxRounds.
// Errors from the model call itself (after the client's retries) are
// returned as-is.
func React(ctx context.Context, c Chatter, req Request) (json.RawMessage, error) {
	logf := req.Log
	if cl, ok := c.(*Client); ok {
		if req.Log != nil {
			// Route the client's retry lines to this run's log too.
			cp := *cl
			cp.opts.Log = req.Log
			cl = &cp
			c = cl
		}
		logf = cl.log
	}
	if logf == nil {
		logf = func(string, string) {}
	}
	out, err := prepareOutput(req.Output)
	if err != nil {
		return nil, err
	}
	maxRounds := req.MaxRounds
	if maxRounds <= 0 {
		maxRounds = DefaultMaxRounds
	}
	handlers := map[string]Tool{}
	tools := make([]ToolDef, 0, len(req.Tools)+1)
	for _, t := range req.Tools {
		if t.Name == "" || t.Name == out.name {
			return nil, fmt.Errorf("llm: invalid or duplicate tool name %q", t.Name)
		}
		if _, dup := handlers[t.Name]; dup {
			return nil, fmt.Errorf("llm: duplicate tool name %q", t.Name)
		}
		handlers[t.Name] = t
		params := t.Parameters
		if len(bytes.TrimSpace(params)) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		tools = append(tools, ToolDef{Type: "function", Function: FunctionDef{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	tools = append(tools, ToolDef{Type: "function", Function: FunctionDef{Name: out.name, Description: out.description, Parameters: out.params}})

	msgs := []Message{SystemMessage(req.System), UserMessage(req.User)}
	for round := 1; round <= maxRounds; round++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		logf("react", fmt.Sprintf("round %d/%d", round, maxRounds))
		reply, err := c.Chat(ctx, ChatRequest{Messages: msgs, Tools: tools, ToolChoice: "auto"})
		if err != nil {
			logf("react", fmt.Sprintf("round %d: model call failed: %s", round, excerpt(err.Error(), 300)))
			return nil, err
		}
		if len(reply.ToolCalls) == 0 {
			text := reply.Text()
			msgs = append(msgs, Message{Role: "assistant", Content: &text})
			doc, perr := parseJSONReply(text)
			if perr != nil {
				logf("react", fmt.Sprintf("round %d: plain reply is not JSON", round))
				msgs = append(msgs, UserMessage(fmt.Sprintf("Your previous reply was not valid JSON and contained no tool calls. Reply with a single JSON object that matches the schema, or call the %s tool with the structured arguments.", out.name)))
				continue
			}
			if verr := out.schema.Validate(doc); verr != nil {
				vmsg := roleschema.ErrorText(verr)
				logf("react", fmt.Sprintf("round %d: plain JSON reply failed validation: %s", round, vmsg))
				msgs = append(msgs, UserMessage(fmt.Sprintf("Your previous JSON reply did not satisfy the schema: %s. Reply again with a single JSON object that matches the schema, or call the %s tool with the structured arguments.", vmsg, out.name)))
				continue
			}
			logf("react", fmt.Sprintf("round %d: plain JSON reply accepted", round))
			return compact(text), nil
		}
		msgs = append(msgs, Message{Role: "assistant", Content: reply.Content, ToolCalls: reply.ToolCalls})
		for _, call := range reply.ToolCalls {
			name := call.Function.Name
			if name == out.name {
				doc, perr := jsonschema.UnmarshalJSON(strings.NewReader(call.Function.Arguments))
				if perr != nil {
					logf("react", fmt.Sprintf("round %d: %s arguments are not JSON", round, name))
					msgs = append(msgs, ToolMessage(call.ID, "Tool arguments were not valid JSON. Provide valid JSON object arguments matching the schema."))
					continue
				}
				if verr := out.schema.Validate(doc); verr != nil {
					vmsg := roleschema.ErrorText(verr)
					logf("react", fmt.Sprintf("round %d: %s arguments failed validation: %s", round, name, vmsg))
					msgs = append(msgs, ToolMessage(call.ID, fmt.Sprintf("Schema validation failed: %s. Fix the arguments and call the tool again with a JSON object that matches the schema.", vmsg)))
					continue
				}
				logf("react", fmt.Sprintf("round %d: %s accepted", round, name))
				return compact(call.Function.Arguments), nil
			}
			t, ok := handlers[name]
			if !ok || t.Handler == nil {
				logf("react", fmt.Sprintf("round %d: unknown tool %q", round, name))
				msgs = append(msgs, ToolMessage(call.ID, fmt.Sprintf("Unknown tool: %s. Use one of the declared tools only.", name)))
				continue
			}
			res, herr := runHandler(ctx, t, call.Function.Arguments)
			if herr != nil {
				if cerr := ctx.Err(); cerr != nil {
					return nil, cerr
				}
				logf("react", fmt.Sprintf("round %d: tool %s failed: %s", round, name, excerpt(herr.Error(), 300)))
				res = "Tool execution failed: " + herr.Error()
			} else {
				// The call itself is logged by the client as it streams in;
				// what it returned is the other half of what a watcher needs.
				logf("react", fmt.Sprintf("round %d: tool %s returned %s", round, name, resultGist(res)))
			}
			msgs = append(msgs, ToolMessage(call.ID, res))
		}
	}
	logf("react", fmt.Sprintf("giving up after %d rounds", maxRounds))
	return nil, ErrMaxRounds
}

// resultGist is a one-line excerpt of a tool result for the log.
func resultGist(res string) string {
	first, rest, multi := strings.Cut(strings.TrimSpace(res), "\n")
	gist := excerpt(first, 160)
	if multi {
		gist += fmt.Sprintf(" … (%d more lines)", strings.Count(rest, "\n")+1)
	}
	return strconv.Quote(gist)
}

func runHandler(ctx context.Context, t Tool, args string) (res string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return t.Handler(ctx, args)
}

type preparedOutput struct {
	name, description string
	params            json.RawMessage
	schema            *jsonschema.Schema
}

func prepareOutput(o Output) (*preparedOutput, error) {
	if len(bytes.TrimSpace(o.Schema)) == 0 {
		return nil, errors.New("llm: output schema is required")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(o.Schema, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("llm: output schema must be a JSON object")
	}
	sch, err := roleschema.Compile(o.Schema)
	if err != nil {
		return nil, fmt.Errorf("llm: output schema: %w", err)
	}
	p := &preparedOutput{name: strings.TrimSpace(o.Name), description: strings.TrimSpace(o.Description), schema: sch}
	if p.name == "" {
		p.name = schemaString(obj["title"])
	}
	if p.name == "" {
		p.name = DefaultOutputName
	}
	if p.description == "" {
		p.description = schemaString(obj["description"])
	}
	if p.description == "" {
		p.description = DefaultOutputDescription
	}
	delete(obj, "$schema")
	p.params, err = json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("llm: output schema: %w", err)
	}
	return p, nil
}

func schemaString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return strings.TrimSpace(s)
}

// stripFence removes a surrounding ``` or ```json fence.
func stripFence(text string) string {
	s := strings.TrimSpace(text)
	if strings.HasPrefix(s, "```") {
		s = strings.TrimPrefix(s, "```")
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		} else {
			s = strings.TrimPrefix(s, "json")
		}
		s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "```"))
	}
	return s
}

// parseJSONReply accepts a bare JSON value or one inside a ``` / ```json fence.
func parseJSONReply(text string) (any, error) {
	s := stripFence(text)
	if s == "" {
		return nil, errors.New("empty")
	}
	return jsonschema.UnmarshalJSON(strings.NewReader(s))
}

// compact returns the JSON in text (fences stripped) without insignificant
// whitespace; the caller has already checked that it parses.
func compact(text string) json.RawMessage {
	s := stripFence(text)
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return json.RawMessage(s)
	}
	return json.RawMessage(b.Bytes())
}
