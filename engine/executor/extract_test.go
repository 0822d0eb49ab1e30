package executor

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/registry"
)

// fakeModel is an OpenAI-compatible endpoint that answers every request by
// calling the output tool with args, and records what it was asked.
func fakeModel(t *testing.T, args string) (*httptest.Server, *[]map[string]any) {
	var seen []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &req); err != nil {
			t.Errorf("the model got a request that is no JSON: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req["authorization"] = r.Header.Get("Authorization")
		seen = append(seen, req)
		tools, _ := req["tools"].([]any)
		last := tools[len(tools)-1].(map[string]any)["function"].(map[string]any)["name"]
		resp := map[string]any{"choices": []any{map[string]any{"message": map[string]any{
			"role": "assistant", "content": nil,
			"tool_calls": []any{map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": last, "arguments": args}}},
		}}}}
		_ = json.NewEncoder(w).Encode(resp) // a failure shows on the client's side
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

func TestExtractUsesTheConfiguredModel(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	srv, seen := fakeModel(t, `{"confidence":0.9}`)
	err := registry.Update(e.Layout.RegistryFile(), func(r *registry.Registry) error {
		return r.SetConfig(registry.Config{MaxDepth: 3, SupervisorInterval: 3,
			Providers: map[string]registry.Provider{"fake": {BaseURL: srv.URL, APIKey: "env:FAKE_KEY"}},
			Models:    map[string]string{"default": "fake/small"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	content, _ := e.CAS.Put("model says hello")
	r := &run{e: e, env: Env{Getenv: func(k string) string {
		if k == "FAKE_KEY" {
			return "sk-test"
		}
		return ""
	}}, log: NewDebugLog(e.Layout.InfoLog("B", "T"), time.Now)}
	res, err := r.Extract(context.Background(), []byte(`{"type":"object","properties":{"confidence":{"type":"number"}},"required":["confidence"]}`), content)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := res.Meta.Get("confidence"); v != 0.9 || res.ContentPayload != "model says hello" {
		t.Fatalf("extract = %+v", res)
	}
	if len(*seen) != 1 || (*seen)[0]["model"] != "small" || (*seen)[0]["authorization"] != "Bearer sk-test" {
		t.Fatalf("request = %+v", *seen)
	}
	msgs, _ := json.Marshal((*seen)[0]["messages"])
	if !strings.Contains(string(msgs), "model says hello") {
		t.Fatalf("the content was not sent: %s", msgs)
	}
}

func TestExtractWithoutConfigSaysSo(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	content, _ := e.CAS.Put("x")
	r := &run{e: e, log: NewDebugLog(e.Layout.InfoLog("B", "T"), time.Now)}
	_, err := r.Extract(context.Background(), []byte(`{"type":"object"}`), content)
	if err == nil || !strings.Contains(err.Error(), "workflow registry has no global config section") {
		t.Fatalf("err = %v", err)
	}
}
