package jsrt

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"

	"github.com/dop251/goja"

	"github.com/uncaged/workflow/engine/agents"
	"github.com/uncaged/workflow/engine/agents/tools"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/threadenv"
)

// compatModules are the original's @uncaged/* packages a bundle built by
// the original's build may import: its build kept them external and the
// original resolved them when the bundle was added. Each is a script in
// js/ that keeps the package's exported API and runs on this engine's own
// agents and CAS (docs/compatibility.md, "Packages").
var compatModules = map[string]string{
	"@uncaged/workflow-agent-cursor": "compat_agent_cursor.js",
	"@uncaged/workflow-agent-hermes": "compat_agent_hermes.js",
	"@uncaged/workflow-agent-llm":    "compat_agent_llm.js",
	"@uncaged/workflow-agent-react":  "compat_agent_react.js",
	"@uncaged/workflow-cas":          "compat_cas.js",
	"@uncaged/workflow-execute":      "compat_execute.js",
	"@uncaged/workflow-protocol":     "compat_protocol.js",
	"@uncaged/workflow-reactor":      "compat_reactor.js",
	"@uncaged/workflow-register":     "compat_register.js",
	"@uncaged/workflow-util":         "compat_util.js",
	"@uncaged/workflow-util-agent":   "compat_util_agent.js",
}

func init() {
	for name, script := range compatModules {
		moduleDefs[name] = moduleDef{public: true, script: script}
	}
	moduleDefs["internal:compat"] = moduleDef{host: (*jsEnv).compatHost}
	moduleDefs["internal:compat_agents"] = moduleDef{script: "compat_agents.js"}
	moduleDefs["internal:zod"] = moduleDef{script: "zod.js"}
	availableList = strings.Join(AvailableModules(), ", ")
}

// ProvidedPackages lists the @uncaged/* specifiers the engine provides,
// sorted: `build` keeps them as imports, as the original's build did.
func ProvidedPackages() []string {
	var out []string
	for _, name := range AvailableModules() {
		if strings.HasPrefix(name, "@") {
			out = append(out, name)
		}
	}
	return out
}

// compatHost is the Go side the compatibility modules share: node parsing
// and serialisation with this engine's node code, the engine's thread
// input, model resolution and workspace tools.
func (e *jsEnv) compatHost() *goja.Object {
	return e.obj(
		// parseNode(yaml) reads a stored thread node as the original's
		// parseCasThreadNode did: {kind, node: {type, payload, refs}}, or
		// null when the text is no thread node.
		"parseNode", func(call goja.FunctionCall) goja.Value {
			n, err := node.Parse([]byte(call.Argument(0).String()))
			if err != nil {
				return goja.Null()
			}
			return e.nodeToJS(n)
		},
		// contentNodeYAML(payload, refs) is a content node's canonical
		// YAML, which cas.put stores unchanged.
		"contentNodeYAML", func(call goja.FunctionCall) goja.Value {
			refs, err := e.hashList(call.Argument(1), "refs")
			if err != nil {
				e.throwTypeError(err.Error())
			}
			b, err := node.NewContent(call.Argument(0).String(), refs).Marshal()
			if err != nil {
				e.throwError(err.Error())
			}
			return e.vm.ToValue(string(b))
		},
		// threadInput(ctx) is the engine's user message for a thread, the
		// text its own agents send (the original's buildThreadInput).
		"threadInput", func(call goja.FunctionCall) goja.Value {
			t, err := e.threadFromJS(call.Argument(0))
			if err != nil {
				e.throwTypeError("buildThreadInput: ctx is not a thread context: " + err.Error())
			}
			return e.vm.ToValue(agents.ThreadInput(t))
		},
		// modelResolves(ref) says whether workflow.yaml names this model.
		"modelResolves", func(call goja.FunctionCall) goja.Value {
			e.requireHost("resolving a model")
			_, err := agentHost(e.host).ResolveModel(call.Argument(0).String())
			return e.vm.ToValue(err == nil)
		},
		// toolDefinitions() is the engine's workspace tools as OpenAI tool
		// definitions (JSON text).
		"toolDefinitions", func(goja.FunctionCall) goja.Value {
			s, err := toolDefinitions()
			if err != nil {
				e.throwError(err.Error())
			}
			return e.vm.ToValue(s)
		},
		// runTool(name, argsJSON) runs one of the engine's workspace tools
		// in the thread's directory and resolves with its text result.
		"runTool", func(call goja.FunctionCall) goja.Value {
			e.requireHost("running a tool")
			name, args := call.Argument(0).String(), call.Argument(1).String()
			th := threadenv.Of(e.host)
			dir := th.Dir()
			return e.async(func(ctx context.Context) (any, error) {
				return runWorkspaceTool(ctx, dir, th, name, args)
			}, func(v any) goja.Value { return e.vm.ToValue(v) })
		},
	)
}

// nodeToJS shapes a parsed node as the original's ParsedCasThreadNode.
func (e *jsEnv) nodeToJS(n node.Node) goja.Value {
	var payload any
	switch x := n.(type) {
	case node.Content:
		payload = x.Payload
	case node.Start:
		payload = e.obj("name", x.Payload.Name, "hash", x.Payload.Hash, "depth", x.Payload.Depth,
			"parentState", nullableString(x.Payload.ParentState))
	case node.State:
		p := x.Payload
		payload = e.obj("role", p.Role, "meta", e.valueToJS(mapOrEmpty(p.Meta)), "start", p.Start, "content", p.Content,
			"ancestors", e.valueToJS(nonNilStrings(p.Ancestors)), "compact", nullableString(p.Compact),
			"timestamp", p.Timestamp, "childThread", nullableString(p.ChildThread))
	}
	return e.obj("kind", n.Type(), "node", e.obj("type", n.Type(), "payload", payload, "refs", e.valueToJS(nonNilStrings(n.References()))))
}

func nullableString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// toolDefinitions lists the engine's workspace tools; definitions do not
// depend on the directory, so the root stands in for one.
func toolDefinitions() (string, error) {
	ws, err := tools.Open(string(os.PathSeparator))
	if err != nil {
		return "", err
	}
	defer func() { _ = ws.Close() }() // a directory handle: nothing was written through it
	list, err := ws.Tools(nil)
	if err != nil {
		return "", err
	}
	type fn struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	type def struct {
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	defs := make([]def, len(list))
	for i, t := range list {
		defs[i] = def{"function", fn{t.Name, t.Description, t.Parameters}}
	}
	b, err := json.Marshal(defs)
	return string(b), err
}

// runWorkspaceTool runs a workspace tool with dir (the thread's directory,
// or the host's working directory) as its workspace, as the original's
// tools resolved paths against the process's working directory. An
// unknown tool is the original's "Unknown tool: <name>" result.
func runWorkspaceTool(ctx context.Context, dir string, th *threadenv.Env, name, args string) (string, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		dir = wd
	}
	if tools.Check([]string{name}) != nil {
		return "Unknown tool: " + name, nil
	}
	ws, err := tools.Open(dir)
	if err != nil {
		return "Error: " + err.Error(), nil
	}
	defer func() { _ = ws.Close() }() // a directory handle: nothing was written through it
	if th != nil {
		ws.Env = th.Environ()
	}
	list, err := ws.Tools([]string{name})
	if err != nil || len(list) != 1 {
		return "", errors.Join(errors.New("tool "+name+" is not available"), err)
	}
	return list[0].Handler(ctx, args)
}
