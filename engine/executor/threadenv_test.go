package executor

import (
	"context"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/threadenv"
)

const runOrigin = "that of `uncaged-workflow run` in /home/me, pid 42"

func threadEnv(vars ...string) func() *threadenv.Env {
	env := threadenv.New(vars, "/home/me", runOrigin)
	return func() *threadenv.Env { return env }
}

// A model's key missing from the thread's environment is reported with
// where that environment came from: the command that started the thread,
// not the engine host, which may have been started by another one.
func TestAMissingKeySaysWhoseEnvironmentLacksIt(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	err := registry.Update(e.Layout.RegistryFile(), func(r *registry.Registry) error {
		return r.SetConfig(registry.Config{MaxDepth: 3,
			Providers: map[string]registry.Provider{"fake": {BaseURL: "http://127.0.0.1:1", APIKey: "env:MOCK_KEY"}},
			Models:    map[string]string{"default": "fake/m"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &run{e: e, env: Env{Thread: threadEnv("OTHER=1")}}
	_, err = r.ResolveModel("default")
	want := "config.providers.fake.apiKey: environment variable \"MOCK_KEY\" is not set (the thread's environment is " + runOrigin + ")"
	if err == nil || err.Error() != want {
		t.Fatalf("ResolveModel = %v\nwant %s", err, want)
	}
	if r.Getenv("OTHER") != "1" || r.ThreadEnv().Dir() != "/home/me" {
		t.Fatal("the run does not read the thread's environment")
	}
	r = &run{e: e, env: Env{Thread: threadEnv("MOCK_KEY=sk-1")}}
	if m, err := r.ResolveModel("default"); err != nil || m.APIKey != "sk-1" {
		t.Fatalf("with the key: %+v, %v", m, err)
	}
}

func TestAMissingOversightKeySaysWhoseEnvironmentLacksIt(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	m := newOversightModel(t, map[string]string{"workflow_summary": `{"summary":"never"}`})
	err := registry.Update(e.Layout.RegistryFile(), func(r *registry.Registry) error {
		return r.SetConfig(registry.Config{MaxDepth: 3,
			Providers: map[string]registry.Provider{"fake": {BaseURL: m.srv.URL, APIKey: "env:UNSET_OVERSIGHT_KEY"}},
			Models:    map[string]string{"default": "fake/base", SceneSummarizer: "fake/s"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Run(context.Background(), linear{roles: []string{"a"}}, begin(t, e, "ENVO"), Env{Thread: threadEnv()})
	if err != nil || res.Summary != "completed: moderator returned END" {
		t.Fatalf("result %+v, %v", res, err)
	}
	want := `environment variable \"UNSET_OVERSIGHT_KEY\" is not set (the thread's environment is ` + runOrigin + `)`
	if log := debugLog(t, e, "ENVO"); !strings.Contains(log, want) {
		t.Fatalf("log lacks %s:\n%s", want, log)
	}
}
