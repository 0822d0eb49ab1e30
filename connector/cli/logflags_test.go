package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// The root's --log-level and --log-format, or their variables, decide the
// logger every command builds; the flag wins over the variable.
func TestLogFlags(t *testing.T) {
	t.Parallel()
	logLine := func(env map[string]string, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		a := &app{env: Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }}}
		root := a.root()
		root.SetArgs(append(args, "version"))
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		a.logger().Debug("hello", "k", "v")
		a.closeLog() // as Run does: what is queued is written
		return errb.String()
	}
	if got := logLine(nil); got != "" {
		t.Fatalf("debug written by default: %q", got)
	}
	if got := logLine(nil, "--log-level", "debug", "--log-format", "text"); !strings.Contains(got, "level=DEBUG msg=hello k=v") {
		t.Fatalf("got %q, want a debug text line", got)
	}
	got := logLine(map[string]string{"UNCAGED_WORKFLOW_LOG_LEVEL": "debug", "UNCAGED_WORKFLOW_LOG_FORMAT": "text"}, "--log-format", "json")
	var line map[string]any
	if err := json.Unmarshal([]byte(got), &line); err != nil || line["level"] != "DEBUG" {
		t.Fatalf("got %q (%v), want a debug JSON line", got, err)
	}

	c := newCLI(t)
	c.fails(`invalid argument "loud" for "--log-level"`, "--log-level", "loud", "version")
	c.env["UNCAGED_WORKFLOW_LOG_FORMAT"] = "xml"
	c.fails(`UNCAGED_WORKFLOW_LOG_FORMAT`, "version")
}

// service install's --gateway reads UNCAGED_WORKFLOW_GATEWAY when not
// given; the flag wins.
func TestGatewayFlagFromTheEnvironment(t *testing.T) {
	t.Parallel()
	s := newServiceCLI(t)
	s.env[EnvGateway] = "https://from-env.example.com"
	args := []string{"service", "install", "--name", "laptop", "--token-file", s.token, "--binary", s.binary, "--dry-run"}
	if out := s.ok(args...); !strings.Contains(out, "--gateway https://from-env.example.com") {
		t.Fatalf("unit without the variable's gateway:\n%s", out)
	}
	if out := s.ok(append(args, "--gateway", "https://flag.example.com")...); !strings.Contains(out, "--gateway https://flag.example.com") {
		t.Fatalf("unit without the flag's gateway:\n%s", out)
	}
}
