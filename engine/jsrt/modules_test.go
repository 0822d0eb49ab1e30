package jsrt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/workflow"
	"github.com/uncaged/workflow/shared/testkit"
)

// check runs one check of host_apis.esm.js and returns its meta as JSON
// decoded into a map.
func check(t *testing.T, h *fakeHost, name string) map[string]any {
	t.Helper()
	b := loadTestdata(t, "host_apis.esm.js")
	outs, done, err := drive(t, b, h, threadFor(b, name))
	if err != nil {
		t.Fatalf("%s: %v (log %q)", name, err, h.logged("ERROR"))
	}
	if len(outs) != 1 || done.ReturnCode != 0 {
		t.Fatalf("%s: %d outputs, completion %+v", name, len(outs), done)
	}
	j, err := outs[0].Meta.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func wantFields(t *testing.T, got map[string]any, want map[string]any) {
	t.Helper()
	for k, w := range want {
		gj, _ := json.Marshal(got[k])
		wj, _ := json.Marshal(w)
		if string(gj) != string(wj) {
			t.Errorf("%s = %s, want %s", k, gj, wj)
		}
	}
}

func TestTimers(t *testing.T) {
	t.Parallel()
	got := check(t, newFakeHost(t), "timers")
	wantFields(t, got, map[string]any{
		"order":            []string{"timeout", "microtask", "immediate"},
		"ticks":            3,
		"elapsedAtLeast20": true,
	})
}

func TestFetch(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"x": r.URL.Query().Get("x"), "header": r.Header.Get("X-Test")})
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write([]byte(r.Method + " " + r.Header.Get("Content-Type") + " " + string(b)))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	h := newFakeHost(t)
	h.env["TEST_SERVER"] = srv.URL
	got := check(t, h, "fetch")
	wantFields(t, got, map[string]any{
		"ok":            true,
		"status":        200,
		"contentType":   "application/json",
		"body":          map[string]any{"x": "1", "header": "yes"},
		"echoed":        "POST text/plain hello body",
		"missingStatus": 404,
		"missingOk":     false,
		"aborted":       "TimeoutError",
	})
}

func TestSpawn(t *testing.T) {
	t.Parallel()
	got := check(t, newFakeHost(t), "spawn")
	wantFields(t, got, map[string]any{
		"out":      "hi\n",
		"err":      "err\n",
		"code":     3,
		"exitCode": 3,
		"stdout":   "from env",
		"failed":   7,
		"sync":     "sync",
		"missing":  "ENOENT",
		"piped":    "through stdin",
		"killed":   map[string]any{"code": nil, "signal": "SIGTERM", "killed": true},
	})
}

func TestKillChildProcessOnCancel(t *testing.T) {
	t.Parallel()
	b := loadTestdata(t, "host_apis.esm.js")
	h := newFakeHost(t)
	_, cancel, errc := startKillable(t, b, h, threadFor(b, "sleeper"))
	var pids []int
	testkit.WaitUntil(t, "the child pids in the console log", func() bool {
		for _, line := range h.logged("CONSOLE") {
			if rest, ok := strings.CutPrefix(line, "pids "); ok {
				for _, f := range strings.Fields(rest) {
					n, _ := strconv.Atoi(f)
					pids = append(pids, n)
				}
			}
		}
		return len(pids) > 0
	})
	if len(pids) != 2 {
		t.Fatalf("pids logged: %q", h.logged("CONSOLE"))
	}
	for _, p := range pids {
		if testkit.ProcessGone(p) {
			t.Fatalf("process %d is not running before the kill", p)
		}
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(testkit.WaitBound):
		t.Fatal("Next did not return")
	}
	// sh and its background sleep 30 are both gone (the sleep is reaped by
	// init once killed, so give it a moment).
	for _, p := range pids {
		testkit.WaitUntil(t, fmt.Sprintf("process %d to end after the kill", p), func() bool { return testkit.ProcessGone(p) })
	}
}

func TestRoundTrips(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	wd, _ := os.Getwd()
	h.env["EXPECTED_CWD"] = wd
	got := check(t, h, "roundtrip")
	wantFields(t, got, map[string]any{
		"dec":               "héllo ✓",
		"encLength":         len("héllo ✓"),
		"b64":               "aMOpbGxv",
		"hex":               "6869",
		"back":              "héllo",
		"concat":            "abc",
		"byteLength":        3,
		"made":              true,
		"text":              "written ✓",
		"rawIsBuffer":       true,
		"size":              len("written ✓"),
		"isFile":            true,
		"listed":            []string{"deeper", "note.txt"},
		"typed":             []string{"deeper:d", "note.txt:f"},
		"appended":          "written ✓!",
		"missingCode":       "ENOENT",
		"gone":              true,
		"join":              "/a/c/d.txt",
		"resolve":           "/x/z",
		"dirname":           "/a/b",
		"basename":          "c",
		"extname":           ".gz",
		"relative":          "../../d",
		"isAbsolute":        []bool{true, false},
		"sep":               "/",
		"eol":               "\n",
		"platform":          "linux",
		"homedirIsAbsolute": true,
		"hostname":          "string",
		"sha256":            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
		"uuid":              true,
		"heard":             13,
		"cwd":               true,
		"platformMatches":   true,
	})
}

func TestConsole(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	check(t, h, "console")
	logs := h.logged("CONSOLE")
	want := []string{"hello world, 3 items { nested: { a: [ 1, 2 ] } }", "shown"}
	if strings.Join(logs, "\n") != strings.Join(want, "\n") {
		t.Fatalf("CONSOLE log = %q, want %q", logs, want)
	}
}

func TestMetaConversion(t *testing.T) {
	t.Parallel()
	// JSON.stringify's rules: toJSON, dropped undefined and functions,
	// null for non-finite numbers, key order preserved.
	src := `
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
export const run = async function* (thread, runtime) {
  const h = await runtime.cas.put("x");
  const meta = { b: 1, a: [1, undefined, () => 1, NaN], when: new Date(0), skip: undefined, fn() {}, nested: { "2": "two", "1": "one" } };
  yield { role: "r", contentHash: h, meta };
  return { returnCode: 0, summary: "" };
};`
	b, err := Load([]byte(src), "meta.esm.js", Options{})
	if err != nil {
		t.Fatal(err)
	}
	outs, _, err := drive(t, b, newFakeHost(t), threadFor(b, ""))
	if err != nil {
		t.Fatal(err)
	}
	j, _ := outs[0].Meta.MarshalJSON()
	if want := `{"b":1,"a":[1,null,null,null],"when":"1970-01-01T00:00:00.000Z","nested":{"1":"one","2":"two"}}`; string(j) != want {
		t.Fatalf("meta = %s\nwant   %s", j, want)
	}
	if _, ok := outs[0].Meta.Get("nested"); !ok {
		t.Fatal("nested missing")
	}
	y, err := canonyaml.Marshal(outs[0].Meta)
	if err != nil || len(y) == 0 {
		t.Fatalf("meta does not marshal: %v", err)
	}
}

func TestRequireAtRuntimeNamesAvailableModules(t *testing.T) {
	t.Parallel()
	src := `
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
export const run = async function* () {
  const req = globalThis.require;
  const path = req("node:path");
  if (path.join("a", "b") !== "a/b") throw new Error("path broken");
  req("lodash");
};`
	b, err := Load([]byte(src), "req.esm.js", Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = drive(t, b, newFakeHost(t), threadFor(b, ""))
	want := `Error: module "lodash" is not available to workflow bundles (available: @uncaged/workflow-agent-cursor, @uncaged/workflow-agent-hermes, @uncaged/workflow-agent-llm, @uncaged/workflow-agent-react, @uncaged/workflow-cas, @uncaged/workflow-execute, @uncaged/workflow-protocol, @uncaged/workflow-reactor, @uncaged/workflow-register, @uncaged/workflow-runtime, @uncaged/workflow-util, @uncaged/workflow-util-agent, buffer, child_process, crypto, events, fs, fs/promises, os, path, path/posix, process, timers, timers/promises, url, util)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v", err)
	}
}

func TestProcessEnvIsReadOnly(t *testing.T) {
	t.Parallel()
	src := `
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
export const run = async function* () {
  if (process.env.JSRT_SET !== "yes" || "JSRT_SET" in process.env === false) throw new Error("env not read");
  if (process.env.JSRT_UNSET !== undefined) throw new Error("unset var is defined");
  process.env.JSRT_SET = "no";
};`
	b, err := Load([]byte(src), "env.esm.js", Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := newFakeHost(t)
	h.env["JSRT_SET"] = "yes"
	_, _, err = drive(t, b, h, threadFor(b, ""))
	if err == nil || !strings.Contains(err.Error(), "TypeError: cannot set process.env.JSRT_SET: process.env is read-only") {
		t.Fatalf("err = %v", err)
	}
}

var _ workflow.Host = (*fakeHost)(nil)
