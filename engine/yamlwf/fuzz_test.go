package yamlwf

import (
	"testing"

	"github.com/uncaged/workflow/engine/workflow"
)

// FuzzParse: no input panics the parser, and whatever it accepts yields a
// descriptor that survives the sidecar round trip the API reads.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		validYAML, loopYAML, "", "version: 1\n", "a: &x [*x]\n",
		"version: 1\ndescription: d\nagent: {type: exec, command: x}\nroles: {a: {description: d, prompt: p}}\ngraph: {__start__: a, a: {s: a, FALLBACK: __end__}}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := Load(data, Options{})
		if err != nil {
			if w != nil {
				t.Fatal("workflow returned with an error")
			}
			return
		}
		d := w.Descriptor()
		sidecar, err := d.MarshalYAML()
		if err != nil {
			t.Fatalf("descriptor does not marshal: %v", err)
		}
		back, err := workflow.ParseDescriptorYAML(sidecar)
		if err != nil {
			t.Fatalf("descriptor does not validate: %v\n%s", err, sidecar)
		}
		if len(back.Roles) != len(d.Roles) || len(back.Graph.Edges) != len(d.Graph.Edges) {
			t.Fatalf("round trip lost roles or edges")
		}
		resolved, err := ResolvePaths(data, "/base")
		if err != nil {
			t.Fatalf("ResolvePaths rejects a valid workflow: %v", err)
		}
		again, err := Load(resolved, Options{})
		if err != nil {
			t.Fatalf("the resolved workflow does not load: %v\n%s", err, resolved)
		}
		if len(again.Definition().Roles) != len(w.Definition().Roles) {
			t.Fatal("ResolvePaths changed the roles")
		}
	})
}
