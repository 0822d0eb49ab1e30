package yamlwf

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/uncaged/workflow/engine/canonyaml"
)

// ResolvePaths returns the workflow with every agent's relative command
// ("./roles/review.sh": a path with a slash, not a bare program name looked
// up on PATH) and relative workspace made absolute against baseDir, the
// directory of the YAML file. The engine stores and runs a copy of the file,
// from a working directory of its own, so relative paths would otherwise
// point nowhere. Data with nothing to resolve is returned unchanged (same
// bytes, same hash); otherwise it is re-encoded, comments kept. baseDir must
// be absolute. Call Parse first: ResolvePaths assumes a valid workflow.
func ResolvePaths(data []byte, baseDir string) ([]byte, error) {
	if !filepath.IsAbs(baseDir) {
		return nil, errors.New("yamlwf: ResolvePaths needs an absolute base directory")
	}
	doc, err := canonyaml.ParseYAML(data)
	if err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return data, nil
	}
	changed := false
	fix := func(spec *yaml.Node) {
		spec = deref(spec)
		if spec == nil || spec.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(spec.Content); i += 2 {
			k, v := spec.Content[i], deref(spec.Content[i+1])
			if v.Kind != yaml.ScalarNode || v.Value == "" || filepath.IsAbs(v.Value) {
				continue
			}
			switch {
			case k.Value == "command" && strings.Contains(v.Value, "/"),
				k.Value == "workspace":
				v.Value = filepath.Join(baseDir, v.Value)
				changed = true
			}
		}
	}
	eachAgentSpec(doc.Content[0], func(spec *yaml.Node, _ string) { fix(spec) })
	if !changed {
		return data, nil
	}
	return encode(doc)
}

// eachAgentSpec calls fn with every agent spec a workflow writes (under
// agents:, the default agent:, a role's agent:) and its path; an agent
// named rather than written is not one.
func eachAgentSpec(root *yaml.Node, fn func(spec *yaml.Node, path string)) {
	for _, top := range pairs(root) {
		switch top[0].Value {
		case "agent":
			fn(top[1], "agent")
		case "agents":
			for _, a := range pairs(top[1]) {
				fn(a[1], join("agents", a[0].Value))
			}
		case "roles":
			for _, r := range pairs(top[1]) {
				for _, f := range pairs(r[1]) {
					if f[0].Value == "agent" {
						fn(f[1], join("roles", r[0].Value)+".agent")
					}
				}
			}
		}
	}
}

// encode renders a workflow document again, comments kept.
func encode(doc *yaml.Node) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// pairs lists a mapping's key/value nodes (nothing for other nodes).
func pairs(n *yaml.Node) [][2]*yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	out := make([][2]*yaml.Node, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, [2]*yaml.Node{deref(n.Content[i]), n.Content[i+1]})
	}
	return out
}
