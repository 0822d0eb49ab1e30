package cli

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/uncaged/workflow/engine/registry"
)

//go:embed providers.yaml
var providersYAML []byte

// setupPresets is the preset list interactive setup offers; tests point it
// at loopback servers.
var setupPresets = providersYAML

// presetProvider is one entry of the provider menu.
type presetProvider struct {
	Name    string `yaml:"name" json:"name"`
	Label   string `yaml:"label" json:"label"`
	BaseURL string `yaml:"baseUrl" json:"baseUrl"`
}

// loadPresets parses providers.yaml: a list of {name, label, baseUrl}.
func loadPresets(data []byte) ([]presetProvider, error) {
	var raw []any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("providers.yaml: expected a list of {name, label, baseUrl}: %w", err)
	}
	out := make([]presetProvider, 0, len(raw))
	for _, item := range raw {
		entry, _ := item.(map[string]any)
		name, okName := entry["name"].(string)
		label, okLabel := entry["label"].(string)
		base, okBase := entry["baseUrl"].(string)
		if !okName || !okLabel || !okBase || name == "" || base == "" {
			b, _ := json.Marshal(item)
			return nil, fmt.Errorf("providers.yaml: invalid entry: %s", b)
		}
		out = append(out, presetProvider{Name: name, Label: label, BaseURL: base})
	}
	return out, nil
}

// setupUsage is what `setup --help` prints, and what follows a parse error.
const setupUsage = `uncaged-workflow setup — configure workflow.yaml providers and default model

Non-interactive (agent mode):
  uncaged-workflow setup \
    --provider <name> \
    --base-url <url> \
    --api-key <key> \
    --default-model <provider/model> \
    [--init-workspace <name>]

Interactive: run with no flags (prompts for each value).

Storage: uses the same root as other commands (--storage-root, else UNCAGED_WORKFLOW_STORAGE_ROOT).`

// setupArgs are the values setup writes.
type setupArgs struct {
	provider     string
	baseURL      string
	apiKey       string
	defaultModel string
	// initWorkspace is the workspace to create in the current directory,
	// or "" for none.
	initWorkspace string
}

// setupFlagNames are setup's own flags, in the order its usage lists them.
var setupFlagNames = []string{"provider", "base-url", "api-key", "default-model", "init-workspace"}

// setupInteractive reports whether the command line asks for the prompts
// (none of setup's own flags given), and otherwise checks that it is a
// complete non-interactive one, with the original's messages: every flag
// takes the next token as its value, and a value may not start with "--".
func setupInteractive(fs *pflag.FlagSet, positional []string) (bool, error) {
	given := map[string]bool{}
	for _, name := range setupFlagNames {
		f := fs.Lookup(name)
		if !f.Changed {
			continue
		}
		if strings.HasPrefix(f.Value.String(), "--") {
			return false, fmt.Errorf("--%s requires a value", name)
		}
		given[name] = true
	}
	if len(positional) > 0 {
		return false, fmt.Errorf("unknown argument: %s", positional[0])
	}
	if len(given) == 0 {
		return true, nil
	}
	if !given["provider"] {
		return false, errors.New("non-interactive setup requires --provider (or omit all flags for interactive mode)")
	}
	var missing []string
	for _, name := range []string{"base-url", "api-key", "default-model"} {
		if !given[name] {
			missing = append(missing, "--"+name)
		}
	}
	if len(missing) > 0 {
		return false, fmt.Errorf("missing required flag(s): %s", strings.Join(missing, ", "))
	}
	return false, nil
}

// setupFlagError words a flag the parser refused as the original did.
func setupFlagError(err error) error {
	var unknown *pflag.NotExistError
	var noValue *pflag.ValueRequiredError
	switch {
	case errors.As(err, &unknown) && unknown.GetSpecifiedShortnames() != "":
		return fmt.Errorf("unknown argument: -%s", unknown.GetSpecifiedShortnames())
	case errors.As(err, &unknown):
		return fmt.Errorf("unknown argument: --%s", unknown.GetSpecifiedName())
	case errors.As(err, &noValue):
		return fmt.Errorf("--%s requires a value", noValue.GetFlag().Name)
	}
	return err
}

func (a *app) setupCmd() *cobra.Command {
	var args setupArgs
	// usageError prints a command-line mistake followed by the usage.
	usageError := func(err error) error {
		fmt.Fprintf(a.env.Stderr, "%s\n\n%s\n", err, setupUsage)
		return exitError{1}
	}
	cmd := &cobra.Command{
		Use:         "setup [--provider <name>] [--base-url <url>] [--api-key <key>] [--default-model <provider/model>] [--init-workspace <name>]",
		Short:       "Configure workflow.yaml LLM providers and default model (interactive when no flags)",
		Long:        setupUsage,
		Annotations: map[string]string{groupAnnotation: "Configuration:"},
		Args:        cobra.ArbitraryArgs, // setupInteractive names an extra argument the original's way
		RunE: func(cmd *cobra.Command, positional []string) error {
			interactive, err := setupInteractive(cmd.Flags(), positional)
			if err != nil {
				return usageError(err)
			}
			if interactive {
				if args, err = a.collectInteractiveSetup(); err != nil {
					return err
				}
			}
			if err := a.runSetup(args); err != nil {
				return err
			}
			// Interactive setup has fetched the model list from the URL
			// already, and said so when it could not.
			if !interactive {
				if err := probeBaseURL(context.Background(), args.baseURL); err != nil {
					fmt.Fprintf(a.env.Stderr, "warning: could not reach %s: %v\nThe configuration is written; check the URL (and the network) before running a workflow that calls a model.\n", args.baseURL, err)
				}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&args.provider, "provider", "", "the provider's name in workflow.yaml; giving it (with --base-url, --api-key and --default-model) skips the prompts")
	fs.StringVar(&args.baseURL, "base-url", "", "the provider's OpenAI-compatible API base URL")
	fs.StringVar(&args.apiKey, "api-key", "", "the provider's API key")
	fs.StringVar(&args.defaultModel, "default-model", "", "the default model, as provider/model")
	fs.StringVar(&args.initWorkspace, "init-workspace", "", "also create a workflow workspace of this name in the current directory")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(setupFlagError(err)) })
	// setup's help is the original's usage text.
	cmd.SetHelpFunc(func(*cobra.Command, []string) { fmt.Fprintln(a.out(), setupUsage) })
	return cmd
}

// setupResult is what runSetup wrote, for the summary.
type setupResult struct {
	registryPath       string
	provider           string
	defaultModel       string
	maxDepth           int
	supervisorInterval int
	workspace          string
}

var providerNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// runSetup validates everything first, then merges the provider and the
// default model into workflow.yaml and creates the workspace if asked.
func (a *app) runSetup(args setupArgs) error {
	if !providerNamePattern.MatchString(args.provider) {
		return fmt.Errorf("invalid provider name: %q (letters, digits, '.', '_' and '-'; no '/')", args.provider)
	}
	if err := checkBaseURL(args.baseURL); err != nil {
		return err
	}
	if strings.TrimSpace(args.apiKey) == "" {
		return errors.New("--api-key must not be empty")
	}
	modelProvider, model, ok := strings.Cut(args.defaultModel, "/")
	if !ok || modelProvider == "" || model == "" {
		return fmt.Errorf("invalid default model %q: expected <provider>/<model>", args.defaultModel)
	}
	if modelProvider != args.provider {
		return fmt.Errorf("default model provider %q must match --provider %q", modelProvider, args.provider)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	if args.initWorkspace != "" {
		// Refuse before the registry changes, so a failed setup writes nothing.
		if err := checkWorkspaceTarget(cwd, args.initWorkspace); err != nil {
			return err
		}
	}
	l, err := a.layout()
	if err != nil {
		return err
	}
	res := setupResult{registryPath: l.RegistryFile(), provider: args.provider, defaultModel: args.defaultModel}
	err = registry.Update(l.RegistryFile(), func(r *registry.Registry) error {
		cfg := registry.Config{
			MaxDepth:           registry.DefaultMaxDepth,
			SupervisorInterval: registry.DefaultSupervisorInterval,
			Providers:          map[string]registry.Provider{},
			Models:             map[string]string{},
		}
		if old := r.Config(); old != nil {
			cfg.MaxDepth, cfg.SupervisorInterval = old.MaxDepth, old.SupervisorInterval
			cfg.MemoryBudget = old.MemoryBudget
			cfg.Summarizer = old.Summarizer
			cfg.Prices = old.Prices
			for k, v := range old.Providers {
				cfg.Providers[k] = v
			}
			for k, v := range old.Models {
				cfg.Models[k] = v
			}
		}
		cfg.Providers[args.provider] = registry.Provider{BaseURL: args.baseURL, APIKey: args.apiKey}
		cfg.Models["default"] = args.defaultModel
		res.maxDepth, res.supervisorInterval = cfg.MaxDepth, cfg.SupervisorInterval
		return r.SetConfig(cfg)
	})
	if err != nil {
		return err
	}
	if args.initWorkspace != "" {
		if res.workspace, err = initWorkspace(cwd, args.initWorkspace); err != nil {
			return err
		}
	}
	out := a.out()
	fmt.Fprintf(out, "wrote registry: %s\n", res.registryPath)
	fmt.Fprintf(out, "provider %q (baseUrl + apiKey updated)\n", res.provider)
	fmt.Fprintf(out, "config.models.default = %q\n", res.defaultModel)
	fmt.Fprintf(out, "maxDepth=%d, supervisorInterval=%d\n", res.maxDepth, res.supervisorInterval)
	if reg, err := registry.Load(res.registryPath); err == nil {
		fmt.Fprint(out, oversightSummary(reg.Config()))
	}
	if res.workspace != "" {
		fmt.Fprintf(out, "initialized workflow workspace at %s\n", res.workspace)
	}
	return nil
}

// setupProbeTimeout bounds setup's check that the base URL answers: long
// enough for a slow network, short enough not to hold up a scripted setup.
const setupProbeTimeout = 3 * time.Second

// probeBaseURL asks the provider's model list whether baseURL can be
// reached. Any HTTP answer, an error status included, shows a server is
// there; only a request that gets none — no such host, refused, timed
// out, TLS failed — is an error. No API key is sent: this checks the URL,
// not the key.
func probeBaseURL(ctx context.Context, baseURL string) error {
	ctx, cancel := context.WithTimeout(ctx, setupProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(baseURL, "/")+"/models", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("no answer within %s", setupProbeTimeout)
		}
		if errors.As(err, &uerr) {
			return uerr.Err // without `Get "…/models":`, which names a URL nobody typed
		}
		return err
	}
	return resp.Body.Close()
}

func checkBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("invalid base URL %q: expected an http(s) URL such as https://api.openai.com/v1", raw)
	}
	return nil
}

// checkWorkspaceTarget reports what initWorkspace would refuse.
func checkWorkspaceTarget(cwd, name string) error {
	base := filepath.Base(filepath.Clean(name))
	if strings.TrimSpace(name) == "" || base == "." || base == ".." || base == string(filepath.Separator) {
		return fmt.Errorf("invalid workspace path: %s", name)
	}
	target := absFrom(cwd, name)
	if _, err := os.Lstat(target); err == nil {
		return fmt.Errorf("directory already exists: %s", target)
	}
	return nil
}

// errSetupInterrupted ends interactive setup on Ctrl-C with the shell's
// conventional status.
var errSetupInterrupted = exitError{130}

// prompter asks questions on stdout and reads answers from stdin.
type prompter struct {
	in  *bufio.Reader
	out io.Writer
	// file is stdin when it is a terminal, for reading secrets without echo.
	file *os.File
}

// line prints label and reads one trimmed answer. End of input is an error:
// a script that pipes too few answers must not hang or guess.
func (p *prompter) line(label string) (string, error) {
	fmt.Fprint(p.out, label)
	s, err := p.in.ReadString('\n')
	if err != nil && (err != io.EOF || s == "") {
		if err == io.EOF {
			fmt.Fprintln(p.out)
			return "", errors.New("setup cancelled: end of input")
		}
		return "", err
	}
	return strings.TrimSpace(s), nil
}

// secret reads a line without echo when stdin is a terminal.
func (p *prompter) secret(label string) (string, error) {
	if p.file == nil {
		return p.line(label)
	}
	fmt.Fprint(p.out, label)
	s, err := readSecretLine(p.file, p.in)
	fmt.Fprintln(p.out)
	return strings.TrimSpace(s), err
}

// nonChatModel matches model ids that are not chat models (speech, images,
// embeddings, ...), which make no sense as a default model.
var nonChatModel = regexp.MustCompile(`(?i)speech|embed|image|video|audio|ocr|rerank|tts|asr|paraformer|sambert|cosyvoice|wordart|wanx|wan2|flux|stable-diffusion|z-image|s2s|livetranslate|realtime|gui-`)

// modelsTimeout bounds the model list request.
const modelsTimeout = 10 * time.Second

// fetchModels lists the chat models of an OpenAI-compatible endpoint.
func fetchModels(ctx context.Context, baseURL, apiKey string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, modelsTimeout)
	defer cancel()
	u := strings.TrimRight(baseURL, "/") + "/models"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s returned %d", u, resp.StatusCode)
	}
	var body struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&body); err != nil {
		return nil, fmt.Errorf("GET %s: unexpected response: %w", u, err)
	}
	var ids []string
	for _, m := range body.Data {
		if m.ID != "" && !nonChatModel.MatchString(m.ID) {
			ids = append(ids, m.ID)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// collectInteractiveSetup asks for provider, key, model and workspace.
func (a *app) collectInteractiveSetup() (setupArgs, error) {
	presets, err := loadPresets(setupPresets)
	if err != nil {
		return setupArgs{}, err
	}
	p := &prompter{in: bufio.NewReader(a.env.Stdin), out: a.out(), file: terminalFile(a.env.Stdin)}
	out := a.out()
	fmt.Fprint(out, "Configure the LLM provider that workflow agents will use.\n\n")

	width := len(strconv.Itoa(len(presets) + 1))
	fmt.Fprint(out, "Select a provider:\n\n")
	for i, pr := range presets {
		fmt.Fprintf(out, "  %*d) %-28s %s\n", width, i+1, pr.Label, pr.BaseURL)
	}
	fmt.Fprintf(out, "  %*d) Custom (enter name and URL manually)\n\n", width, len(presets)+1)
	choice, err := p.line(fmt.Sprintf("Choose [1-%d]: ", len(presets)+1))
	if err != nil {
		return setupArgs{}, err
	}
	n, convErr := strconv.Atoi(choice)
	if convErr != nil || n < 1 || n > len(presets)+1 {
		return setupArgs{}, fmt.Errorf("invalid choice: %s", choice)
	}
	var args setupArgs
	if n <= len(presets) {
		args.provider, args.baseURL = presets[n-1].Name, presets[n-1].BaseURL
		fmt.Fprintf(out, "\n  → %s (%s)\n\n", presets[n-1].Label, args.baseURL)
	} else {
		if args.provider, err = p.line("Provider name (e.g. my-proxy): "); err != nil {
			return setupArgs{}, err
		}
		if args.provider == "" {
			return setupArgs{}, errors.New("provider name must not be empty")
		}
		if !providerNamePattern.MatchString(args.provider) {
			return setupArgs{}, fmt.Errorf("invalid provider name: %q (letters, digits, '.', '_' and '-'; no '/')", args.provider)
		}
		if args.baseURL, err = p.line("OpenAI-compatible API base URL: "); err != nil {
			return setupArgs{}, err
		}
		if args.baseURL == "" {
			return setupArgs{}, errors.New("base URL must not be empty")
		}
		if err := checkBaseURL(args.baseURL); err != nil {
			return setupArgs{}, err
		}
	}
	if args.apiKey, err = p.secret("API key for this provider: "); err != nil {
		return setupArgs{}, err
	}
	if args.apiKey == "" {
		return setupArgs{}, errors.New("API key must not be empty")
	}

	fmt.Fprintln(out, "\nFetching available models...")
	models, fetchErr := fetchModels(context.Background(), args.baseURL, args.apiKey)
	var model string
	if fetchErr != nil || len(models) == 0 {
		if fetchErr != nil {
			fmt.Fprintf(a.env.Stderr, "could not fetch models: %v\n", fetchErr)
		} else {
			fmt.Fprintln(a.env.Stderr, "the provider listed no chat models")
		}
		if model, err = p.line("Default model (e.g. gpt-4o, qwen-plus): "); err != nil {
			return setupArgs{}, err
		}
	} else {
		fmt.Fprintf(out, "\nAvailable models (%d):\n\n", len(models))
		printModelColumns(out, models)
		fmt.Fprintln(out, "\nChoose a number, or type a model name directly.")
		if model, err = p.line(fmt.Sprintf("Default model [1-%d]: ", len(models))); err != nil {
			return setupArgs{}, err
		}
		if k, err := strconv.Atoi(model); err == nil && k >= 1 && k <= len(models) {
			model = models[k-1]
		}
	}
	if model == "" {
		return setupArgs{}, errors.New("default model must not be empty")
	}
	// A model id may carry a vendor path (OpenRouter's "anthropic/claude-…"),
	// which the provider needs verbatim; only a repeated provider prefix goes.
	model = strings.TrimPrefix(model, args.provider+"/")
	args.defaultModel = args.provider + "/" + model
	fmt.Fprintf(out, "  → %s\n", args.defaultModel)

	cwd, err := os.Getwd()
	if err != nil {
		return setupArgs{}, err
	}
	for {
		ws, err := p.line("\nWorkflow workspace path (default: ./workflows, type 'skip' to skip): ")
		if err != nil {
			// No answer is no workspace: the provider is what setup is for.
			fmt.Fprintln(a.env.Stderr, "no workspace path given; skipping workspace creation")
			break
		}
		if strings.EqualFold(ws, "skip") {
			break
		}
		if ws == "" {
			ws = "./workflows"
		}
		if err := checkWorkspaceTarget(cwd, ws); err != nil {
			fmt.Fprintln(a.env.Stderr, err.Error())
			fmt.Fprintln(out, "Please enter a different path, or type 'skip' to skip.")
			continue
		}
		args.initWorkspace = ws
		break
	}
	return args, nil
}

// printModelColumns lists models numbered, in as many columns as fit in 80
// characters.
func printModelColumns(w io.Writer, models []string) {
	nw := len(strconv.Itoa(len(models)))
	longest := 0
	for _, m := range models {
		longest = max(longest, len(m))
	}
	cell := nw + 4 + longest + 2
	cols := max(1, 80/cell)
	for i := 0; i < len(models); i += cols {
		var b strings.Builder
		for j := i; j < min(i+cols, len(models)); j++ {
			fmt.Fprintf(&b, "  %*d) %-*s", nw, j+1, longest+2, models[j])
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// terminalFile returns r as a file when it is a terminal.
func terminalFile(r io.Reader) *os.File {
	f, ok := r.(*os.File)
	if !ok {
		return nil
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return f
}
