package yamlwf

import (
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/canonyaml"
)

func TestCollectCASRefs(t *testing.T) {
	t.Parallel()
	const a, b, c = "AAAAAAAAAAAAA", "BBBBBBBBBBBBB", "CCCCCCCCCCCCC"
	cases := []struct {
		name, schema, meta, want string
	}{
		{"flat, in the value's key order", `{"properties":{"second":{"type":"string","casRef":true},"first":{"type":"string","casRef":true}}}`,
			`{"first":"` + a + `","second":"` + b + `"}`, a + "," + b},
		{"unannotated strings ignored", `{"properties":{"x":{"type":"string"},"y":{"type":"string","casRef":false}}}`, `{"x":"` + a + `","y":"` + b + `"}`, ""},
		{"missing and null skipped", `{"properties":{"x":{"type":"string","casRef":true},"y":{"casRef":true}}}`, `{"y":null}`, ""},
		{"nested array of objects", `{"properties":{"phases":{"type":"array","items":{"type":"object","properties":{"hash":{"type":"string","casRef":true},"title":{"type":"string"}}}}}}`,
			`{"phases":[{"hash":"` + a + `","title":"one"},{"title":"none"},{"hash":"` + b + `","title":"two"}]}`, a + "," + b},
		{"array of refs, each once", `{"properties":{"files":{"items":{"type":"string","casRef":true}}}}`, `{"files":["` + a + `","` + b + `","` + a + `"]}`, a + "," + b},
		{"prefixItems then items", `{"properties":{"t":{"prefixItems":[{"type":"string"},{"casRef":true}],"items":{"casRef":true}}}}`, `{"t":["` + a + `","` + b + `","` + c + `"]}`, b + "," + c},
		{"additionalProperties", `{"properties":{"x":{"type":"string"}},"additionalProperties":{"casRef":true}}`, `{"x":"` + a + `","y":"` + b + `"}`, b},
		{"local $ref", `{"$defs":{"Ref":{"type":"string","casRef":true}},"properties":{"x":{"$ref":"#/$defs/Ref"}}}`, `{"x":"` + a + `"}`, a},
		{"allOf: every branch", `{"allOf":[{"properties":{"x":{"casRef":true}}},{"properties":{"y":{"casRef":true}}}]}`, `{"x":"` + a + `","y":"` + b + `"}`, a + "," + b},
		{"discriminated union picks by const", `{"oneOf":[` +
			`{"type":"object","properties":{"status":{"const":"aborted"},"log":{"type":"string","casRef":true}},"required":["status"]},` +
			`{"type":"object","properties":{"status":{"const":"planned"},"plan":{"type":"string","casRef":true}},"required":["status"]}]}`,
			`{"status":"planned","plan":"` + b + `","log":"` + a + `"}`, b},
		{"union branch needs its required keys", `{"anyOf":[{"required":["x"],"properties":{"x":{"casRef":true}}},{"properties":{"y":{"casRef":true}}}]}`, `{"y":"` + a + `"}`, a},
		{"boolean branch", `{"anyOf":[false,true]}`, `{"x":"` + a + `"}`, ""},
		{"recursive $ref stops", `{"$ref":"#"}`, `{"x":"` + a + `"}`, ""},
		{"anyOf: first branch whose type fits", `{"properties":{"x":{"anyOf":[{"type":"number"},{"type":"string","casRef":true},{"type":"string"}]}}}`, `{"x":"` + c + `"}`, c},
		{"oneOf over objects (a discriminated union)", `{"oneOf":[{"type":"object","properties":{"plan":{"type":"string","casRef":true}}}]}`, `{"plan":"` + a + `"}`, a},
		{"anyOf with no fitting branch", `{"properties":{"x":{"anyOf":[{"type":"number"}]}}}`, `{"x":"` + a + `"}`, ""},
		{"type list", `{"properties":{"x":{"anyOf":[{"type":["null","string"],"casRef":true}]}}}`, `{"x":"` + a + `"}`, a},
		{"schema without properties", `{"type":"object"}`, `{"x":"` + a + `"}`, ""},
		{"wrong shapes are ignored", `{"properties":{"x":{"items":{"casRef":true}}}}`, `{"x":{"not":"an array"}}`, ""},
	}
	for _, c := range cases {
		s, err := canonyaml.FromJSON([]byte(c.schema))
		if err != nil {
			t.Fatal(err)
		}
		got := CollectCASRefs(s.(canonyaml.Map), metaOf(t, c.meta))
		if strings.Join(got, ",") != c.want {
			t.Errorf("%s: refs = %v, want %q", c.name, got, c.want)
		}
	}
}
