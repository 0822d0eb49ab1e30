package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/questions"
	"github.com/uncaged/workflow/engine/threads"
)

func (a *app) threadAnswerCmd() *cobra.Command {
	var answerJSON, file string
	cmd := &cobra.Command{
		Use:   "answer <thread-id> [--json '{...}' | --file F]",
		Short: "Answer the question a waiting thread asks",
		Long: `A thread whose role is played by a person (agent type human) waits, with status
"waiting", until someone answers the role's question. This prints the question
and sends the answer, which must fit the role's output schema: --json gives it
inline, --file reads it from a file ("-" for stdin), and with neither it asks
for each field of the form in turn. An answer that does not fit is refused
field by field and the thread keeps waiting; a question answered already (from
here, the API or the dashboard) is refused, naming who answered it.`,
		Args: exactArgs(1, 1, "answer requires <thread-id>", ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			if answerJSON != "" && file != "" {
				return errors.New("give the answer with --json or --file, not both")
			}
			l, store, err := a.store()
			if err != nil {
				return err
			}
			rec, err := resolveThread(l, args[0])
			if err != nil {
				return err
			}
			qs := &questions.Store{Layout: l, CAS: store}
			qrec, err := qs.Read(rec.BundleHash, rec.ThreadID)
			if errors.Is(err, questions.ErrNotWaiting) {
				return fmt.Errorf("thread %s waits for no answer", rec.ThreadID)
			}
			if err != nil {
				return err
			}
			if qrec.Answered() {
				return fmt.Errorf("thread %s: its question was already answered by %s at %s", rec.ThreadID, qrec.AnsweredBy, time.UnixMilli(qrec.AnsweredAt).Format(time.RFC3339))
			}
			if rec.Source != threads.SourceActive || qrec.Head != rec.Head {
				return fmt.Errorf("thread %s waits for no answer: it went on without one", rec.ThreadID)
			}
			q, err := qs.Question(qrec)
			if err != nil {
				return err
			}
			var answer []byte
			switch {
			case answerJSON != "":
				answer = []byte(answerJSON)
			case file == "-":
				if answer, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), 1<<20+1)); err != nil {
					return err
				}
			case file != "":
				if answer, err = os.ReadFile(file); err != nil {
					return err
				}
			}
			c, err := a.engineClient(l, cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			send := func(answer []byte) (host.Answered, error) {
				if !json.Valid(answer) {
					return host.Answered{}, &questions.InvalidAnswerError{Fields: []questions.FieldError{{Message: "must be a JSON object (the text given is not JSON)"}}}
				}
				return c.Answer(rec.ThreadID, host.AnswerRequest{Answer: answer, By: questions.LocalAnswerer(), QuestionHash: qrec.Question})
			}
			var done host.Answered
			if answer != nil {
				done, err = send(answer)
			} else {
				done, err = a.answerInteractively(cmd, rec.ThreadID, q, send)
			}
			if err != nil {
				return answerError(err)
			}
			fmt.Fprintf(a.out(), "answered thread %s (role %s) as %s\n", done.ThreadID, q.Role, done.AnsweredBy)
			return nil
		},
	}
	cmd.Flags().StringVar(&answerJSON, "json", "", "the answer, a JSON object")
	cmd.Flags().StringVar(&file, "file", "", "read the answer (a JSON object) from this file; - for stdin")
	return cmd
}

// answerError lists every field an answer got wrong.
func answerError(err error) error {
	var invalid *questions.InvalidAnswerError
	if !errors.As(err, &invalid) {
		return err
	}
	var b strings.Builder
	b.WriteString("the answer does not fit the question's form; the thread keeps waiting:")
	for _, f := range invalid.Fields {
		where := f.Path
		if where == "" {
			where = "(the answer)"
		}
		fmt.Fprintf(&b, "\n  %s: %s", where, f.Message)
	}
	return errors.New(b.String())
}

// formField is one top-level property of a question's form.
type formField struct {
	name     string
	schema   map[string]any
	required bool
}

// answerInteractively prints the question, asks for each field of its form
// and sends the answer; fields refused are asked again.
func (a *app) answerInteractively(cmd *cobra.Command, id string, q questions.Question, send func([]byte) (host.Answered, error)) (host.Answered, error) {
	w := cmd.ErrOrStderr()
	fmt.Fprintf(w, "Thread %s (workflow %s) asks, as role %s", id, q.Workflow, q.Role)
	if q.Assignee != "" {
		fmt.Fprintf(w, ", of %s", q.Assignee)
	}
	if q.Deadline != 0 {
		fmt.Fprintf(w, ", until %s", time.UnixMilli(q.Deadline).Format(time.RFC1123))
	}
	fmt.Fprintf(w, ":\n\n%s\n\n", strings.TrimSpace(q.Text))
	fields, err := formFields(q.Schema)
	if err != nil {
		return host.Answered{}, err
	}
	in := bufio.NewReader(cmd.InOrStdin())
	answer := map[string]any{}
	ask := fields
	for {
		for _, f := range ask {
			v, set, err := askField(w, in, f)
			if err != nil {
				return host.Answered{}, err
			}
			if set {
				answer[f.name] = v
			} else {
				delete(answer, f.name)
			}
		}
		body, _ := json.Marshal(answer) // strings, numbers, booleans and decoded JSON
		done, err := send(body)
		var invalid *questions.InvalidAnswerError
		if !errors.As(err, &invalid) {
			return done, err
		}
		fmt.Fprintln(w, answerError(err))
		ask = nil
		for _, f := range fields {
			for _, bad := range invalid.Fields {
				if bad.Path == "" || strings.HasPrefix(bad.Path+"/", "/"+f.name+"/") {
					ask = append(ask, f)
					break
				}
			}
		}
		if len(ask) == 0 {
			return done, answerError(err)
		}
	}
}

// formFields lists the top-level properties of an object schema: required
// ones first, then in name order.
func formFields(schema json.RawMessage) ([]formField, error) {
	var s map[string]any
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, fmt.Errorf("the question's form is not a JSON Schema object: %w", err)
	}
	props, _ := s["properties"].(map[string]any)
	required := map[string]bool{}
	if list, ok := s["required"].([]any); ok {
		for _, r := range list {
			if name, ok := r.(string); ok {
				required[name] = true
			}
		}
	}
	var out []formField
	for name, p := range props {
		ps, _ := p.(map[string]any)
		out = append(out, formField{name: name, schema: ps, required: required[name]})
	}
	if len(out) == 0 {
		return nil, errors.New("the question's form has no fields to ask for; answer with --json '{...}'")
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].required != out[j].required {
			return out[i].required
		}
		return out[i].name < out[j].name
	})
	return out, nil
}

// askField asks for one field until the reply reads as its type. An
// empty reply leaves an optional field out (set false).
func askField(w io.Writer, in *bufio.Reader, f formField) (v any, set bool, err error) {
	typ, _ := f.schema["type"].(string)
	enum, _ := f.schema["enum"].([]any)
	for {
		label := f.name
		if d, _ := f.schema["description"].(string); d != "" {
			label += " — " + d
		}
		switch {
		case len(enum) > 0:
			var opts []string
			for i, e := range enum {
				opts = append(opts, fmt.Sprintf("%d) %v", i+1, e))
			}
			label += " [" + strings.Join(opts, ", ") + "]"
		case typ == "boolean":
			label += " [y/n]"
		case typ == "array" || typ == "object" || typ == "":
			label += " (JSON)"
		default:
			label += " (" + typ + ")"
		}
		if !f.required {
			label += ", optional"
		}
		fmt.Fprintf(w, "%s: ", label)
		line, rerr := in.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		if rerr != nil && (rerr != io.EOF || line == "") {
			return nil, false, fmt.Errorf("no answer for %s: the input ended", f.name)
		}
		if strings.TrimSpace(line) == "" && !f.required {
			return nil, false, nil
		}
		v, perr := parseField(strings.TrimSpace(line), line, typ, enum)
		if perr == nil {
			return v, true, nil
		}
		fmt.Fprintf(w, "  %s\n", perr)
	}
}

// parseField reads a reply as a field's value: an enum by number or value,
// a boolean as y/n, numbers, JSON for arrays and objects, and text as it
// was typed.
func parseField(trimmed, raw, typ string, enum []any) (any, error) {
	if len(enum) > 0 {
		if n, err := strconv.Atoi(trimmed); err == nil && n >= 1 && n <= len(enum) {
			return enum[n-1], nil
		}
		for _, e := range enum {
			if fmt.Sprint(e) == trimmed {
				return e, nil
			}
		}
		return nil, fmt.Errorf("choose one of the %d by number or value", len(enum))
	}
	switch typ {
	case "string":
		return raw, nil
	case "boolean":
		switch strings.ToLower(trimmed) {
		case "y", "yes", "true":
			return true, nil
		case "n", "no", "false":
			return false, nil
		}
		return nil, errors.New("answer y or n")
	case "integer":
		n, err := strconv.ParseInt(trimmed, 10, 64)
		if err != nil {
			return nil, errors.New("a whole number, please")
		}
		return n, nil
	case "number":
		n, err := strconv.ParseFloat(trimmed, 64)
		if err != nil {
			return nil, errors.New("a number, please")
		}
		return n, nil
	}
	var v any
	if err := json.Unmarshal([]byte(trimmed), &v); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	return v, nil
}
