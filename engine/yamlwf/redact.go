package yamlwf

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/uncaged/workflow/engine/canonyaml"
)

// Hidden is what RedactSecrets writes in place of a value that may be a
// secret.
const Hidden = "(hidden)"

// RedactSecrets is a workflow file as it may be shown to whoever can look
// at the machine's workflows: each agent spec's env values and args —
// where API keys and tokens are written — replaced by Hidden, everything
// else as written (comments kept; the file is re-rendered only when
// something was hidden). hidden lists the paths of what was replaced
// ("agents.review.env.API_KEY", "roles.plan.agent.args[2]").
//
// Only a file that parses is redacted: the secrets' places are known only
// in a workflow's structure. An alias to a hidden value is hidden with it.
// def is the workflow as Parse reads src, for a caller that shows more of
// it: the redaction has parsed it already.
func RedactSecrets(src []byte) (out []byte, hidden []string, def *Definition, err error) {
	if def, err = Parse(src); err != nil {
		return nil, nil, nil, err
	}
	doc, err := canonyaml.ParseYAML(src)
	if err != nil {
		return nil, nil, nil, err // Parse read it: not reached
	}
	r := redactor{seen: map[*yaml.Node]bool{}}
	eachAgentSpec(doc.Content[0], r.spec)
	if len(r.hidden) == 0 {
		return src, nil, def, nil
	}
	if out, err = encode(doc); err != nil {
		return nil, nil, nil, fmt.Errorf("re-rendering the workflow: %w", err)
	}
	return out, r.hidden, def, nil
}

type redactor struct {
	hidden []string
	seen   map[*yaml.Node]bool
}

// spec hides the env values and args of an agent spec (a mapping; an
// agent's name refers to a spec hidden where it is defined).
func (r *redactor) spec(n *yaml.Node, path string) {
	for _, f := range pairs(n) {
		switch f[0].Value {
		case "env":
			for _, e := range pairs(f[1]) {
				r.hide(e[1], path+".env."+e[0].Value)
			}
		case "args":
			if s := deref(f[1]); s.Kind == yaml.SequenceNode {
				for i, a := range s.Content {
					r.hide(a, fmt.Sprintf("%s.args[%d]", path, i))
				}
			}
		}
	}
}

// hide replaces the value n (or what it aliases: the value is hidden
// where it is written) with Hidden.
func (r *redactor) hide(n *yaml.Node, path string) {
	n = deref(n)
	r.hidden = append(r.hidden, path)
	if r.seen[n] {
		return
	}
	r.seen[n] = true
	// The anchor stays, so that aliases still name it.
	n.Kind, n.Tag, n.Value, n.Style, n.Content = yaml.ScalarNode, "!!str", Hidden, 0, nil
}
