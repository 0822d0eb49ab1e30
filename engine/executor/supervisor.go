package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/uncaged/workflow/engine/agents/llm"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/usage"
	"github.com/uncaged/workflow/engine/workflow"
)

// Model scenes of workflow.yaml's config.models for the supervisor and the
// summarizer. Both run by default, as the original's do: each with its own
// scene when config.models names it, else models.default (the summarizer
// first tries models.extract, whose model the original summarizes with).
// supervisorInterval: 0 turns the supervisor off, summarizer: off the
// summarizer (OversightScenes).
const (
	SceneSupervisor = "supervisor"
	SceneSummarizer = "summarizer"
	sceneExtract    = "extract"
	sceneDefault    = "default"
)

// OversightScenes says which config.models entry the supervisor and the
// summarizer use under cfg, "" for one that is off: switched off, or no
// model to use (no config, or none of its scenes in config.models).
func OversightScenes(cfg *registry.Config) (supervisor, summarizer string) {
	if cfg == nil {
		return "", ""
	}
	if cfg.SupervisorInterval > 0 {
		supervisor = firstScene(cfg, SceneSupervisor, sceneDefault)
	}
	if cfg.Summarizer != registry.SummarizerOff {
		summarizer = firstScene(cfg, SceneSummarizer, sceneExtract, sceneDefault)
	}
	return supervisor, summarizer
}

// firstScene is the first of scenes config.models names, "" for none.
func firstScene(cfg *registry.Config, scenes ...string) string {
	for _, s := range scenes {
		if _, ok := cfg.Models[s]; ok {
			return s
		}
	}
	return ""
}

// SummarySupervisorKilled ends a thread the supervisor stopped.
const SummarySupervisorKilled = "killed: supervisor detected pathological behavior"

// Debug-log tags of the supervisor (as the original's).
const (
	TagSupervisorSays    = "Z8KM5QWT"
	TagSupervisorSkipped = "K6PW9NYT"
	TagSupervisorKilled  = "M4QX8VHN"
)

// oversightTimeout bounds one supervisor or summarizer run, so an endpoint
// that keeps a stream open without ever answering cannot hold the thread.
const oversightTimeout = 5 * time.Minute

const (
	supervisorRecentSteps = 12
	supervisorMaxRounds   = 4
	supervisorSchema      = `{"title":"supervisor_decision",` +
		`"description":"Workflow supervisor decision: \"continue\" while the thread makes progress; \"kill\" when it is looping, stuck or otherwise pathological.",` +
		`"type":"object","properties":{` +
		`"decision":{"type":"string","enum":["continue","kill"]},` +
		`"reason":{"type":"string","description":"Why, in one sentence"}},` +
		`"required":["decision"]}`
)

// oversight is what a run knows of the supervisor and summarizer: the
// config they were chosen by, and the steps they look at.
type oversight struct {
	cfg *registry.Config // nil: no config, both are off
	// steps are all of the thread's role steps so far, oldest first
	// (those of a resumed chain included).
	steps []workflow.RoleStep
	// written counts the steps this run wrote; the supervisor runs every
	// supervisorInterval of them.
	written int
	// stepCount is len(steps), for the usage records agents write from
	// their own goroutines.
	stepCount atomic.Int64
}

// loadOversight reads workflow.yaml once per run. A registry that cannot
// be read only switches the supervisor and summarizer off; the thread
// still runs.
func (r *run) loadOversight() {
	r.over.steps = append([]workflow.RoleStep(nil), r.steps()...)
	r.over.stepCount.Store(int64(len(r.over.steps)))
	reg, err := registry.Load(r.e.Layout.RegistryFile())
	if err != nil {
		r.log.Write(TagSupervisorSkipped, fmt.Sprintf("supervisor and summarizer off: %v", err))
		return
	}
	r.over.cfg = reg.Config()
}

// oversightModel resolves the model of scene ("" when off: on is false).
func (r *run) oversightModel(scene string) (m registry.Model, on bool, err error) {
	if scene == "" {
		return registry.Model{}, false, nil
	}
	m, err = r.over.cfg.ResolveModel(scene, r.Getenv)
	return m, true, r.ThreadEnv().Explain(err)
}

// stepDone records a step the run wrote, for the supervisor and summarizer.
func (r *run) stepDone(out *workflow.Output) {
	r.over.written++
	r.over.steps = append(r.over.steps, workflow.RoleStep{Role: out.Role, Meta: out.Meta, ContentHash: out.ContentHash})
	r.over.stepCount.Store(int64(len(r.over.steps)))
}

// supervise runs the supervisor when it is on and due, and
// reports whether it decided to kill the thread. Its failures never stop
// the thread: they are logged and the thread goes on.
func (r *run) supervise(ctx context.Context) bool {
	scene, _ := OversightScenes(r.over.cfg)
	if scene == "" || r.over.written%r.over.cfg.SupervisorInterval != 0 {
		return false
	}
	model, _, err := r.oversightModel(scene)
	decision, reason := "", ""
	if err == nil {
		decision, reason, err = r.askSupervisor(ctx, model)
	}
	if err != nil {
		if ctx.Err() == nil {
			r.log.Write(TagSupervisorSkipped, "supervisor skipped: "+err.Error())
		}
		return false
	}
	line := "supervisor says " + decision
	if reason != "" {
		line += ": " + reason
	}
	r.log.Write(TagSupervisorSays, line)
	if decision != "kill" || ctx.Err() != nil {
		// A thread killed or stopped meanwhile ends the way that says.
		return false
	}
	r.log.Write(TagSupervisorKilled, fmt.Sprintf("thread %s killed by supervisor", r.t.ID))
	return true
}

func (r *run) askSupervisor(ctx context.Context, model registry.Model) (decision, reason string, err error) {
	const tool = "supervisor_decision"
	ctx, cancel := context.WithTimeout(ctx, oversightTimeout)
	defer cancel()
	// The supervisor judges the step just written: its calls count there.
	raw, err := llm.React(ctx, r.client(model, usage.SourceSupervisor, r.lastStep), llm.Request{
		System: `You supervise a multi-step workflow. Decide whether the thread should keep running. Answer "continue" when it is making progress toward the task, ` +
			`or "kill" when it is looping, repeating itself, stuck, or doing something harmful or unrelated to the task. ` +
			`Call the ` + tool + ` tool with JSON arguments matching the schema, or reply with only a JSON object such as {"decision":"continue"}.`,
		User:      r.supervisorInput(),
		Output:    llm.Output{Schema: json.RawMessage(supervisorSchema)},
		MaxRounds: supervisorMaxRounds,
		Log:       r.log.Write,
	})
	if err != nil {
		return "", "", err
	}
	var d struct {
		Decision string `json:"decision"`
		Reason   string `json:"reason"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return "", "", fmt.Errorf("decision: %w", err)
	}
	if d.Decision == "" {
		return "", "", errors.New("decision: empty")
	}
	return d.Decision, strings.TrimSpace(d.Reason), nil
}

// supervisorInput is the task and the last steps with their meta.
func (r *run) supervisorInput() string {
	var b strings.Builder
	b.WriteString("Original task:\n")
	b.WriteString(r.t.Prompt)
	b.WriteString("\n\nRecent steps (oldest first):\n")
	steps := lastSteps(r.over.steps, supervisorRecentSteps)
	if len(steps) == 0 {
		b.WriteString("(none)")
	}
	for i, s := range steps {
		if i > 0 {
			b.WriteByte('\n')
		}
		meta := []byte("{}")
		if s.Meta != nil {
			if m, err := json.Marshal(s.Meta); err == nil {
				meta = m
			}
		}
		fmt.Fprintf(&b, "%d. [%s] %s", i+1, s.Role, meta)
	}
	return b.String()
}

func lastSteps(steps []workflow.RoleStep, n int) []workflow.RoleStep {
	if len(steps) > n {
		return steps[len(steps)-n:]
	}
	return steps
}
