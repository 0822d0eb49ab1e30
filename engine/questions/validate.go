package questions

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/uncaged/workflow/engine/roleschema"
)

// FieldError is one part of an answer at fault.
type FieldError struct {
	// Path is a JSON pointer into the answer ("/status"), "" for the
	// answer as a whole.
	Path    string `json:"path"`
	Message string `json:"message"`
}

// InvalidAnswerError is an answer its question's form refuses: every
// field at fault, each once, in path order.
type InvalidAnswerError struct {
	Fields []FieldError
}

// Error counts the fields at fault and names the first.
func (e *InvalidAnswerError) Error() string {
	if len(e.Fields) == 0 {
		return "the answer does not match the form"
	}
	first := e.Fields[0]
	where := "the answer"
	if first.Path != "" {
		where = first.Path
	}
	if len(e.Fields) == 1 {
		return fmt.Sprintf("the answer does not match the form: %s: %s", where, first.Message)
	}
	return fmt.Sprintf("the answer does not match the form: %d fields at fault (first %s: %s)", len(e.Fields), where, first.Message)
}

// maxAnswerBytes bounds an answer: a person's reply to a form, not a
// document store.
const maxAnswerBytes = 1 << 20

var printer = message.NewPrinter(language.English)

// Validate checks answer against schema (the question's form) and returns
// a canonical copy of it (compact JSON), or an *InvalidAnswerError naming
// each field at fault. An answer must be a JSON object, since it becomes
// the role's meta.
func Validate(schema json.RawMessage, answer []byte) (json.RawMessage, error) {
	if len(answer) > maxAnswerBytes {
		return nil, &InvalidAnswerError{Fields: []FieldError{{Message: fmt.Sprintf("larger than %d bytes", maxAnswerBytes)}}}
	}
	trimmed := bytes.TrimSpace(answer)
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) {
		return nil, &InvalidAnswerError{Fields: []FieldError{{Message: "must be a JSON object"}}}
	}
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	compiled, err := roleschema.Compile(schema)
	if err != nil {
		return nil, fmt.Errorf("the question's form is not a usable JSON Schema: %s", roleschema.ErrorText(err))
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(trimmed))
	if err != nil {
		return nil, &InvalidAnswerError{Fields: []FieldError{{Message: "must be a JSON object: " + err.Error()}}}
	}
	if err := compiled.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return nil, err
		}
		return nil, &InvalidAnswerError{Fields: fieldErrors(ve)}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// fieldErrors flattens a validation error to its leaves, one entry per
// instance location (messages of one place joined).
func fieldErrors(ve *jsonschema.ValidationError) []FieldError {
	byPath := map[string][]string{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			p := pointer(e.InstanceLocation)
			msg := e.ErrorKind.LocalizedString(printer)
			for _, m := range byPath[p] {
				if m == msg {
					return
				}
			}
			byPath[p] = append(byPath[p], msg)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	out := make([]FieldError, 0, len(byPath))
	for p, msgs := range byPath {
		out = append(out, FieldError{Path: p, Message: strings.Join(msgs, "; ")})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// pointer writes an instance location as a JSON pointer (RFC 6901).
func pointer(tokens []string) string {
	var sb strings.Builder
	for _, t := range tokens {
		sb.WriteByte('/')
		sb.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return sb.String()
}
