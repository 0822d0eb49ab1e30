package workflow

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/canonyaml"
)

func mustJSON(t *testing.T, s string) any {
	t.Helper()
	v, err := canonyaml.FromJSON([]byte(s))
	if err != nil {
		t.Fatalf("FromJSON(%s): %v", s, err)
	}
	return v
}

const okRoles = `{"a": {"description": "A", "schema": {"type": "object"}}}`

func TestValidateDescriptorErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, json, want string
	}{
		{"null", `null`, "descriptor must be a non-array object"},
		{"array", `[]`, "descriptor must be a non-array object"},
		{"string", `"x"`, "descriptor must be a non-array object"},
		{"number", `1`, "descriptor must be a non-array object"},
		{"missing description", `{"roles": {}}`, "descriptor.description must be a string"},
		{"numeric description", `{"description": 123, "roles": {}}`, "descriptor.description must be a string"},
		{"null description", `{"description": null, "roles": {}}`, "descriptor.description must be a string"},
		{"boolean description", `{"description": true, "roles": {}}`, "descriptor.description must be a string"},
		{"missing roles", `{"description": "x"}`, "descriptor.roles must be a non-array object"},
		{"null roles", `{"description": "x", "roles": null}`, "descriptor.roles must be a non-array object"},
		{"array roles", `{"description": "x", "roles": []}`, "descriptor.roles must be a non-array object"},
		{"null role", `{"description": "x", "roles": {"bad": null}}`, "descriptor.roles.bad must be a non-array object"},
		{"array role", `{"description": "x", "roles": {"bad": []}}`, "descriptor.roles.bad must be a non-array object"},
		{"string role", `{"description": "x", "roles": {"bad": "s"}}`, "descriptor.roles.bad must be a non-array object"},
		{"role description", `{"description": "x", "roles": {"r": {"schema": {}}}}`, "descriptor.roles.r.description must be a string"},
		{"role schema missing", `{"description": "x", "roles": {"r": {"description": "d"}}}`, "descriptor.roles.r.schema must be a non-array object"},
		{"role schema null", `{"description": "x", "roles": {"r": {"description": "d", "schema": null}}}`, "descriptor.roles.r.schema must be a non-array object"},
		{"role schema array", `{"description": "x", "roles": {"r": {"description": "d", "schema": []}}}`, "descriptor.roles.r.schema must be a non-array object"},
		{"first bad role wins", `{"description": "x", "roles": {"good": {"description": "g", "schema": {}}, "bad1": {"schema": {}}, "bad2": null}}`, "descriptor.roles.bad1.description must be a string"},
		{"roles before graph", `{"description": "x", "roles": {"bad": 1}, "graph": 5}`, "descriptor.roles.bad must be a non-array object"},
		{"missing graph", `{"description": "x", "roles": ` + okRoles + `}`, "descriptor.graph must be a non-array object"},
		{"array graph", `{"description": "x", "roles": {}, "graph": []}`, "descriptor.graph must be a non-array object"},
		{"missing edges", `{"description": "x", "roles": {}, "graph": {}}`, "descriptor.graph.edges must be an array"},
		{"object edges", `{"description": "x", "roles": {}, "graph": {"edges": {}}}`, "descriptor.graph.edges must be an array"},
		{"null edge", `{"description": "x", "roles": {}, "graph": {"edges": [null]}}`, "descriptor.graph.edges[0] must be a non-array object"},
		{"array edge", `{"description": "x", "roles": {}, "graph": {"edges": [{"from":"a","to":"b","condition":"FALLBACK"}, []]}}`, "descriptor.graph.edges[1] must be a non-array object"},
		{"edge from", `{"description": "x", "roles": {}, "graph": {"edges": [{"to":"b","condition":"c"}]}}`, "descriptor.graph.edges[0].from must be a string"},
		{"edge to", `{"description": "x", "roles": {}, "graph": {"edges": [{"from":"a","to":1,"condition":"c"}]}}`, "descriptor.graph.edges[0].to must be a string"},
		{"edge condition", `{"description": "x", "roles": {}, "graph": {"edges": [{"from":"a","to":"b"}]}}`, "descriptor.graph.edges[0].condition must be a string"},
		{"edge conditionDescription", `{"description": "x", "roles": {}, "graph": {"edges": [{"from":"a","to":"b","condition":"c","conditionDescription":3}]}}`, "descriptor.graph.edges[0].conditionDescription must be a string or null"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ValidateDescriptor(mustJSON(t, c.json))
			if err == nil || err.Error() != c.want {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

func TestValidateDescriptorNonJSONValueIsNotAnObject(t *testing.T) {
	t.Parallel()
	type function struct{} // stands in for a JavaScript function
	v := canonyaml.Map{{Key: "description", Value: "x"}, {Key: "roles", Value: canonyaml.Map{{Key: "r", Value: function{}}}}}
	if _, err := ValidateDescriptor(v); err == nil || err.Error() != "descriptor.roles.r must be a non-array object" {
		t.Fatalf("got %v", err)
	}
}

func TestValidateDescriptorOK(t *testing.T) {
	t.Parallel()
	d, err := ValidateDescriptor(mustJSON(t, `{
		"description": "two roles",
		"roles": {
			"zeta": {"description": "Z", "systemPrompt": "be z", "schema": {"type": "object", "properties": {"b": {}, "a": {}}}},
			"alpha": {"description": "A", "systemPrompt": 7, "schema": {}}
		},
		"graph": {"edges": [
			{"from": "__start__", "to": "zeta", "condition": "FALLBACK", "conditionDescription": null},
			{"from": "zeta", "to": "alpha", "condition": "ready", "conditionDescription": "when ready"},
			{"from": "alpha", "to": "__end__", "condition": "FALLBACK"}
		]}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if d.Description != "two roles" || len(d.Roles) != 2 {
		t.Fatalf("got %+v", d)
	}
	if d.Roles[0].Name != "zeta" || d.Roles[1].Name != "alpha" {
		t.Fatalf("roles out of declaration order: %+v", d.Roles)
	}
	if d.Roles[0].SystemPrompt != "be z" || d.Roles[1].SystemPrompt != "" {
		t.Fatalf("systemPrompt: %q %q", d.Roles[0].SystemPrompt, d.Roles[1].SystemPrompt)
	}
	props, _ := d.Roles[0].Schema.Get("properties")
	if m := props.(canonyaml.Map); m[0].Key != "b" || m[1].Key != "a" {
		t.Fatalf("schema key order lost: %v", m)
	}
	if len(d.Graph.Edges) != 3 {
		t.Fatalf("edges: %+v", d.Graph.Edges)
	}
	if d.Graph.Edges[0].ConditionDescription != nil || d.Graph.Edges[2].ConditionDescription != nil {
		t.Fatalf("FALLBACK edges should have a null conditionDescription")
	}
	if cd := d.Graph.Edges[1].ConditionDescription; cd == nil || *cd != "when ready" {
		t.Fatalf("conditionDescription: %v", cd)
	}
}

func sampleDescriptor() Descriptor {
	return Descriptor{
		Description: "Analyse then write a report.",
		Roles: []RoleDescriptor{{
			Name:         "analyst",
			Description:  "Analyses",
			SystemPrompt: "You are an expert analyst...",
			Schema:       canonyaml.Map{{Key: "type", Value: "object"}},
		}},
		Graph: Graph{Edges: []Edge{{From: "__start__", To: "analyst", Condition: "FALLBACK"}}},
	}
}

func TestDescriptorMarshalYAMLMatchesSidecar(t *testing.T) {
	t.Parallel()
	got, err := sampleDescriptor().MarshalYAML()
	if err != nil {
		t.Fatal(err)
	}
	want := `"description": "Analyse then write a report."
"roles":
  "analyst":
    "description": "Analyses"
    "systemPrompt": "You are an expert analyst..."
    "schema":
      "type": "object"
"graph":
  "edges":
    - "from": "__start__"
      "to": "analyst"
      "condition": "FALLBACK"
      "conditionDescription": null
`
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestDescriptorEmptyCollectionsYAML(t *testing.T) {
	t.Parallel()
	got, err := Descriptor{Description: "fixture"}.MarshalYAML()
	if err != nil {
		t.Fatal(err)
	}
	want := "\"description\": \"fixture\"\n\"roles\": {}\n\"graph\":\n  \"edges\": []\n"
	if string(got) != want {
		t.Fatalf("got %q want %q", got, want)
	}
	back, err := ParseDescriptorYAML(got)
	if err != nil {
		t.Fatal(err)
	}
	if back.Description != "fixture" || len(back.Roles) != 0 || len(back.Graph.Edges) != 0 {
		t.Fatalf("round trip: %+v", back)
	}
}

func TestDescriptorRoundTrips(t *testing.T) {
	t.Parallel()
	d := sampleDescriptor()
	cd := "reviewer approved"
	d.Roles = append(d.Roles, RoleDescriptor{
		Name: "writer", Description: "Writes", Schema: canonyaml.Map{
			{Key: "type", Value: "object"},
			{Key: "required", Value: []any{"text"}},
		},
	})
	d.Graph.Edges = append(d.Graph.Edges, Edge{From: "analyst", To: "writer", Condition: "approved", ConditionDescription: &cd})

	y, err := d.MarshalYAML()
	if err != nil {
		t.Fatal(err)
	}
	fromYAML, err := ParseDescriptorYAML(y)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromYAML, d) {
		t.Fatalf("YAML round trip:\n got %+v\nwant %+v", fromYAML, d)
	}

	j, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON := `{"description":"Analyse then write a report.","roles":{"analyst":{"description":"Analyses","systemPrompt":"You are an expert analyst...","schema":{"type":"object"}},"writer":{"description":"Writes","systemPrompt":"","schema":{"type":"object","required":["text"]}}},"graph":{"edges":[{"from":"__start__","to":"analyst","condition":"FALLBACK","conditionDescription":null},{"from":"analyst","to":"writer","condition":"approved","conditionDescription":"reviewer approved"}]}}`
	if string(j) != wantJSON {
		t.Fatalf("JSON:\n got %s\nwant %s", j, wantJSON)
	}
	var fromJSON Descriptor
	if err := json.Unmarshal(j, &fromJSON); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromJSON, d) {
		t.Fatalf("JSON round trip:\n got %+v\nwant %+v", fromJSON, d)
	}
}

func TestParseDescriptorYAMLErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"", "descriptor must be a non-array object"},
		{"- 1\n", "descriptor must be a non-array object"},
		{"description: 1\n", "descriptor.description must be a string"},
		{"description: x\nroles: {}\n", "descriptor.graph must be a non-array object"},
		{"description: [\n", "descriptor YAML:"},
	} {
		_, err := ParseDescriptorYAML([]byte(c.in))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("ParseDescriptorYAML(%q) = %v, want %q", c.in, err, c.want)
		}
	}
	var d Descriptor
	if err := json.Unmarshal([]byte(`{"description": "x", "roles": []}`), &d); err == nil || !strings.Contains(err.Error(), "descriptor.roles must be a non-array object") {
		t.Fatalf("UnmarshalJSON: %v", err)
	}
}
