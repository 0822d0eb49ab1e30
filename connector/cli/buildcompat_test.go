package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/jsrt"
)

// TestBuildKeepsProvidedPackagesExternal: an entry importing the
// original's agent and utility packages builds without them installed,
// and the bundle imports them, as the original's build left every
// @uncaged/* import; the bundle then loads as workflow add loads it.
// Before, build only kept @uncaged/workflow-runtime and failed with
// "Could not resolve".
func TestBuildKeepsProvidedPackagesExternal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	entry := filepath.Join(dir, "workflows", "dev-entry.ts")
	if err := os.MkdirAll(filepath.Dir(entry), 0o755); err != nil {
		t.Fatal(err)
	}
	src := `import { createHermesAgent } from "@uncaged/workflow-agent-hermes";
import { createWorkflow, START, END } from "@uncaged/workflow-runtime";
import { optionalEnv } from "@uncaged/workflow-util";
const definition = {
  description: "d",
  roles: { r: { description: "r", systemPrompt: "p", schema: { type: "object" } } },
  table: { [START]: [{ condition: "FALLBACK", role: "r" }], r: [{ condition: "FALLBACK", role: END }] },
};
export const descriptor = { description: "d", roles: { r: { description: "r", systemPrompt: "p", schema: { type: "object" } } }, graph: { edges: [] } };
export const run = createWorkflow(definition, { adapter: createHermesAgent({ command: "/bin/true", model: optionalEnv("X_MODEL_UNSET"), timeout: null }), overrides: null });
`
	if err := os.WriteFile(entry, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := bundleEntry(entry, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"@uncaged/workflow-agent-hermes", "@uncaged/workflow-runtime", "@uncaged/workflow-util"} {
		if !strings.Contains(string(out), `from "`+pkg+`"`) {
			t.Errorf("the bundle does not import %s:\n%s", pkg, out)
		}
	}
	if _, err := jsrt.Load(out, "dev.esm.js", jsrt.Options{}); err != nil {
		t.Errorf("the bundle does not load: %v", err)
	}
}
