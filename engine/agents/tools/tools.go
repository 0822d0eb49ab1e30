package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/uncaged/workflow/engine/agents/llm"
)

// Names of the workspace tools.
const (
	ReadFile  = "read_file"
	WriteFile = "write_file"
	PatchFile = "patch_file"
	ShellExec = "shell_exec"
)

// Names lists every workspace tool in the order they are offered.
func Names() []string { return []string{ReadFile, WriteFile, PatchFile, ShellExec} }

// Check reports the first name in names that is not a workspace tool.
func Check(names []string) error {
	for _, n := range names {
		if !known(n) {
			return fmt.Errorf("unknown tool %q (available: %s)", n, strings.Join(Names(), ", "))
		}
	}
	return nil
}

func known(name string) bool {
	for _, n := range Names() {
		if n == name {
			return true
		}
	}
	return false
}

// Tools returns the named tools bound to w, in the order of Names; no
// names means all of them. Their handlers answer every failure with an
// "Error: <msg>" result for the model; only the caller's cancellation is
// returned as an error.
func (w *Workspace) Tools(names []string) ([]llm.Tool, error) {
	if err := Check(names); err != nil {
		return nil, err
	}
	want := func(n string) bool {
		if len(names) == 0 {
			return true
		}
		for _, x := range names {
			if x == n {
				return true
			}
		}
		return false
	}
	all := []llm.Tool{
		{
			Name:        ReadFile,
			Description: "Read a text file in the workspace. Returns its lines as \"<n>|<line>\" (line numbers start at 1). Use offset and limit to read part of a long file.",
			Parameters: json.RawMessage(`{"type":"object","properties":{` +
				`"path":{"type":"string","description":"File path, relative to the workspace"},` +
				`"offset":{"type":["integer","null"],"description":"First line to return (1-based, default 1)"},` +
				`"limit":{"type":["integer","null"],"description":"Maximum number of lines to return (default 2000)"}},` +
				`"required":["path"]}`),
			Handler: handler(func(_ context.Context, a args) (string, error) {
				offset, err := a.int("offset")
				if err != nil {
					return "", err
				}
				limit, err := a.int("limit")
				if err != nil {
					return "", err
				}
				return w.ReadFile(a.path, offset, limit)
			}),
		},
		{
			Name:        WriteFile,
			Description: "Create or overwrite a file in the workspace with the given content. Missing parent directories are created.",
			Parameters: json.RawMessage(`{"type":"object","properties":{` +
				`"path":{"type":"string","description":"File path, relative to the workspace"},` +
				`"content":{"type":"string","description":"The complete new content of the file"}},` +
				`"required":["path","content"]}`),
			Handler: handler(func(_ context.Context, a args) (string, error) {
				content, err := a.str("content")
				if err != nil {
					return "", err
				}
				return w.WriteFile(a.path, content)
			}),
		},
		{
			Name:        PatchFile,
			Description: "Edit a file in the workspace by replacing one exact occurrence of old_string with new_string. old_string must occur exactly once; include enough surrounding text to make it unique.",
			Parameters: json.RawMessage(`{"type":"object","properties":{` +
				`"path":{"type":"string","description":"File path, relative to the workspace"},` +
				`"old_string":{"type":"string","description":"The exact text to replace"},` +
				`"new_string":{"type":"string","description":"The replacement text"}},` +
				`"required":["path","old_string","new_string"]}`),
			Handler: handler(func(_ context.Context, a args) (string, error) {
				old, err := a.str("old_string")
				if err != nil {
					return "", err
				}
				repl, err := a.str("new_string")
				if err != nil {
					return "", err
				}
				return w.PatchFile(a.path, old, repl)
			}),
		},
		{
			Name:        ShellExec,
			Description: "Run a shell command (sh -c) in the workspace directory and return its combined stdout and stderr (at most 10000 characters).",
			Parameters: json.RawMessage(`{"type":"object","properties":{` +
				`"command":{"type":"string","description":"The command line to run"},` +
				`"timeout":{"type":["number","null"],"description":"Timeout in seconds (default 30)"}},` +
				`"required":["command"]}`),
			Handler: func(ctx context.Context, raw string) (string, error) {
				a, err := parseArgs(raw, "")
				if err != nil {
					return "Error: " + err.Error(), nil
				}
				command, err := a.str("command")
				if err != nil {
					return "Error: " + err.Error(), nil
				}
				timeout, err := a.seconds("timeout")
				if err != nil {
					return "Error: " + err.Error(), nil
				}
				out, err := w.ShellExec(ctx, command, timeout)
				switch {
				case ctx.Err() != nil:
					return "", ctx.Err()
				case errors.Is(err, errTimedOut):
					return ShellTimedOut, nil
				case err != nil:
					return "Error: " + err.Error(), nil
				case out == "":
					return "(no output)", nil
				}
				return out, nil
			},
		},
	}
	var out []llm.Tool
	for _, t := range all {
		if want(t.Name) {
			out = append(out, t)
		}
	}
	return out, nil
}

// handler adapts a file tool taking a "path" argument: bad arguments and
// failures become "Error: <msg>" results.
func handler(fn func(context.Context, args) (string, error)) func(context.Context, string) (string, error) {
	return func(ctx context.Context, raw string) (string, error) {
		a, err := parseArgs(raw, "path")
		if err == nil {
			var res string
			if res, err = fn(ctx, a); err == nil {
				return res, nil
			}
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "Error: " + err.Error(), nil
	}
}

// args are a tool call's decoded JSON arguments.
type args struct {
	m    map[string]any
	path string
}

// parseArgs decodes a JSON object; pathKey, when set, must be a string.
func parseArgs(raw, pathKey string) (args, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return args{}, errors.New("arguments must be a JSON object")
	}
	a := args{m: m}
	if pathKey != "" {
		p, err := a.str(pathKey)
		if err != nil {
			return args{}, err
		}
		a.path = p
	}
	return a, nil
}

func (a args) str(key string) (string, error) {
	v, ok := a.m[key]
	if !ok || v == nil {
		return "", fmt.Errorf("%s is required", key)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s must be a string", key)
	}
	return s, nil
}

// int reads an optional whole number; absent or null is 0.
func (a args) int(key string) (int, error) {
	v, ok := a.m[key]
	if !ok || v == nil {
		return 0, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%s must be an integer", key)
	}
	i, err := n.Int64()
	if err != nil || i < math.MinInt32 || i > math.MaxInt32 {
		return 0, fmt.Errorf("%s must be an integer, got %s", key, n)
	}
	return int(i), nil
}

// seconds reads an optional positive duration in seconds; absent or null
// is 0 (the default).
func (a args) seconds(key string) (time.Duration, error) {
	v, ok := a.m[key]
	if !ok || v == nil {
		return 0, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%s must be a number of seconds", key)
	}
	f, err := n.Float64()
	if err != nil || f <= 0 || f > 24*3600 {
		return 0, fmt.Errorf("%s must be a number of seconds between 0 and 86400, got %s", key, n)
	}
	return time.Duration(f * float64(time.Second)), nil
}
