package deploy

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// demoCommand matches a binary's command line in run-demo.sh, up to the
// end of the command: a closing $( ), a redirection, & or the line's end.
var demoCommand = regexp.MustCompile(`"\$bin/(uncaged-[a-z]+)"([^)&\n]*)`)

// demoCommands are the command lines run-demo.sh runs, by binary.
func demoCommands(t *testing.T, script string) map[string][][]string {
	t.Helper()
	out := map[string][][]string{}
	for _, m := range demoCommand.FindAllStringSubmatch(script, -1) {
		words, err := shellWords(m[2])
		if err != nil {
			t.Fatalf("%s: %v", m[0], err)
		}
		if i := slices.IndexFunc(words, func(w string) bool { return strings.HasPrefix(w, "2>") || w == "|" }); i >= 0 {
			words = words[:i]
		}
		out[m[1]] = append(out[m[1]], words)
	}
	return out
}

// TestDemoScript checks make demo's script: its command lines use real
// commands and flags, and the gateway keeps its store in the demo's
// temporary directory, never in the user's ~/.uncaged/gateway.
func TestDemoScript(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("demo/run-demo.sh")
	if err != nil {
		t.Fatal(err)
	}
	script := string(b)
	cmds := demoCommands(t, script)
	if len(cmds[gatewayBinary]) < 3 || len(cmds[workflowBinary]) < 3 {
		t.Fatalf("found too few command lines: %q", cmds)
	}
	for name, lines := range cmds {
		for _, args := range lines {
			checkArgs(t, "run-demo.sh", binary(t, name), args)
		}
	}
	// Every gateway command sees the demo's data directory: exported
	// before the first one, inside the temporary directory.
	export := regexp.MustCompile(`(?m)^export UNCAGED_GATEWAY_DATA_DIR="\$work/[^"]+"$`).FindStringIndex(script)
	first := strings.Index(script, `"$bin/`+gatewayBinary+`" token`)
	if export == nil || first < 0 || export[0] > first {
		t.Errorf("run-demo.sh does not export UNCAGED_GATEWAY_DATA_DIR=\"$work/...\" before its first token command")
	}
	served := false
	for _, args := range cmds[gatewayBinary] {
		if len(args) == 0 || args[0] != "serve" {
			continue
		}
		served = true
		if i := slices.Index(args, "--data-dir"); i < 0 || i+1 >= len(args) || args[i+1] != "$UNCAGED_GATEWAY_DATA_DIR" {
			t.Errorf("run-demo.sh serves with %q: want --data-dir \"$UNCAGED_GATEWAY_DATA_DIR\", said where the output tells", args)
		}
	}
	if !served {
		t.Error("run-demo.sh never runs uncaged-gateway serve")
	}
	if !strings.Contains(script, "$UNCAGED_GATEWAY_DATA_DIR/gateway.db") {
		t.Error("run-demo.sh does not print where the gateway's store is")
	}
}
