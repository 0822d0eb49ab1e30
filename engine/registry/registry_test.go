package registry

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func TestValidateName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"solve-issue", "a", "a1", "fix-bug-2", "x9-y8"} {
		if err := ValidateName(ok); err != nil {
			t.Errorf("%q rejected: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Solve", "1abc", "-a", "a-", "a--b", "a_b", "a b", "../x", "a/b", "ünï"} {
		err := ValidateName(bad)
		if err == nil || !strings.HasPrefix(err.Error(), "invalid workflow name: use verb-first kebab-case") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestParseEmptyAndErrors(t *testing.T) {
	t.Parallel()
	for _, blank := range []string{"", "  \n\t\n"} {
		r, err := Parse([]byte(blank))
		if err != nil || len(r.Names()) != 0 || r.Config() != nil {
			t.Errorf("blank: %v %v", r, err)
		}
	}
	cases := map[string]string{
		"- a\n":                "registry root must be a mapping",
		"hello\n":              "registry root must be a mapping",
		"config: null\n":       `registry must contain a "workflows" mapping`,
		"workflows: [a]\n":     `registry must contain a "workflows" mapping`,
		"workflows:\n  a: 1\n": `workflow "a" must be a mapping`,
		"workflows:\n  a: {timestamp: 1, history: []}\n":                                                    `workflow "a" must have a string hash`,
		"workflows:\n  a: {hash: H, timestamp: x, history: []}\n":                                           `workflow "a" must have a finite numeric timestamp`,
		"workflows:\n  a: {hash: H, timestamp: .inf, history: []}\n":                                        `workflow "a" must have a finite numeric timestamp`,
		"workflows:\n  a: {hash: H, timestamp: 1}\n":                                                        `workflow "a" must have a history array`,
		"workflows:\n  a: {hash: H, timestamp: 1, history: [1]}\n":                                          `workflow "a" history[0] must be a mapping`,
		"workflows:\n  a: {hash: H, timestamp: 1, history: [{hash: H}]}\n":                                  `workflow "a" history[0] must have hash and timestamp`,
		"workflows: {}\nconfig: 1\n":                                                                        `registry "config" must be a mapping`,
		"workflows: {}\nconfig: {maxDepth: -1}\n":                                                           "config.maxDepth must be a non-negative integer",
		"workflows: {}\nconfig: {maxDepth: 1.5}\n":                                                          "config.maxDepth must be a non-negative integer",
		"workflows: {}\nconfig: {providers: {}, models: {}}\n":                                              "config.maxDepth must be a non-negative integer",
		"workflows: {}\nconfig: {maxDepth: 1, supervisorInterval: x}\n":                                     "config.supervisorInterval must be a non-negative integer",
		"workflows: {}\nconfig: {maxDepth: 1}\n":                                                            `registry config must contain a "providers" mapping`,
		"workflows: {}\nconfig: {maxDepth: 1, providers: {'': {}}}\n":                                       "config.providers must not contain an empty provider name",
		"workflows: {}\nconfig: {maxDepth: 1, providers: {p: 1}}\n":                                         "config.providers.p must be a mapping",
		"workflows: {}\nconfig: {maxDepth: 1, providers: {p: {apiKey: k}}}\n":                               "config.providers.p.baseUrl must be a non-empty string",
		"workflows: {}\nconfig: {maxDepth: 1, providers: {p: {baseUrl: u, apiKey: ''}}}\n":                  "config.providers.p.apiKey must be a non-empty string",
		"workflows: {}\nconfig: {maxDepth: 1, providers: {p: {baseUrl: u, apiKey: 'env:'}}}\n":              `"env:" apiKey reference must name a variable`,
		"workflows: {}\nconfig: {maxDepth: 1, providers: {p: {baseUrl: u, apiKey: k}}}\n":                   `registry config must contain a "models" mapping`,
		"workflows: {}\nconfig: {maxDepth: 1, providers: {p: {baseUrl: u, apiKey: k}}, models: {'': x}}\n":  "config.models must not contain an empty scene name",
		"workflows: {}\nconfig: {maxDepth: 1, providers: {p: {baseUrl: u, apiKey: k}}, models: {d: 3}}\n":   "config.models.d must be a non-empty string (provider/model)",
		"workflows: {}\nconfig: {maxDepth: 1, providers: {p: {baseUrl: u, apiKey: k}}, models: {d: pm}}\n":  `config.models.d: invalid model reference "pm": expected providerName/modelName`,
		"workflows: {}\nconfig: {maxDepth: 1, providers: {p: {baseUrl: u, apiKey: k}}, models: {d: q/m}}\n": `config.models.d: unknown provider "q" (not listed under config.providers)`,
		"workflows: {a: [\n": "invalid YAML",
	}
	for in, want := range cases {
		_, err := Parse([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", in, err, want)
		}
	}
}

const sampleRegistry = `config:
  maxDepth: 3
  supervisorInterval: 2
  providers:
    dashscope:
      baseUrl: https://dashscope.example/v1
      apiKey: env:DASH_KEY
  models:
    default: dashscope/qwen-plus
    extract: dashscope/qwen/turbo
workflows:
  solve-issue:
    hash: "SPVR4BDMSGC1W"
    timestamp: 1716000000000
    history:
      - hash: "2BMJPQ6YAK3WG"
        timestamp: 1715000000000
`

func TestRoundTripKeepsConfigAndEnvReferences(t *testing.T) {
	t.Parallel()
	r, err := Parse([]byte(sampleRegistry))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Warnings) != 0 {
		t.Errorf("warnings: %v", r.Warnings)
	}
	c := r.Config()
	if c == nil || c.MaxDepth != 3 || c.SupervisorInterval != 2 || c.Providers["dashscope"].APIKey != "env:DASH_KEY" {
		t.Fatalf("config = %+v", c)
	}
	out, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"apiKey": "env:DASH_KEY"`) || !strings.HasPrefix(string(out), `"config":`) || !strings.HasSuffix(string(out), "\n\n") {
		t.Errorf("written registry:\n%s", out)
	}
	back, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Config(), c) {
		t.Errorf("config changed over a round trip: %+v vs %+v", back.Config(), c)
	}
	e, _ := back.Get("solve-issue")
	if e.Hash != "SPVR4BDMSGC1W" || e.Timestamp != 1716000000000 || len(e.History) != 1 {
		t.Errorf("entry = %+v", e)
	}
}

func TestResolveModel(t *testing.T) {
	t.Parallel()
	r, _ := Parse([]byte(sampleRegistry))
	c := r.Config()
	env := map[string]string{"DASH_KEY": "sk-1"}
	m, err := c.ResolveModel("extract", func(k string) string { return env[k] })
	if err != nil || m.Model != "qwen/turbo" || m.APIKey != "sk-1" || m.BaseURL != "https://dashscope.example/v1" {
		t.Fatalf("extract = %+v, %v", m, err)
	}
	m, err = c.ResolveModel("supervisor", func(k string) string { return env[k] })
	if err != nil || m.Model != "qwen-plus" {
		t.Fatalf("fallback = %+v, %v", m, err)
	}
	_, err = c.ResolveModel("default", func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), `environment variable "DASH_KEY" is not set`) {
		t.Fatalf("unset env: %v", err)
	}
	delete(c.Models, "default")
	if _, err := c.ResolveModel("other", nil); err == nil || !strings.Contains(err.Error(), `no model mapping for scene "other" and no models.default fallback`) {
		t.Fatalf("no default: %v", err)
	}
	noDefault := "workflows: {}\nconfig: {maxDepth: 1, providers: {p: {baseUrl: u, apiKey: k}}, models: {x: p/m}}\n"
	r2, err := Parse([]byte(noDefault))
	if err != nil || len(r2.Warnings) != 1 {
		t.Fatalf("missing default should warn: %v %v", r2.Warnings, err)
	}
}

func TestRegisterRollbackUnregister(t *testing.T) {
	t.Parallel()
	r := New()
	for i, tc := range []struct {
		hash    string
		at      int64
		changed bool
	}{{"H1", 1, true}, {"H2", 2, true}, {"H2", 3, false}, {"H3", 3, true}} {
		if got := r.Register("solve", tc.hash, tc.at); got != tc.changed {
			t.Fatalf("register #%d (%s) changed = %v, want %v", i+1, tc.hash, got, tc.changed)
		}
	}
	// Re-adding the current H2 left no trace: no history row, and H2 kept
	// the time it was first added.
	e, _ := r.Get("solve")
	if e.Hash != "H3" || e.Timestamp != 3 || !reflect.DeepEqual(e.History, []Version{{"H2", 2}, {"H1", 1}}) {
		t.Fatalf("after registers: %+v", e)
	}
	if _, err := r.Rollback("solve", "NOPE"); err == nil || err.Error() != "hash not found in history: NOPE" {
		t.Fatalf("rollback unknown: %v", err)
	}
	v, err := r.Rollback("solve", "H1")
	if err != nil || v.Hash != "H1" {
		t.Fatal(err)
	}
	e, _ = r.Get("solve")
	if e.Hash != "H1" || e.Timestamp != 1 || !reflect.DeepEqual(e.History, []Version{{"H3", 3}, {"H2", 2}}) {
		t.Fatalf("after rollback: %+v", e)
	}
	// A version from the history is not the current one: adding it again
	// is a change, recorded like any other.
	if !r.Register("solve", "H2", 4) {
		t.Fatal("re-adding a version from the history changed nothing")
	}
	e, _ = r.Get("solve")
	if e.Hash != "H2" || e.Timestamp != 4 || !reflect.DeepEqual(e.History, []Version{{"H1", 1}, {"H3", 3}, {"H2", 2}}) {
		t.Fatalf("after re-adding H2: %+v", e)
	}
	if _, err := r.Rollback("solve", ""); err != nil {
		t.Fatal(err)
	}
	e, _ = r.Get("solve")
	if e.Hash != "H1" || e.Timestamp != 1 {
		t.Fatalf("rollback to newest history: %+v", e)
	}
	rows := e.VersionRows()
	// Newest first by time, whichever is current.
	if len(rows) != 4 || rows[0].Timestamp != 4 || !rows[3].Current || rows[3].Timestamp != 1 {
		t.Fatalf("rows: %+v", rows)
	}
	r.Register("lonely", "X", 1)
	if _, err := r.Rollback("lonely", ""); err == nil || err.Error() != "no history entry to rollback to" {
		t.Fatalf("no history: %v", err)
	}
	if _, err := r.Rollback("ghost", ""); err == nil || err.Error() != "workflow not registered: ghost" {
		t.Fatalf("ghost rollback: %v", err)
	}
	if err := r.Unregister("ghost"); err == nil || err.Error() != "workflow not registered: ghost" {
		t.Fatalf("ghost: %v", err)
	}
	if err := r.Unregister("lonely"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Names(), []string{"solve"}) {
		t.Fatalf("names %v", r.Names())
	}
	if r.NameOf("H1") != "solve" || r.NameOf("ZZ") != "" {
		t.Fatal("NameOf")
	}
}

func TestUpdateIsSerialisedAndBadFileChangesNothing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "workflow.yaml")
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			err := Update(path, func(r *Registry) error {
				r.Register(fmt.Sprintf("wf-%d", i), "H", int64(i))
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	r, err := Load(path)
	if err != nil || len(r.Names()) != 20 {
		t.Fatalf("lost registrations: %v %v", r.Names(), err)
	}
	bad := []byte("workflows: [not, a, map]\n")
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	err = Update(path, func(r *Registry) error { r.Register("x", "H", 1); return nil })
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("update of a broken registry: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != string(bad) {
		t.Fatal("broken registry was rewritten")
	}
}

func TestStoreFile(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "bundles", "H.esm.js")
	if err := StoreFile(p, "bundle", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := StoreFile(p, "bundle", []byte("a")); err != nil {
		t.Fatalf("same content again: %v", err)
	}
	err := StoreFile(p, "bundle", []byte("b"))
	if err == nil || err.Error() != "bundle for this hash already exists with different contents; refusing to overwrite" {
		t.Fatalf("different content: %v", err)
	}
}

func TestSetConfigRoundTrips(t *testing.T) {
	t.Parallel()
	r := New()
	c := Config{MaxDepth: 2, SupervisorInterval: 4, Providers: map[string]Provider{"p": {BaseURL: "u", APIKey: "env:K"}}, Models: map[string]string{"default": "p/m"}}
	if err := r.SetConfig(c); err != nil {
		t.Fatal(err)
	}
	if got := r.Config(); !reflect.DeepEqual(got, &c) {
		t.Fatalf("Config() = %+v", got)
	}
	b, _ := r.Marshal()
	back, err := Parse(b)
	if err != nil || !reflect.DeepEqual(back.Config(), &c) {
		t.Fatalf("after a write: %+v, %v\n%s", back.Config(), err, b)
	}
	if err := r.SetConfig(Config{MaxDepth: -1, Providers: map[string]Provider{}, Models: map[string]string{}}); err == nil {
		t.Fatal("negative maxDepth accepted")
	}
}

// The registry holds API keys: other users of the machine must not read
// it, and a file an older version wrote world-readable is tightened on the
// next write.
func TestSaveIsOwnerOnly(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "workflow.yaml")
	if err := os.WriteFile(path, []byte("workflows: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Update(path, func(r *Registry) error {
		return r.SetConfig(Config{Providers: map[string]Provider{"p": {BaseURL: "u", APIKey: "sk-secret"}}, Models: map[string]string{"default": "p/m"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode().Perm(); perm != 0o600 {
		t.Fatalf("registry mode %o, want 600", perm)
	}
}

func TestPricesParseRoundTripAndLookup(t *testing.T) {
	t.Parallel()
	const base = "workflows: {}\nconfig:\n  maxDepth: 1\n  providers: {p: {baseUrl: u, apiKey: k}}\n  models: {default: p/m}\n"
	r, err := Parse([]byte(base + "  prices:\n    p/m: {prompt: 0.15, completion: 0.6}\n    m2: {prompt: 0, completion: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := r.Config()
	want := Prices{"p/m": {Prompt: 0.15, Completion: 0.6}, "m2": {Completion: 2}}
	if !reflect.DeepEqual(c.Prices, want) {
		t.Fatalf("prices = %+v", c.Prices)
	}
	// setup rewrites the section through SetConfig: the prices must survive.
	if err := r.SetConfig(*c); err != nil {
		t.Fatal(err)
	}
	b, _ := r.Marshal()
	back, err := Parse(b)
	if err != nil || !reflect.DeepEqual(back.Config().Prices, want) {
		t.Fatalf("after a write: %+v, %v\n%s", back.Config(), err, b)
	}
	if p, ok := want.Lookup("p/m"); !ok || p.Prompt != 0.15 {
		t.Errorf("Lookup(p/m) = %v %v", p, ok)
	}
	if p, ok := want.Lookup("other/m2"); !ok || p.Completion != 2 {
		t.Errorf("Lookup(other/m2) should fall back to the bare model name: %v %v", p, ok)
	}
	if _, ok := want.Lookup("p/unpriced"); ok {
		t.Error("an unpriced model has a price")
	}
	if got := (Price{Prompt: 2, Completion: 10}).Cost(1_000_000, 500_000); got != 7 {
		t.Errorf("Cost = %v, want 7", got)
	}
	noPrices, _ := Parse([]byte(base))
	if noPrices.Config().Prices != nil {
		t.Errorf("absent prices read as %+v", noPrices.Config().Prices)
	}
}

func TestPricesRejectBadInput(t *testing.T) {
	t.Parallel()
	const base = "workflows: {}\nconfig:\n  maxDepth: 1\n  providers: {p: {baseUrl: u, apiKey: k}}\n  models: {default: p/m}\n"
	cases := map[string]string{
		"  prices: [a]\n":                                         "config.prices must be a mapping",
		"  prices: {p/m: 3}\n":                                    "config.prices.p/m must be a mapping {prompt, completion}",
		"  prices: {'': {prompt: 1, completion: 1}}\n":            "config.prices must not contain an empty model name",
		"  prices: {p/m: {prompt: -1, completion: 1}}\n":          "config.prices.p/m.prompt must be a non-negative number",
		"  prices: {p/m: {prompt: 1, completion: x}}\n":           "config.prices.p/m.completion must be a non-negative number",
		"  prices: {p/m: {prompt: .inf, completion: 1}}\n":        "config.prices.p/m.prompt must be a non-negative number",
		"  prices: {p/m: {prompt: 1}}\n":                          "config.prices.p/m.completion is missing",
		"  prices: {p/m: {prompt: 1, completion: 1, input: 2}}\n": `config.prices.p/m: unknown field "input"`,
	}
	for in, want := range cases {
		_, err := Parse([]byte(base + in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", in, err, want)
		}
	}
	r := New()
	bad := Config{MaxDepth: 1, Providers: map[string]Provider{}, Models: map[string]string{}, Prices: Prices{"m": {Prompt: -1}}}
	if err := r.SetConfig(bad); err == nil || r.Config() != nil {
		t.Fatalf("a negative price was accepted: %v", err)
	}
}
