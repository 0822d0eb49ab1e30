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
	for _, top := range pairs(doc.Content[0]) {
		switch top[0].Value {
		case "agent":
			fix(top[1])
		case "agents":
			for _, a := range pairs(top[1]) {
				fix(a[1])
			}
		case "roles":
			for _, r := range pairs(top[1]) {
				for _, f := range pairs(r[1]) {
					if f[0].Value == "agent" {
						fix(f[1])
					}
				}
			}
		}
	}
	if !changed {
		return data, nil
	}
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
