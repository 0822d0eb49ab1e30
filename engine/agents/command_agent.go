package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/procgroup"
	"github.com/uncaged/workflow/engine/threadenv"
)

// Limits of a command agent's output.
const (
	// MaxCommandOutput bounds the stdout kept for the role's content;
	// anything beyond is dropped (and said so) rather than held in memory.
	MaxCommandOutput = 8 << 20
	// maxLogLine bounds one debug-log line, so a program that writes
	// megabytes without a newline cannot blow up the thread's log.
	maxLogLine = 16 << 10
	// stderrTail is how much of stderr an error message quotes.
	stderrTail = 2000
	// hermesMaxTurns is the hermes preset's --max-turns (the original's
	// HERMES_DEFAULT_MAX_TURNS).
	hermesMaxTurns = "90"
)

// killGrace is how long a command gets between SIGTERM and SIGKILL when
// it is cancelled or times out, and how long its output pipes may stay
// open after it exited (a grandchild holding them).
var killGrace = 2 * time.Second

// Kinds of CommandError, the original spawnCli's error kinds
// (timeout, spawn failure, non-zero exit).
const (
	ErrKindNonZeroExit = "non_zero_exit"
	ErrKindTimeout     = "timeout"
	ErrKindSpawnFailed = "spawn_failed"
)

// CommandError is why a command agent's program failed.
type CommandError struct {
	Kind     string // ErrKindNonZeroExit, ErrKindTimeout or ErrKindSpawnFailed
	Agent    string // "cli agent /usr/bin/claude", ...
	ExitCode int    // non_zero_exit: the exit code, -1 when a signal ended it
	Signal   string // non_zero_exit by a signal: its name
	Stderr   string // the end of what the program wrote to stderr
	Err      error  // spawn_failed: the cause
	Timeout  time.Duration
}

// Error implements error.
func (e *CommandError) Error() string {
	var b strings.Builder
	b.WriteString(e.Agent)
	switch e.Kind {
	case ErrKindSpawnFailed:
		fmt.Fprintf(&b, ": could not start the program (%s): %v", e.Kind, e.Err)
		return b.String()
	case ErrKindTimeout:
		fmt.Fprintf(&b, ": timed out after %d ms (%s)", e.Timeout.Milliseconds(), e.Kind)
	default:
		if e.Signal != "" {
			fmt.Fprintf(&b, ": killed by signal %s (%s)", e.Signal, e.Kind)
		} else {
			fmt.Fprintf(&b, ": exit code %d (%s)", e.ExitCode, e.Kind)
		}
	}
	if e.Stderr != "" {
		fmt.Fprintf(&b, "; stderr: %s", e.Stderr)
	}
	return b.String()
}

// Unwrap returns the cause of a spawn failure.
func (e *CommandError) Unwrap() error { return e.Err }

// commandAgent runs a program per role: a generic agent CLI (cli), the
// cursor and hermes presets, or a deterministic command (exec).
type commandAgent struct{ spec Spec }

// newCommandAgent returns the cli, cursor, hermes or exec agent for spec.
// What can be judged without the thread's environment is checked here, so
// a bad adapter fails when it is created; commands and defaults that come
// from the environment are resolved when a role runs.
func newCommandAgent(spec Spec) (Agent, error) {
	if spec.Command != "" {
		if err := checkCommandSyntax(spec.Command); err != nil {
			return nil, err
		}
	}
	for k := range spec.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("agent: env name %q is not a valid variable name", k)
		}
	}
	return commandAgent{spec: spec}, nil
}

// checkCommandSyntax accepts an absolute path or a bare program name (looked
// up on PATH when the role runs). A relative path would depend on the
// engine's working directory, which a user does not control.
func checkCommandSyntax(cmd string) error {
	if filepath.IsAbs(cmd) {
		return nil
	}
	if strings.ContainsRune(cmd, '/') || cmd == "." || cmd == ".." {
		return fmt.Errorf("agent: command %q must be an absolute path or a program name found on PATH", cmd)
	}
	return nil
}

// resolveProgram finds the executable for cmd, on the PATH of the
// thread's environment env (nil: the engine host's own).
func resolveProgram(cmd, source string, env *threadenv.Env) (string, error) {
	if err := checkCommandSyntax(cmd); err != nil {
		return "", fmt.Errorf("%s: %w", source, err)
	}
	if filepath.IsAbs(cmd) {
		st, err := os.Stat(cmd)
		if err != nil {
			return "", fmt.Errorf("agent: command %s (%s): %w", cmd, source, err)
		}
		if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
			return "", fmt.Errorf("agent: command %s (%s) is not an executable file", cmd, source)
		}
		return cmd, nil
	}
	lookPath, where := exec.LookPath, ""
	if env != nil {
		lookPath = env.LookPath
		if env.Origin() != "" {
			where = " (the thread's environment is " + env.Origin() + ")"
		}
	}
	p, err := lookPath(cmd)
	if err != nil {
		return "", fmt.Errorf("agent: command %q (%s) was not found on PATH%s; set an absolute path", cmd, source, where)
	}
	return p, nil
}

// invocation is one resolved run of the program.
type invocation struct {
	label   string // for messages: "cursor agent /usr/bin/cursor-agent"
	argv    []string
	dir     string
	env     []string
	stdin   []byte // nil: no input
	timeout time.Duration
	owner   procgroup.Owner // the thread and role, for the group's record
}

// Run implements Agent.
func (a commandAgent) Run(ctx context.Context, call Call) (Result, error) {
	if call.Host == nil {
		return Result{}, errors.New("agent: no host to run the command agent with")
	}
	schema, err := compileSchema(call.Schema)
	if err != nil {
		return Result{}, err
	}
	inv, err := a.prepare(ctx, call)
	if err != nil {
		return Result{}, err
	}
	out, err := runCommand(ctx, inv, call.Host.Log)
	if err != nil {
		return Result{}, err
	}
	if a.spec.Kind == KindExec {
		meta, verr := metaFromJSON(strings.TrimSpace(out.stdout), schema)
		if verr != nil {
			return Result{}, fmt.Errorf("%s: stdout must be a JSON object valid against the role's schema: %v%s", inv.label, verr, out.note())
		}
		return Result{Meta: meta}, nil
	}
	payload := out.stdout
	if out.truncated {
		payload += out.note()
	}
	hash, err := call.Host.CAS().PutNode(node.NewContent(payload, nil))
	if err != nil {
		return Result{}, fmt.Errorf("%s: storing its output: %w", inv.label, err)
	}
	call.Host.Log("agent", fmt.Sprintf("%s: output stored as content node %s", inv.label, hash))
	if meta, ok := metaInOutput(out.stdout, schema); ok {
		return Result{Meta: meta}, nil
	}
	schemaText := []byte(call.Schema)
	if len(bytes.TrimSpace(schemaText)) == 0 {
		schemaText = []byte(`{"type":"object"}`)
	}
	ex, err := call.Host.Extract(ctx, schemaText, hash)
	if err != nil {
		return Result{}, fmt.Errorf("%s: its output holds no JSON object matching the schema, and extracting one failed: %w", inv.label, err)
	}
	return Result{Meta: ex.Meta}, nil
}

// prepare resolves the program, its arguments, environment and limits.
// A cursor agent without a workspace asks the thread for one, which costs
// a model call, so that comes after every check that needs none.
func (a commandAgent) prepare(ctx context.Context, call Call) (invocation, error) {
	prog, err := a.program(call.Host.Getenv, threadenv.Of(call.Host))
	if err != nil {
		return invocation{}, err
	}
	inv := invocation{label: fmt.Sprintf("%s agent %s", a.spec.Kind, prog),
		owner: procgroup.Owner{Thread: call.Thread.ThreadID, Role: call.Role}}
	model, timeout, err := a.modelAndTimeout(call.Host.Getenv)
	if err != nil {
		return invocation{}, err
	}
	inv.timeout = timeout
	if inv.dir, err = a.workspace(ctx, call, inv.label); err != nil {
		return invocation{}, err
	}
	prompt := ThreadInput(call.Thread)
	if call.SystemPrompt != "" {
		prompt = call.SystemPrompt + "\n\n" + prompt
	}
	inv.env = commandEnv(a.spec.Env, call)
	if err := a.arguments(&inv, call, prog, prompt, model); err != nil {
		return invocation{}, err
	}
	if inv.dir == "" {
		// No workspace: the program runs where the thread's command was
		// started, not wherever the engine host happens to be.
		inv.dir = threadenv.Of(call.Host).Dir()
	}
	return inv, nil
}

// program resolves the command to run: the agent's own, else (a preset)
// the one its variable names, else the preset's default.
func (a commandAgent) program(getenv func(string) string, env *threadenv.Env) (string, error) {
	command, source := a.spec.Command, "the agent's command"
	if preset, ok := presets[a.spec.Kind]; ok && command == "" {
		command, source = getenv(preset.commandVar), preset.commandVar
		if command == "" {
			command, source = preset.command, "the default command"
		}
	}
	return resolveProgram(command, source, env)
}

// modelAndTimeout are the agent's model and time limit; a preset's
// variables fill in what the spec leaves unset.
func (a commandAgent) modelAndTimeout(getenv func(string) string) (string, time.Duration, error) {
	s := a.spec
	model, timeout := s.Model, time.Duration(s.TimeoutMs)*time.Millisecond
	preset, ok := presets[s.Kind]
	if !ok {
		return model, timeout, nil
	}
	if model == "" {
		model = getenv(preset.modelVar)
	}
	if s.TimeoutMs == 0 {
		if v := strings.TrimSpace(getenv(preset.timeoutVar)); v != "" {
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil || ms < 0 {
				return "", 0, fmt.Errorf("agent: %s must be a number of milliseconds >= 0, got %q", preset.timeoutVar, v)
			}
			timeout = time.Duration(ms) * time.Millisecond
		}
	}
	return model, timeout, nil
}

// workspace is the directory the command runs in ("": the engine's own):
// the spec's, or for a cursor agent one extracted from the thread.
func (a commandAgent) workspace(ctx context.Context, call Call, label string) (string, error) {
	workspace := a.spec.Workspace
	if workspace == "" && a.spec.Kind == KindCursor {
		var err error
		if workspace, err = extractWorkspace(ctx, call); err != nil {
			return "", err
		}
		call.Host.Log("agent", fmt.Sprintf("%s: workspace %s, extracted from the thread context", label, workspace))
	}
	if workspace != "" {
		workspace = threadenv.Of(call.Host).Abs(workspace)
		if st, err := os.Stat(workspace); err != nil || !st.IsDir() {
			return "", fmt.Errorf("%s: workspace %s is not an existing directory", label, workspace)
		}
	}
	return workspace, nil
}

// commandEnv is the thread's environment (of a host that carries none,
// the engine's own) with the spec's variables and the thread's over it.
func commandEnv(vars map[string]string, call Call) []string {
	base := os.Environ()
	if th := threadenv.Of(call.Host); th != nil {
		base = th.Environ()
	}
	env := append(base, sortedEnv(vars)...)
	return append(env,
		"WORKFLOW_THREAD_ID="+call.Thread.ThreadID,
		"WORKFLOW_ROLE="+call.Role,
		"WORKFLOW_DEPTH="+strconv.Itoa(call.Thread.Depth),
	)
}

// arguments sets the command line (and input, and for exec the prompt's
// variable) of inv as the agent's kind takes them; inv.dir is the
// workspace.
func (a commandAgent) arguments(inv *invocation, call Call, prog, prompt, model string) error {
	workspace := inv.dir
	switch a.spec.Kind {
	case KindCursor:
		if model == "" {
			model = "auto"
		}
		inv.argv = []string{prog, "-p", prompt, "--model", model, "--workspace", workspace, "--output-format", "text", "--trust", "--force"}
	case KindHermes:
		inv.argv = []string{prog, "chat", "-q", prompt, "--yolo", "--max-turns", hermesMaxTurns, "--quiet"}
		if model != "" {
			inv.argv = append(inv.argv, "--model", model)
		}
	case KindCLI:
		args, usesPrompt := substitute(a.spec.Args, prompt, model, workspace)
		inv.argv = append([]string{prog}, args...)
		if !usesPrompt {
			inv.stdin = []byte(prompt)
		}
	case KindExec:
		args, _ := substitute(a.spec.Args, prompt, model, workspace)
		inv.argv = append([]string{prog}, args...)
		inv.env = append(inv.env, "WORKFLOW_PROMPT="+prompt)
		var err error
		if inv.stdin, err = execInput(call); err != nil {
			return err
		}
	default:
		return fmt.Errorf("agent: %s is not a command agent", a.spec.Kind)
	}
	return nil
}

func sortedEnv(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	// Deterministic order; os/exec keeps the last of duplicate names, so
	// these override the engine's environment whatever the order.
	sort.Strings(out)
	return out
}

// substitute fills {prompt}, {model} and {workspace} into args and says
// whether any argument took the prompt.
func substitute(args []string, prompt, model, workspace string) ([]string, bool) {
	r := strings.NewReplacer("{prompt}", prompt, "{model}", model, "{workspace}", workspace)
	out := make([]string, len(args))
	used := false
	for i, a := range args {
		used = used || strings.Contains(a, "{prompt}")
		out[i] = r.Replace(a)
	}
	return out, used
}

// execInput is the thread context an exec command reads on stdin.
func execInput(call Call) ([]byte, error) {
	type step struct {
		Role        string          `json:"role"`
		Meta        json.RawMessage `json:"meta"`
		ContentHash string          `json:"contentHash"`
	}
	in := struct {
		ThreadID     string  `json:"threadId"`
		Role         string  `json:"role"`
		Depth        int     `json:"depth"`
		Prompt       string  `json:"prompt"`
		SystemPrompt string  `json:"systemPrompt"`
		ParentState  *string `json:"parentState"`
		Steps        []step  `json:"steps"`
	}{
		ThreadID:     call.Thread.ThreadID,
		Role:         call.Role,
		Depth:        call.Thread.Depth,
		Prompt:       call.Thread.Start.Content,
		SystemPrompt: call.SystemPrompt,
		Steps:        []step{},
	}
	if p := call.Thread.Start.ParentState; p != "" {
		in.ParentState = &p
	}
	for _, s := range call.Thread.Steps {
		meta := s.Meta
		if meta == nil {
			meta = canonyaml.Map{}
		}
		m, err := meta.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("agent: step %s meta: %w", s.Role, err)
		}
		in.Steps = append(in.Steps, step{Role: s.Role, Meta: m, ContentHash: s.ContentHash})
	}
	return json.Marshal(in)
}

// maxArg is Linux's limit on one command-line argument (MAX_ARG_STRLEN).
const maxArg = 128 << 10

// argvTooLong says why the kernel refused argv: usually a prompt passed as
// one argument has outgrown maxArg as the thread grew.
func argvTooLong(argv []string) string {
	longest := 0
	for _, a := range argv {
		longest = max(longest, len(a))
	}
	if longest >= maxArg {
		return fmt.Sprintf("one argument is %d KiB and the system takes at most %d KiB per argument: "+
			"this agent gets the prompt on its command line, and the thread's steps have made it too long "+
			"(a cli agent without {prompt} in its args reads the prompt on stdin instead)", longest>>10, maxArg>>10)
	}
	return "the command line and environment are larger than the system allows"
}
