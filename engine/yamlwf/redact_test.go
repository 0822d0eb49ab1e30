package yamlwf

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestRedactSecretsHidesEveryEnvValueAndArg: wherever an agent spec is
// written (under agents:, as the default agent, inline in a role), in
// block or flow style, with its values plain, quoted or as block scalars,
// directly or through an alias, no env value or argument survives in
// what may be shown; everything else does (the workflow reads back the
// same but for the hidden values), comments included; and the paths
// hidden are named.
func TestRedactSecretsHidesEveryEnvValueAndArg(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(17, 4))
	secret := func() string { return fmt.Sprintf("sk-%016x", rng.Uint64()) }
	quote := []func(string) string{
		func(s string) string { return s },
		func(s string) string { return "'" + s + "'" },
		func(s string) string { return `"` + s + `"` },
	}
	for round := range 200 {
		var secrets, wantHidden []string
		value := func(indent string) string {
			s := secret()
			secrets = append(secrets, s)
			if rng.IntN(5) == 0 {
				return "|\n" + indent + "  " + s
			}
			return quote[rng.IntN(len(quote))](s)
		}
		// spec writes an agent spec at path, indented under a key.
		spec := func(path, indent string) string {
			var env, args []string
			envKeys := []string{"API_KEY", "TOKEN", "X"}[:1+rng.IntN(3)]
			for _, k := range envKeys {
				wantHidden = append(wantHidden, path+".env."+k)
			}
			nArgs := rng.IntN(3)
			for i := range nArgs {
				wantHidden = append(wantHidden, fmt.Sprintf("%s.args[%d]", path, i))
			}
			if rng.IntN(2) == 0 { // flow style: scalars only
				for _, k := range envKeys {
					s := secret()
					secrets = append(secrets, s)
					env = append(env, k+": "+quote[rng.IntN(len(quote))](s))
				}
				for range nArgs {
					s := secret()
					secrets = append(secrets, s)
					args = append(args, quote[rng.IntN(len(quote))](s))
				}
				out := " {type: exec, command: /bin/agent, env: {" + strings.Join(env, ", ") + "}"
				if nArgs > 0 {
					out += ", args: [" + strings.Join(args, ", ") + "]"
				}
				return out + "}"
			}
			out := "\n" + indent + "type: exec\n" + indent + "command: /bin/agent # keep this comment\n" + indent + "env:\n"
			for _, k := range envKeys {
				out += indent + "  " + k + ": " + value(indent+"  ") + "\n"
			}
			if nArgs > 0 {
				out += indent + "args:\n"
				for range nArgs {
					out += indent + "  - " + value(indent+"  ") + "\n"
				}
			}
			return strings.TrimSuffix(out, "\n")
		}
		src := "version: 1\ndescription: Redaction round " + fmt.Sprint(round) + "\n"
		src += "agents:\n  named:" + spec("agents.named", "    ") + "\n"
		if rng.IntN(2) == 0 {
			src += "agent:" + spec("agent", "  ") + "\n"
		}
		src += "roles:\n  first:\n    description: One\n    prompt: Go.\n    agent:" + spec("roles.first.agent", "      ") + "\n"
		src += "  second:\n    description: Two\n    prompt: Go on.\n    agent: named\n"
		src += "graph:\n  __start__: first\n  first: second\n  second: __end__\n"

		out, hidden, _, err := RedactSecrets([]byte(src))
		if err != nil {
			t.Fatalf("round %d: %v\n%s", round, err, src)
		}
		for _, s := range secrets {
			if strings.Contains(string(out), s) {
				t.Fatalf("round %d: secret %s shown:\n%s\nfrom:\n%s", round, s, out, src)
			}
		}
		if slices.Sort(hidden); !slices.Equal(hidden, sorted(wantHidden)) {
			t.Fatalf("round %d: hidden %v, want %v", round, hidden, sorted(wantHidden))
		}
		if strings.Contains(src, "# keep this comment") && !strings.Contains(string(out), "# keep this comment") {
			t.Fatalf("round %d: a comment was lost:\n%s", round, out)
		}
		assertSameButHidden(t, src, out)
	}
}

// assertSameButHidden fails unless shown reads back as the workflow src
// is, but with every env value and argument Hidden.
func assertSameButHidden(t *testing.T, src string, shown []byte) {
	t.Helper()
	want, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(shown)
	if err != nil {
		t.Fatalf("what is shown does not parse: %v\n%s", err, shown)
	}
	for i := range want.Roles {
		a := &want.Roles[i].Agent
		for k := range a.Env {
			a.Env[k] = Hidden
		}
		for j := range a.Args {
			a.Args[j] = Hidden
		}
	}
	// What a workflow is, not where in the file it was written.
	type role struct {
		Name, Description, Prompt, AgentName string
		Agent                                any
		Output                               any
	}
	roles := func(d *Definition) []role {
		var out []role
		for _, r := range d.Roles {
			out = append(out, role{r.Name, r.Description, r.Prompt, r.AgentName, r.Agent, r.Output})
		}
		return out
	}
	if !reflect.DeepEqual(roles(want), roles(got)) || !reflect.DeepEqual(want.Routes, got.Routes) || want.Description != got.Description {
		t.Fatalf("shown reads back as\n%+v\nwant\n%+v", roles(got), roles(want))
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// TestRedactSecretsFollowsAliases: a value written once with an anchor
// and used by alias in another agent's env is hidden where it is written,
// so neither place shows it; a workflow with no env or args is shown
// exactly as written; and what does not parse is not shown at all.
func TestRedactSecretsFollowsAliases(t *testing.T) {
	t.Parallel()
	src := `version: 1
description: Shared key
agents:
  a: {type: exec, command: /bin/a, env: {KEY: &key sk-shared-123}}
  b: {type: exec, command: /bin/b, env: {KEY: *key}, args: [*key, --verbose]}
roles:
  r:
    description: R
    prompt: P
    agent: a
  s:
    description: S
    prompt: P
    agent: b
graph:
  __start__: r
  r: s
  s: __end__
`
	out, hidden, _, err := RedactSecrets([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "sk-shared-123") || strings.Contains(string(out), "--verbose") {
		t.Fatalf("shown:\n%s", out)
	}
	want := []string{"agents.a.env.KEY", "agents.b.args[0]", "agents.b.args[1]", "agents.b.env.KEY"}
	if slices.Sort(hidden); !slices.Equal(hidden, want) {
		t.Fatalf("hidden %v, want %v", hidden, want)
	}
	assertSameButHidden(t, src, out)

	out, hidden, _, err = RedactSecrets([]byte(validYAML))
	if err != nil || !slices.Equal(hidden, []string{"roles.coder.agent.args[0]", "roles.coder.agent.args[1]"}) || strings.Contains(string(out), "echo") {
		t.Fatalf("the reference workflow: %v %v\n%s", hidden, err, out)
	}
	assertSameButHidden(t, validYAML, out)
	plain := strings.Replace(validYAML, `agent: {type: exec, command: sh, args: [-c, "echo '{}'"]}`, "agent: writer", 1)
	if out, hidden, _, err := RedactSecrets([]byte(plain)); err != nil || hidden != nil || string(out) != plain {
		t.Fatalf("nothing to hide: changed (%v, %v):\n%s", hidden, err, out)
	}
	for _, bad := range []string{"", "version: 1\n", "not: [yaml", "version: 1\ndescription: x\nroles: {}\ngraph: {}\nagents: {a: {type: exec, env: {K: [1]}}}\n"} {
		if out, hidden, def, err := RedactSecrets([]byte(bad)); err == nil || out != nil || hidden != nil || def != nil {
			t.Errorf("RedactSecrets(%q) = %q, %v, %v, %v; want an error and nothing shown", bad, out, hidden, def, err)
		}
	}
}
