package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/registry"
)

// runWithInput runs a command with stdin fed from input, as a pipe would.
func (c *cli) runWithInput(input string, args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = Run(args, Env{Stdin: strings.NewReader(input), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return c.env[k] }})
	return out.String(), errb.String(), code
}

func (c *cli) config(t *testing.T) (*registry.Registry, *registry.Config) {
	t.Helper()
	r, err := registry.Load(filepath.Join(c.root, "workflow.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := r.Config()
	if cfg == nil {
		t.Fatal("workflow.yaml has no config")
	}
	return r, cfg
}

func TestSetupWritesProviderAndDefaults(t *testing.T) {
	c := newCLI(t)
	inDir(t, t.TempDir())
	out := c.ok("setup", "--provider", "openai", "--base-url", "https://api.openai.com/v1", "--api-key", "sk-test", "--default-model", "openai/gpt-4o")
	want := "wrote registry: " + filepath.Join(c.root, "workflow.yaml") + "\n" +
		"provider \"openai\" (baseUrl + apiKey updated)\n" +
		"config.models.default = \"openai/gpt-4o\"\n" +
		"maxDepth=3, supervisorInterval=3\n" +
		"supervisor: models.default (openai/gpt-4o), every 3 steps; summarizer: models.default (openai/gpt-4o), as each thread completes\n" +
		"  in workflow.yaml, models.supervisor and models.summarizer pick other models; supervisorInterval: 0 and summarizer: off turn them off\n"
	if out != want {
		t.Fatalf("stdout = %q\nwant %q", out, want)
	}
	_, cfg := c.config(t)
	if cfg.MaxDepth != 3 || cfg.SupervisorInterval != 3 || cfg.Models["default"] != "openai/gpt-4o" ||
		cfg.Providers["openai"] != (registry.Provider{BaseURL: "https://api.openai.com/v1", APIKey: "sk-test"}) {
		t.Fatalf("config = %+v", cfg)
	}
	if _, err := os.Stat("workflows"); !os.IsNotExist(err) {
		t.Fatal("setup without --init-workspace created a workspace")
	}
}

func TestSetupIsIdempotentAndPreservesTheRest(t *testing.T) {
	c := newCLI(t)
	inDir(t, t.TempDir())
	if err := os.MkdirAll(c.root, 0o755); err != nil {
		t.Fatal(err)
	}
	existing := `config:
  maxDepth: 7
  supervisorInterval: 2
  providers:
    local:
      baseUrl: http://127.0.0.1:9/v1
      apiKey: env:LOCAL_KEY
  models:
    default: local/m1
    extract: local/m2
workflows:
  demo-flow:
    hash: HEXEJQQQ6EVYJ
    timestamp: 1778000000000
    history: []
`
	if err := os.WriteFile(filepath.Join(c.root, "workflow.yaml"), []byte(existing), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"setup", "--provider", "openai", "--base-url", "https://api.openai.com/v1", "--api-key", "sk-one", "--default-model", "openai/gpt-4o"}
	if out := c.ok(args...); !strings.Contains(out, "maxDepth=7, supervisorInterval=2\n") {
		t.Fatalf("stdout = %q", out)
	}
	args[6] = "sk-two"
	c.ok(args...)
	first := readText(t, filepath.Join(c.root, "workflow.yaml"))
	c.ok(args...)
	if again := readText(t, filepath.Join(c.root, "workflow.yaml")); again != first {
		t.Fatalf("a repeated setup changed workflow.yaml:\n%s\n---\n%s", first, again)
	}
	r, cfg := c.config(t)
	if cfg.MaxDepth != 7 || cfg.SupervisorInterval != 2 || cfg.Providers["openai"].APIKey != "sk-two" ||
		cfg.Providers["local"].APIKey != "env:LOCAL_KEY" || cfg.Models["extract"] != "local/m2" || cfg.Models["default"] != "openai/gpt-4o" {
		t.Fatalf("config = %+v", cfg)
	}
	if e, ok := r.Get("demo-flow"); !ok || e.Hash != "HEXEJQQQ6EVYJ" {
		t.Fatal("workflows not preserved")
	}
}

func TestSetupArgumentErrorsChangeNothing(t *testing.T) {
	c := newCLI(t)
	inDir(t, t.TempDir())
	c.ok("setup", "--provider", "p", "--base-url", "http://127.0.0.1:9/v1", "--api-key", "k", "--default-model", "p/m")
	before := c.snapshot()
	full := func(extra ...string) []string {
		return append([]string{"setup", "--provider", "openai", "--base-url", "https://api.openai.com/v1", "--api-key", "sk", "--default-model", "openai/gpt-4o"}, extra...)
	}
	usageErrors := []struct {
		args []string
		want string
	}{
		{[]string{"setup", "--bogus"}, "unknown argument: --bogus"},
		{[]string{"setup", "extra"}, "unknown argument: extra"},
		{[]string{"setup", "--provider"}, "--provider requires a value"},
		{[]string{"setup", "--provider", "--base-url", "x"}, "--provider requires a value"},
		{[]string{"setup", "--base-url", "https://x"}, "non-interactive setup requires --provider (or omit all flags for interactive mode)"},
		{[]string{"setup", "--provider", "openai"}, "missing required flag(s): --base-url, --api-key, --default-model"},
		{[]string{"setup", "--provider", "openai", "--api-key", "k"}, "missing required flag(s): --base-url, --default-model"},
		{full("--init-workspace"), "--init-workspace requires a value"},
	}
	for _, tc := range usageErrors {
		out, errs, code := c.run(tc.args...)
		if code != 1 || out != "" || !strings.HasPrefix(errs, tc.want+"\n\nuncaged-workflow setup — configure") {
			t.Errorf("%v: %d %q %q", tc.args, code, out, errs)
		}
	}
	valueErrors := []struct {
		args []string
		want string
	}{
		{[]string{"setup", "--provider", "openai", "--base-url", "https://api.openai.com/v1", "--api-key", "sk", "--default-model", "xai/grok"},
			`default model provider "xai" must match --provider "openai"`},
		{[]string{"setup", "--provider", "openai", "--base-url", "https://api.openai.com/v1", "--api-key", "sk", "--default-model", "gpt-4o"},
			`invalid default model "gpt-4o"`},
		{[]string{"setup", "--provider", "openai", "--base-url", "api.openai.com", "--api-key", "sk", "--default-model", "openai/gpt-4o"},
			`invalid base URL "api.openai.com"`},
		{[]string{"setup", "--provider", "a/b", "--base-url", "https://x", "--api-key", "sk", "--default-model", "a/b/c"},
			`invalid provider name: "a/b"`},
		{[]string{"setup", "--provider", "openai", "--base-url", "https://x", "--api-key", " ", "--default-model", "openai/m"},
			"--api-key must not be empty"},
		{full("--init-workspace", ".."), "invalid workspace path: .."},
	}
	for _, tc := range valueErrors {
		c.fails(tc.want, tc.args...)
	}
	if err := os.Mkdir("taken", 0o755); err != nil {
		t.Fatal(err)
	}
	c.fails("directory already exists: ", full("--init-workspace", "taken")...)
	c.unchanged(before)
}

func TestSetupInitWorkspace(t *testing.T) {
	c := newCLI(t)
	dir := t.TempDir()
	inDir(t, dir)
	out := c.ok("setup", "--provider", "openai", "--base-url", "https://api.openai.com/v1", "--api-key", "sk", "--default-model", "openai/gpt-4o", "--init-workspace", "flows")
	if !strings.HasSuffix(out, "initialized workflow workspace at "+filepath.Join(dir, "flows")+"\n") {
		t.Fatalf("stdout = %q", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "flows", "workflows", "hello-entry.ts")); err != nil {
		t.Fatal(err)
	}
}

func TestSetupHelp(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, flag := range []string{"--help", "-h"} {
		out := c.ok("setup", flag)
		if !strings.HasPrefix(out, "uncaged-workflow setup — configure workflow.yaml providers and default model\n") ||
			!strings.Contains(out, "--default-model <provider/model>") || !strings.Contains(out, "UNCAGED_WORKFLOW_STORAGE_ROOT") {
			t.Fatalf("setup %s = %q", flag, out)
		}
	}
	if _, err := os.Stat(c.root); !os.IsNotExist(err) {
		t.Fatal("setup --help touched the storage root")
	}
}

// modelsServer is an OpenAI-compatible /models endpoint that wants key.
func modelsServer(t *testing.T, key string, ids ...string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, `{"error":"bad key"}`, http.StatusUnauthorized)
			return
		}
		data := []map[string]string{}
		for _, id := range ids {
			data = append(data, map[string]string{"id": id, "object": "model"})
		}
		if err := json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data}); err != nil {
			t.Error(err)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// usePresets makes interactive setup offer these providers.
func usePresets(t *testing.T, yamlText string) {
	t.Helper()
	saved := setupPresets
	setupPresets = []byte(yamlText)
	t.Cleanup(func() { setupPresets = saved })
}

func TestInteractiveSetupWithPresetAndModelList(t *testing.T) {
	srv := modelsServer(t, "sk-live", "zeta-chat", "text-embedding-3-small", "alpha-chat", "tts-1", "vendor/mid-chat")
	usePresets(t, "- {name: first, label: First, baseUrl: http://127.0.0.1:9/v1}\n- {name: local, label: Local test, baseUrl: "+srv.URL+"/v1}\n")
	c := newCLI(t)
	dir := t.TempDir()
	inDir(t, dir)
	// provider 2, key, model number 3, workspace default (./workflows).
	out, errs, code := c.runWithInput("2\nsk-live\n3\n\n", "setup")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	for _, s := range []string{"Select a provider:", "1) First", "2) Local test", "3) Custom (enter name and URL manually)",
		"→ Local test (" + srv.URL + "/v1)", "Available models (3):", "1) alpha-chat", "2) vendor/mid-chat", "3) zeta-chat",
		"→ local/zeta-chat", "wrote registry:", "config.models.default = \"local/zeta-chat\"",
		"initialized workflow workspace at " + filepath.Join(dir, "workflows")} {
		if !strings.Contains(out, s) {
			t.Errorf("stdout lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "embedding") || strings.Contains(out, "tts-1") {
		t.Error("non-chat models offered")
	}
	if strings.Contains(out, "sk-live") {
		t.Error("the API key was echoed")
	}
	_, cfg := c.config(t)
	if cfg.Providers["local"] != (registry.Provider{BaseURL: srv.URL + "/v1", APIKey: "sk-live"}) || cfg.Models["default"] != "local/zeta-chat" {
		t.Fatalf("config = %+v", cfg)
	}

	// A vendor path in a model id is kept; the workspace prompt re-asks
	// when the directory exists, and 'skip' skips.
	c2 := newCLI(t)
	out, errs, code = c2.runWithInput("2\nsk-live\nvendor/mid-chat\nworkflows\nSKIP\n", "setup")
	if code != 0 || !strings.Contains(out, "→ local/vendor/mid-chat") || !strings.Contains(errs, "directory already exists: "+filepath.Join(dir, "workflows")) ||
		strings.Contains(out, "initialized workflow workspace") {
		t.Fatalf("second run: %d\n%s\n%s", code, out, errs)
	}
	_, cfg = c2.config(t)
	if cfg.Models["default"] != "local/vendor/mid-chat" {
		t.Fatalf("default model = %q", cfg.Models["default"])
	}
}

func TestInteractiveSetupCustomProviderAndUnreachableModels(t *testing.T) {
	srv := modelsServer(t, "right-key", "m1")
	usePresets(t, "- {name: only, label: Only, baseUrl: http://127.0.0.1:9/v1}\n")
	c := newCLI(t)
	inDir(t, t.TempDir())
	// Custom provider; the key is wrong, so listing fails and the model is typed.
	out, errs, code := c.runWithInput("2\nmy-proxy\n"+srv.URL+"/v1\nwrong-key\nmy-proxy/big-model\nskip\n", "setup")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(errs, "could not fetch models: GET "+srv.URL+"/v1/models returned 401") || !strings.Contains(out, "Default model (e.g.") {
		t.Fatalf("fallback not offered:\n%s\n%s", out, errs)
	}
	_, cfg := c.config(t)
	if cfg.Providers["my-proxy"].BaseURL != srv.URL+"/v1" || cfg.Models["default"] != "my-proxy/big-model" {
		t.Fatalf("config = %+v", cfg)
	}
}

func TestInteractiveSetupRejectsBadAnswers(t *testing.T) {
	srv := modelsServer(t, "k", "m1")
	usePresets(t, "- {name: local, label: Local, baseUrl: "+srv.URL+"/v1}\n")
	cases := []struct{ input, want string }{
		{"", "setup cancelled: end of input"},
		{"9\n", "invalid choice: 9"},
		{"one\n", "invalid choice: one"},
		{"2\n\n", "provider name must not be empty"},
		{"2\nbad/name\n", `invalid provider name: "bad/name"`},
		{"2\nx\n\n", "base URL must not be empty"},
		{"2\nx\nftp://host\n", `invalid base URL "ftp://host"`},
		{"1\n\n", "API key must not be empty"},
		{"1\nk\n\n", "default model must not be empty"},
		{"1\nk\n", "setup cancelled: end of input"},
	}
	for _, tc := range cases {
		c := newCLI(t)
		inDir(t, t.TempDir())
		_, errs, code := c.runWithInput(tc.input, "setup")
		if code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("input %q: exit %d, stderr %q lacks %q", tc.input, code, errs, tc.want)
		}
		if _, err := os.Stat(c.root); !os.IsNotExist(err) {
			t.Errorf("input %q: storage written", tc.input)
		}
	}
}

func TestProviderPresets(t *testing.T) {
	t.Parallel()
	presets, err := loadPresets(providersYAML)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range presets {
		names = append(names, p.Name)
		if p.Label == "" || checkBaseURL(p.BaseURL) != nil {
			t.Errorf("preset %+v", p)
		}
	}
	want := "openai xai openrouter venice dashscope deepseek siliconflow volcengine kimi glm glm-intl stepfun minimax tencent xiaomi ollama"
	if strings.Join(names, " ") != want {
		t.Fatalf("presets = %v", names)
	}
	for _, bad := range []string{"- {name: x, label: X}\n", "- {name: x, label: 1, baseUrl: [a]}\n", "- just-a-string\n"} {
		if _, err := loadPresets([]byte(bad)); err == nil || !strings.Contains(err.Error(), "providers.yaml: invalid entry:") {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
	if _, err := loadPresets([]byte("name: not-a-list\n")); err == nil {
		t.Error("a mapping was accepted as the preset list")
	}
}
