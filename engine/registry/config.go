package registry

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/membudget"
	"github.com/uncaged/workflow/engine/threadenv"
)

// Provider is an OpenAI-compatible endpoint.
type Provider struct {
	BaseURL string `json:"baseUrl"`
	// APIKey is the key as written: a literal or "env:NAME".
	APIKey string `json:"apiKey"`
}

// Config is the validated config section.
type Config struct {
	MaxDepth           int                 `json:"maxDepth"`
	SupervisorInterval int                 `json:"supervisorInterval"`
	Providers          map[string]Provider `json:"providers"`
	// Models maps a scene (default, extract, supervisor, ...) to "provider/model".
	Models map[string]string `json:"models"`
	// MemoryBudget is every thread's memory budget as written ("512MiB",
	// a number of bytes, or "off"); "" when not set (see package membudget).
	MemoryBudget string `json:"memoryBudget,omitempty"`
	// Prices turn recorded token counts into cost (config.prices); nil
	// when the section is absent.
	Prices Prices `json:"prices,omitempty"`
	// Summarizer is SummarizerOff to end threads with their workflow's
	// own summary; "" (not set) summarizes each completed thread with a
	// model, as the original does.
	Summarizer string `json:"summarizer,omitempty"`
}

// SummarizerOff is config.summarizer's one value: no summarizer.
const SummarizerOff = "off"

// Price is what one model costs, in US dollars per million tokens, as
// config.prices writes it:
//
//	prices:
//	  openai/gpt-4o-mini: {prompt: 0.15, completion: 0.6}
type Price struct {
	Prompt     float64 `json:"prompt"`
	Completion float64 `json:"completion"`
}

// Prices maps a model reference ("provider/model", as config.models
// writes it) or a bare model name to its price.
type Prices map[string]Price

// Lookup finds the price of a model call recorded as model ("provider/model"):
// the entry for that reference, else the entry for the bare model name, so
// one price can cover a model served by several providers.
func (p Prices) Lookup(model string) (Price, bool) {
	if pr, ok := p[model]; ok {
		return pr, true
	}
	if _, bare, ok := strings.Cut(model, "/"); ok {
		pr, ok := p[bare]
		return pr, ok
	}
	return Price{}, false
}

// Cost is the price of promptTokens and completionTokens, in US dollars.
func (p Price) Cost(promptTokens, completionTokens int64) float64 {
	return (float64(promptTokens)*p.Prompt + float64(completionTokens)*p.Completion) / 1e6
}

// Default depth settings used when a config is first written.
const (
	DefaultMaxDepth           = 3
	DefaultSupervisorInterval = 3
)

// Config returns the validated config section, or nil when there is none.
func (r *Registry) Config() *Config {
	if r.config == nil {
		return nil
	}
	c, _, err := decodeConfig(r.config)
	if err != nil { // validated on read and on SetConfig
		return nil
	}
	return c
}

// SetConfig replaces the config section.
func (r *Registry) SetConfig(c Config) error {
	providers := canonyaml.Map{}
	for _, name := range sortedKeys(c.Providers) {
		p := c.Providers[name]
		providers = append(providers, canonyaml.Pair{Key: name, Value: canonyaml.Map{{Key: "baseUrl", Value: p.BaseURL}, {Key: "apiKey", Value: p.APIKey}}})
	}
	models := canonyaml.Map{}
	for _, scene := range sortedKeys(c.Models) {
		models = append(models, canonyaml.Pair{Key: scene, Value: c.Models[scene]})
	}
	v := canonyaml.Map{
		{Key: "maxDepth", Value: c.MaxDepth},
		{Key: "supervisorInterval", Value: c.SupervisorInterval},
		{Key: "providers", Value: providers},
		{Key: "models", Value: models},
	}
	if c.MemoryBudget != "" {
		var b any = c.MemoryBudget
		if n, err := strconv.ParseInt(c.MemoryBudget, 10, 64); err == nil {
			b = n // written as a number, read back as one
		}
		v = append(v, canonyaml.Pair{Key: "memoryBudget", Value: b})
	}
	if c.Summarizer != "" {
		v = append(v, canonyaml.Pair{Key: "summarizer", Value: c.Summarizer})
	}
	if c.Prices != nil {
		prices := canonyaml.Map{}
		for _, model := range sortedKeys(c.Prices) {
			p := c.Prices[model]
			prices = append(prices, canonyaml.Pair{Key: model, Value: canonyaml.Map{{Key: "prompt", Value: p.Prompt}, {Key: "completion", Value: p.Completion}}})
		}
		v = append(v, canonyaml.Pair{Key: "prices", Value: prices})
	}
	warnings, err := validateConfig(v)
	if err != nil {
		return err
	}
	r.config, r.Warnings = v, warnings
	return nil
}

func validateConfig(v any) ([]string, error) {
	_, warnings, err := decodeConfig(v)
	return warnings, err
}

func decodeConfig(v any) (*Config, []string, error) {
	m, ok := v.(canonyaml.Map)
	if !ok {
		return nil, nil, errors.New(`registry "config" must be a mapping`)
	}
	c := &Config{SupervisorInterval: DefaultSupervisorInterval, Providers: map[string]Provider{}, Models: map[string]string{}}
	md, ok := m.Get("maxDepth")
	if c.MaxDepth, ok = nonNegInt(md, ok); !ok {
		return nil, nil, errors.New("config.maxDepth must be a non-negative integer")
	}
	if si, present := m.Get("supervisorInterval"); present {
		if c.SupervisorInterval, ok = nonNegInt(si, true); !ok {
			return nil, nil, errors.New("config.supervisorInterval must be a non-negative integer")
		}
	}
	pv, _ := m.Get("providers")
	providers, ok := pv.(canonyaml.Map)
	if !ok {
		return nil, nil, errors.New(`registry config must contain a "providers" mapping`)
	}
	for _, p := range providers {
		if p.Key == "" {
			return nil, nil, errors.New("config.providers must not contain an empty provider name")
		}
		ctx := "config.providers." + p.Key
		pm, ok := p.Value.(canonyaml.Map)
		if !ok {
			return nil, nil, fmt.Errorf("%s must be a mapping", ctx)
		}
		base, _ := pm.Get("baseUrl")
		key, _ := pm.Get("apiKey")
		baseURL, ok := base.(string)
		if !ok || baseURL == "" {
			return nil, nil, fmt.Errorf("%s.baseUrl must be a non-empty string", ctx)
		}
		apiKey, ok := key.(string)
		if !ok || apiKey == "" {
			return nil, nil, fmt.Errorf("%s.apiKey must be a non-empty string", ctx)
		}
		if name, isRef := strings.CutPrefix(apiKey, "env:"); isRef && strings.TrimSpace(name) == "" {
			return nil, nil, fmt.Errorf(`%s.apiKey: "env:" apiKey reference must name a variable`, ctx)
		}
		c.Providers[p.Key] = Provider{BaseURL: baseURL, APIKey: apiKey}
	}
	mv, _ := m.Get("models")
	models, ok := mv.(canonyaml.Map)
	if !ok {
		return nil, nil, errors.New(`registry config must contain a "models" mapping`)
	}
	for _, p := range models {
		if p.Key == "" {
			return nil, nil, errors.New("config.models must not contain an empty scene name")
		}
		ref, ok := p.Value.(string)
		if !ok || ref == "" {
			return nil, nil, fmt.Errorf("config.models.%s must be a non-empty string (provider/model)", p.Key)
		}
		provider, _, err := splitModelRef(ref)
		if err != nil {
			return nil, nil, fmt.Errorf("config.models.%s: %w", p.Key, err)
		}
		if _, ok := c.Providers[provider]; !ok {
			return nil, nil, fmt.Errorf("config.models.%s: unknown provider %q (not listed under config.providers)", p.Key, provider)
		}
		c.Models[p.Key] = ref
	}
	if mb, present := m.Get("memoryBudget"); present {
		var err error
		if c.MemoryBudget, err = memoryBudget(mb); err != nil {
			return nil, nil, err
		}
	}
	if sv, present := m.Get("summarizer"); present {
		if s, ok := sv.(string); !ok || s != SummarizerOff {
			return nil, nil, fmt.Errorf(`config.summarizer must be %q (leave it out to summarize each completed thread with models.summarizer, else models.extract, else models.default)`, SummarizerOff)
		}
		c.Summarizer = SummarizerOff
	}
	if pv, present := m.Get("prices"); present {
		var err error
		if c.Prices, err = decodePrices(pv); err != nil {
			return nil, nil, err
		}
	}
	var warnings []string
	if _, ok := c.Models["default"]; !ok {
		warnings = append(warnings, "config.models has no \"default\" entry; scenes without their own model cannot run")
	}
	return c, warnings, nil
}

func nonNegInt(v any, present bool) (int, bool) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case int:
		f = float64(x) // a config built in Go (SetConfig)
	case int64:
		f = float64(x)
	default:
		return 0, false
	}
	if !present || f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
		return 0, false
	}
	return int(f), true
}

// memoryBudget checks config.memoryBudget and returns it as written.
func memoryBudget(v any) (string, error) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case float64:
		if x != math.Trunc(x) || x < 0 || x >= 1<<62 {
			return "", fmt.Errorf("config.memoryBudget: %v is not a whole number of bytes", x)
		}
		s = strconv.FormatInt(int64(x), 10)
	case int:
		s = strconv.Itoa(x)
	case int64:
		s = strconv.FormatInt(x, 10)
	default:
		return "", errors.New(`config.memoryBudget must be a size such as 512MiB, or "off"`)
	}
	if _, err := membudget.ParseSize(s); err != nil {
		return "", fmt.Errorf("config.memoryBudget: %w", err)
	}
	return s, nil
}

// decodePrices checks config.prices: a mapping of model to
// {prompt, completion}, both non-negative numbers of US dollars per million
// tokens, and nothing else.
func decodePrices(v any) (Prices, error) {
	m, ok := v.(canonyaml.Map)
	if !ok {
		return nil, errors.New("config.prices must be a mapping of model (provider/model) to {prompt, completion} in US dollars per million tokens")
	}
	out := Prices{}
	for _, p := range m {
		if strings.TrimSpace(p.Key) == "" {
			return nil, errors.New("config.prices must not contain an empty model name")
		}
		ctx := "config.prices." + p.Key
		pm, ok := p.Value.(canonyaml.Map)
		if !ok {
			return nil, fmt.Errorf("%s must be a mapping {prompt, completion} in US dollars per million tokens", ctx)
		}
		var price Price
		for _, f := range pm {
			n, ok := priceNumber(f.Value)
			switch {
			case f.Key != "prompt" && f.Key != "completion":
				return nil, fmt.Errorf("%s: unknown field %q (only prompt and completion, in US dollars per million tokens)", ctx, f.Key)
			case !ok:
				return nil, fmt.Errorf("%s.%s must be a non-negative number (US dollars per million tokens)", ctx, f.Key)
			case f.Key == "prompt":
				price.Prompt = n
			default:
				price.Completion = n
			}
		}
		for _, field := range []string{"prompt", "completion"} {
			if _, ok := pm.Get(field); !ok {
				return nil, fmt.Errorf("%s.%s is missing (US dollars per million tokens; write 0 for free)", ctx, field)
			}
		}
		out[p.Key] = price
	}
	return out, nil
}

// priceNumber reads a finite, non-negative number.
func priceNumber(v any) (float64, bool) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case int:
		f = float64(x)
	case int64:
		f = float64(x)
	default:
		return 0, false
	}
	if f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

// splitModelRef splits "provider/model" at the first slash.
func splitModelRef(ref string) (string, string, error) {
	provider, model, ok := strings.Cut(ref, "/")
	if !ok || provider == "" || model == "" {
		return "", "", fmt.Errorf("invalid model reference %q: expected providerName/modelName", ref)
	}
	return provider, model, nil
}

// Model is a resolved model: where to call and with which key.
type Model struct {
	BaseURL string
	APIKey  string
	Model   string
	// Ref is the "provider/model" reference the model was resolved from:
	// what usage records name and config.prices is keyed by.
	Ref string
}

// ResolveModel picks the model for a scene (falling back to models.default)
// and resolves an "env:NAME" API key through getenv. Resolution happens here,
// at use, not when the file is read: a missing variable must not break
// commands that never call a model.
func (c *Config) ResolveModel(scene string, getenv func(string) string) (Model, error) {
	ref, ok := c.Models[scene]
	if !ok {
		if ref, ok = c.Models["default"]; !ok {
			return Model{}, fmt.Errorf("no model mapping for scene %q and no models.default fallback", scene)
		}
	}
	return c.resolveRef(ref, scene, getenv)
}

// ResolveRef resolves what an agent names as its model: a direct
// "provider/model" reference when it names a configured provider, else a
// scene of config.models (falling back to models.default).
func (c *Config) ResolveRef(ref string, getenv func(string) string) (Model, error) {
	if provider, _, ok := strings.Cut(ref, "/"); ok {
		if _, known := c.Providers[provider]; known {
			return c.resolveRef(ref, ref, getenv)
		}
		if _, scene := c.Models[ref]; !scene {
			return Model{}, fmt.Errorf("unknown provider %q in model reference %q", provider, ref)
		}
	}
	return c.ResolveModel(ref, getenv)
}

func (c *Config) resolveRef(ref, scene string, getenv func(string) string) (Model, error) {
	providerName, model, err := splitModelRef(ref)
	if err != nil {
		return Model{}, err
	}
	p, ok := c.Providers[providerName]
	if !ok {
		return Model{}, fmt.Errorf("unknown provider %q referenced by scene %q", providerName, scene)
	}
	key := p.APIKey
	if name, isRef := strings.CutPrefix(key, "env:"); isRef {
		if key = getenv(name); key == "" {
			// The caller (the executor) says whose environment this was.
			return Model{}, fmt.Errorf("config.providers.%s.apiKey: %w", providerName, &threadenv.NotSetError{Name: name})
		}
	}
	return Model{BaseURL: p.BaseURL, APIKey: key, Model: model, Ref: ref}, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
