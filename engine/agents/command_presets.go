package agents

// The cursor and hermes presets of the cli agent: their programs, argv and
// defaults, and how a cursor agent without a workspace finds one.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/uncaged/workflow/engine/node"
)

// presetDefaults are the environment variables a preset reads its
// defaults from (WORKFLOW_CURSOR_* and WORKFLOW_HERMES_*).
type presetDefaults struct {
	commandVar, modelVar, timeoutVar string
	command                          string
}

var presets = map[string]presetDefaults{
	KindCursor: {"WORKFLOW_CURSOR_COMMAND", "WORKFLOW_CURSOR_MODEL", "WORKFLOW_CURSOR_TIMEOUT", "cursor-agent"},
	KindHermes: {"WORKFLOW_HERMES_COMMAND", "WORKFLOW_HERMES_MODEL", "WORKFLOW_HERMES_TIMEOUT", "hermes"},
}

// workspaceSchema is what extractWorkspace asks the extract model for.
const workspaceSchema = `{"type":"object","properties":{"workspace":{"type":"string","description":"Absolute filesystem path of the project workspace"}},"required":["workspace"]}`

// errNoWorkspace is the original's message when no usable path was found;
// it tells the user where the path has to appear.
//
//lint:ignore ST1005 the text is the original's, word for word (tests compare it)
var errNoWorkspace = errors.New("cursor-agent: failed to extract workspace path from context. Ensure the task prompt or previous steps include a project path.")

// extractWorkspace derives a cursor agent's workspace from the thread (the
// original's extractWorkspacePath): the task and each
// step's meta go into a content node, and the host's extract model reads
// the path out of it. Only an absolute path is accepted — a relative one
// would resolve against the engine's working directory.
func extractWorkspace(ctx context.Context, call Call) (string, error) {
	var b strings.Builder
	b.WriteString("## Task\n")
	b.WriteString(call.Thread.Start.Content)
	for _, st := range call.Thread.Steps {
		fmt.Fprintf(&b, "\n\n## Step: %s\nMeta: %s", st.Role, metaJSON(st))
	}
	b.WriteString("\n\nExtract the absolute filesystem path of the project workspace where code changes should be made.")
	hash, err := call.Host.CAS().PutNode(node.NewContent(b.String(), nil))
	if err != nil {
		return "", fmt.Errorf("cursor-agent: storing the workspace extraction input: %w", err)
	}
	ex, err := call.Host.Extract(ctx, []byte(workspaceSchema), hash)
	if err != nil {
		return "", fmt.Errorf("%w (extract: %w)", errNoWorkspace, err)
	}
	v, _ := ex.Meta.Get("workspace")
	ws, _ := v.(string)
	ws = strings.TrimSpace(ws)
	if !filepath.IsAbs(ws) {
		call.Host.Log("agent", fmt.Sprintf("cursor-agent: workspace extraction returned %q, not an absolute path", ws))
		return "", errNoWorkspace
	}
	return filepath.Clean(ws), nil
}
