package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// setup says which model the supervisor and the summarizer use — the
// default one it writes, as the original does, unless workflow.yaml names
// others or turns them off — and how to change that; a rerun keeps a
// summarizer: off the user wrote.
func TestSetupSaysWhatTheSupervisorAndSummarizerUse(t *testing.T) {
	t.Parallel()
	args := []string{"setup", "--provider", "openai", "--base-url", "https://api.openai.com/v1", "--api-key", "sk-test", "--default-model", "openai/gpt-4o"}
	c := newCLI(t)
	out := c.ok(args...)
	for _, want := range []string{
		"\nsupervisor: models.default (openai/gpt-4o), every 3 steps; summarizer: models.default (openai/gpt-4o), as each thread completes\n",
		"\n  in workflow.yaml, models.supervisor and models.summarizer pick other models; supervisorInterval: 0 and summarizer: off turn them off\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("setup lacks %q:\n%s", want, out)
		}
	}

	// Both off in workflow.yaml: a rerun keeps them off and says so.
	path := filepath.Join(c.root, "workflow.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), `"supervisorInterval": 3`, "\"supervisorInterval\": 0\n  summarizer: off", 1)
	if text == string(b) {
		t.Fatalf("no supervisorInterval in:\n%s", b)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	out = c.ok(args...)
	if want := "\nsupervisor: off (supervisorInterval: 0); summarizer: off (summarizer: off)\n"; !strings.Contains(out, want) {
		t.Errorf("setup lacks %q:\n%s", want, out)
	}
	if _, cfg := c.config(t); cfg.Summarizer != "off" || cfg.SupervisorInterval != 0 {
		t.Fatalf("setup dropped the opt-outs: %+v", cfg)
	}
}
