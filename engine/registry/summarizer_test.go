package registry

import (
	"strings"
	"testing"
)

// config.summarizer: off is read as written, survives a rewrite of the
// config section (setup's), and is its only value: anything else is an
// error naming the key, and no key at all leaves the summarizer on.
func TestConfigSummarizerOff(t *testing.T) {
	t.Parallel()
	const base = "workflows: {}\nconfig:\n  maxDepth: 3\n  providers: {p: {baseUrl: u, apiKey: k}}\n  models: {default: p/m}\n"
	r, err := Parse([]byte(base + "  summarizer: off\n"))
	if err != nil || r.Config().Summarizer != SummarizerOff {
		t.Fatalf("summarizer: off: %v, %+v", err, r.Config())
	}
	if err := r.SetConfig(*r.Config()); err != nil {
		t.Fatal(err)
	}
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(b)
	if err != nil || again.Config().Summarizer != SummarizerOff {
		t.Fatalf("after a rewrite (%v):\n%s", err, b)
	}
	if r, err := Parse([]byte(base)); err != nil || r.Config().Summarizer != "" {
		t.Fatalf("no key: %v, %+v", err, r.Config())
	}
	for _, bad := range []string{"on", "false", "no", "'0'", "1", "{}", "Off", "''"} {
		_, err := Parse([]byte(base + "  summarizer: " + bad + "\n"))
		if err == nil || !strings.Contains(err.Error(), `config.summarizer must be "off"`) {
			t.Errorf("summarizer: %s: %v", bad, err)
		}
	}
}
