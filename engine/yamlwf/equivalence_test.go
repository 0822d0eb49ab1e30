package yamlwf_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/executor"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/jsrt"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/workflow"
	"github.com/uncaged/workflow/engine/yamlwf"
)

const exampleDir = "../../examples/hello-world"

// stepRecord is what must be identical between the two runs.
type stepRecord struct {
	Role, Meta, Content string
	ContentRefs         []string
}

// runThread runs wf as a fresh thread in its own storage root through the
// real executor and returns its steps and outcome.
func runThread(t *testing.T, wf workflow.Workflow, hash string, env map[string]string) ([]stepRecord, executor.Result) {
	t.Helper()
	l := storage.Layout{Root: t.TempDir()}
	e := executor.New(l)
	th := executor.Thread{ID: ids.NewThreadID(time.Now()), BundleHash: hash, WorkflowName: "hello-world", Prompt: "Say hello."}
	if err := e.Begin(&th); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	res, err := e.Run(context.Background(), wf, th, executor.Env{Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	frames, err := threads.Walk(e.CAS, res.RootHash)
	if err != nil {
		t.Fatal(err)
	}
	var steps []stepRecord
	for _, f := range frames {
		p := f.State.Payload
		if p.Role == node.RoleEnd {
			continue
		}
		meta, err := p.Meta.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		n, err := e.CAS.GetNode(p.Content)
		if err != nil {
			t.Fatal(err)
		}
		c := n.(node.Content)
		steps = append(steps, stepRecord{Role: p.Role, Meta: string(meta), Content: p.Content, ContentRefs: c.Refs})
	}
	return steps, res
}

// TestYAMLAndBundleStoreIdenticalSteps runs examples/hello-world as YAML and
// as the hand-written bundle, both with the same exec scripts: the role
// sequence (a routing loop: the first draft is rejected), the meta, the
// content hashes and the content nodes' refs must be identical.
func TestYAMLAndBundleStoreIdenticalSteps(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs(exampleDir)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(dir, "hello-world.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	stored, err := yamlwf.ResolvePaths(src, dir)
	if err != nil {
		t.Fatal(err)
	}
	ywf, err := yamlwf.Load(stored, yamlwf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	jsSrc, err := os.ReadFile(filepath.Join(dir, "hello-world.esm.js"))
	if err != nil {
		t.Fatal(err)
	}
	jwf, err := jsrt.Load(jsSrc, "hello-world.esm.js", jsrt.Options{})
	if err != nil {
		t.Fatal(err)
	}

	yd, _ := ywf.Descriptor().MarshalJSON()
	jd, _ := jwf.Descriptor().MarshalJSON()
	if string(yd) != string(jd) {
		t.Errorf("descriptors differ\nyaml %s\njs   %s", yd, jd)
	}

	ySteps, yRes := runThread(t, ywf, ids.HashBytes(stored), nil)
	jSteps, jRes := runThread(t, jwf, ids.HashBytes(jsSrc), map[string]string{"HELLO_WORLD_ROLES": filepath.Join(dir, "roles")})
	if yRes.ReturnCode != 0 || yRes.Summary != yamlwf.SummaryEnd || yRes.Failure != "" {
		t.Fatalf("YAML run = %+v", yRes)
	}
	if jRes.ReturnCode != yRes.ReturnCode || jRes.Summary != yRes.Summary || jRes.Failure != "" {
		t.Fatalf("JS run = %+v, YAML run = %+v", jRes, yRes)
	}
	var roles []string
	for _, s := range ySteps {
		roles = append(roles, s.Role)
	}
	if strings.Join(roles, ",") != "writer,reviewer,writer,reviewer" {
		t.Fatalf("YAML roles = %v", roles)
	}
	if len(jSteps) != len(ySteps) {
		t.Fatalf("JS ran %d steps, YAML %d\njs   %+v\nyaml %+v", len(jSteps), len(ySteps), jSteps, ySteps)
	}
	for i := range ySteps {
		y, j := ySteps[i], jSteps[i]
		if y.Role != j.Role || y.Meta != j.Meta || y.Content != j.Content || strings.Join(y.ContentRefs, ",") != strings.Join(j.ContentRefs, ",") {
			t.Errorf("step %d differs\nyaml %+v\njs   %+v", i, y, j)
		}
	}
	// The loop really went round, and the reviewer's casRef is the content
	// it reviewed.
	if !strings.Contains(ySteps[1].Meta, `"status":"rejected"`) || !strings.Contains(ySteps[3].Meta, `"status":"approved"`) {
		t.Fatalf("reviews = %s, %s", ySteps[1].Meta, ySteps[3].Meta)
	}
	if strings.Join(ySteps[3].ContentRefs, ",") != ySteps[2].Content {
		t.Fatalf("approval refs %v, want the second draft %s", ySteps[3].ContentRefs, ySteps[2].Content)
	}
}

// casRefCases are schema/meta pairs for comparing the Go and JavaScript
// collectors rule by rule.
var casRefCases = []struct{ Schema, Meta string }{
	{`{"properties":{"b":{"casRef":true},"a":{"casRef":true}}}`, `{"a":"AAAAAAAAAAAAA","b":"BBBBBBBBBBBBB"}`},
	{`{"properties":{"l":{"items":{"casRef":true}}}}`, `{"l":["AAAAAAAAAAAAA","BBBBBBBBBBBBB","AAAAAAAAAAAAA"]}`},
	{`{"properties":{"t":{"prefixItems":[{"type":"string"},{"casRef":true}],"items":{"casRef":true}}}}`, `{"t":["A","B","C"]}`},
	{`{"properties":{"t":{"items":[{"casRef":true}],"additionalItems":{"casRef":true}}}}`, `{"t":["A","B"]}`},
	{`{"properties":{"x":{"type":"string"}},"additionalProperties":{"casRef":true}}`, `{"x":"A","y":"B","2":"C"}`},
	{`{"$defs":{"R":{"casRef":true}},"properties":{"x":{"$ref":"#/$defs/R"},"y":{"$ref":"#/$defs/missing"}}}`, `{"x":"A","y":"B"}`},
	{`{"allOf":[{"properties":{"x":{"casRef":true}}},{"properties":{"y":{"casRef":true}}}]}`, `{"y":"B","x":"A"}`},
	{`{"oneOf":[{"type":"object","properties":{"s":{"const":"a"},"l":{"casRef":true}},"required":["s"]},{"type":"object","properties":{"s":{"enum":["p"]},"p":{"casRef":true}}}]}`, `{"s":"p","p":"P","l":"L"}`},
	{`{"anyOf":[{"required":["x"],"properties":{"x":{"casRef":true}}},{"properties":{"y":{"casRef":true}}}]}`, `{"y":"A"}`},
	{`{"properties":{"n":{"anyOf":[{"type":"integer","casRef":true},{"type":"number"},{"type":["null","string"],"casRef":true}]}}}`, `{"n":"S"}`},
	{`{"anyOf":[false,true,{"casRef":true}]}`, `{"x":"A"}`},
	{`{"$ref":"#"}`, `{"x":"A"}`},
	{`{"properties":{"o":{"properties":{"deep":{"items":{"properties":{"h":{"casRef":true}}}}}}}}`, `{"o":{"deep":[{"h":"A"},{"h":null},{},{"h":"B"}]}}`},
	{`{"properties":{"x":{"const":{"k":[1,2]},"casRef":true}}}`, `{"x":"A"}`},
}

// TestCASRefRulesMatchTheRuntime runs the runtime's own collectCasRefs over
// the cases in a bundle and compares with CollectCASRefs.
func TestCASRefRulesMatchTheRuntime(t *testing.T) {
	t.Parallel()
	cases, err := json.Marshal(casRefCases)
	if err != nil {
		t.Fatal(err)
	}
	bundle := fmt.Sprintf(`import { collectCasRefs } from "@uncaged/workflow-runtime";
export const descriptor = { description: "casRef rules", roles: {}, graph: { edges: [] } };
export const run = async function* () {
  const cases = %s;
  const out = cases.map((c) => collectCasRefs(JSON.parse(c.Schema), JSON.parse(c.Meta)));
  return { returnCode: 0, summary: JSON.stringify(out) };
};
`, cases)
	wf, err := jsrt.Load([]byte(bundle), "casrefs.esm.js", jsrt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, res := runThread(t, wf, ids.HashBytes([]byte(bundle)), nil)
	var js [][]string
	if err := json.Unmarshal([]byte(res.Summary), &js); err != nil || len(js) != len(casRefCases) {
		t.Fatalf("runtime answered %+v (%v)", res, err)
	}
	if strings.Join(js[0], ",") != "AAAAAAAAAAAAA,BBBBBBBBBBBBB" {
		t.Fatalf("runtime collected %v for the first case", js[0])
	}
	for i, c := range casRefCases {
		s, err := canonyaml.FromJSON([]byte(c.Schema))
		if err != nil {
			t.Fatal(err)
		}
		m, err := canonyaml.FromJSON([]byte(c.Meta))
		if err != nil {
			t.Fatal(err)
		}
		got := yamlwf.CollectCASRefs(s.(canonyaml.Map), m.(canonyaml.Map))
		if strings.Join(got, ",") != strings.Join(js[i], ",") {
			t.Errorf("case %d %s over %s: Go %q, runtime %q", i, c.Schema, c.Meta, got, js[i])
		}
	}
}
