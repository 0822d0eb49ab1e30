package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/uncaged/workflow/engine/agents"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/yamlwf"
)

// What `workflow add` checks of a YAML workflow beyond its format: what
// would otherwise fail only when a thread reaches the role.

// checkPrograms refuses a workflow whose agents name a program that is not
// there: a path (relative ones against dir, the YAML file's directory, as
// ResolvePaths makes them) that is not an executable file, or a bare name
// not found on pathEnv (the PATH the thread will run with: the CLI's
// own). An agent that names no command (cursor, hermes) finds its default
// when it runs, and is not checked.
func checkPrograms(def *yamlwf.Definition, dir, pathEnv string) error {
	var problems []*yamlwf.Error
	for _, r := range def.Roles {
		s := r.Agent
		switch s.Kind {
		case agents.KindExec, agents.KindCLI, agents.KindCursor, agents.KindHermes:
		default:
			continue
		}
		if s.Command == "" {
			continue
		}
		if msg := missingProgram(s.Command, dir, pathEnv); msg != "" {
			problems = append(problems, &yamlwf.Error{Path: "roles." + r.Name + ".agent", Line: r.Line(), Msg: s.Kind + " " + msg})
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return &yamlwf.ErrorList{Problems: problems}
}

// missingProgram says what is wrong with the program command names ("" when
// it can be run): `program "./x.sh" not found: /abs/x.sh does not exist`.
func missingProgram(command, dir, pathEnv string) string {
	if strings.Contains(command, "/") {
		p := command
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		st, err := os.Stat(p)
		switch {
		case err != nil:
			return fmt.Sprintf("program %q not found: %s does not exist", command, p)
		case st.IsDir():
			return fmt.Sprintf("program %q is a directory: %s", command, p)
		case st.Mode().Perm()&0o111 == 0:
			return fmt.Sprintf("program %q is not executable: %s (chmod +x it)", command, p)
		}
		return ""
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		if st, err := os.Stat(filepath.Join(d, command)); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return ""
		}
	}
	if pathEnv == "" {
		return fmt.Sprintf("program %q not found: PATH is empty (give its absolute path)", command)
	}
	return fmt.Sprintf("program %q not found on PATH (%s); give its path, or install it", command, pathEnv)
}

// modelWarnings are what `workflow add` says about roles whose agent calls
// a model (llm, react) that workflow.yaml's config cannot resolve — before
// any setup there is none: the workflow registers, its threads would fail
// at that role.
func modelWarnings(def *yamlwf.Definition, cfg *registry.Config) []string {
	var unset []string
	var out []string
	for _, r := range def.Roles {
		s := r.Agent
		if s.Kind != agents.KindLLM && s.Kind != agents.KindReact {
			continue
		}
		if cfg == nil {
			unset = append(unset, r.Name)
			continue
		}
		ref := s.Model
		if ref == "" {
			ref = "default"
		}
		// API keys given as env: references are read when the role runs,
		// in the thread's environment: not checked here.
		if _, err := cfg.ResolveRef(ref, func(string) string { return "set" }); err != nil {
			out = append(out, fmt.Sprintf("line %d: roles.%s.agent: model %q cannot be resolved: %v; run `uncaged-workflow setup`, or add it to config.models in workflow.yaml", r.Line(), r.Name, ref, err))
		}
	}
	if len(unset) > 0 {
		out = append([]string{fmt.Sprintf("%s %s a model, but no model is set up yet: run `uncaged-workflow setup` before running it",
			roleList(unset), map[bool]string{true: "calls", false: "call"}[len(unset) == 1])}, out...)
	}
	return out
}

// roleList names roles in a sentence: "role a", "roles a and b",
// "roles a, b and c".
func roleList(names []string) string {
	if len(names) == 1 {
		return "role " + names[0]
	}
	return "roles " + strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
