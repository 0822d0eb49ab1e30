package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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

// fakeGo is a go command for build-progress.sh's test: `go list` prints
// $FAKE/list and exits with $FAKE/list.rc; `go build` records its
// arguments in $FAKE/build.args, prints $FAKE/build.out on stdout and
// $FAKE/build.err on stderr, and exits with $FAKE/build.rc.
const fakeGo = `#!/usr/bin/env bash
cmd="$1"; shift
case "$cmd" in
list) cat "$FAKE/list"; exit "$(cat "$FAKE/list.rc")" ;;
build)
  printf '%s\n' "$@" >"$FAKE/build.args"
  cat "$FAKE/build.out"
  cat "$FAKE/build.err" >&2
  exit "$(cat "$FAKE/build.rc")" ;;
esac
exit 3
`

// TestBuildProgress runs make build's progress filter with a go command
// that answers as go does: the packages go list calls stale are counted as
// go build -v names them, on stderr; everything else go build says passes
// through; a build with nothing to compile prints nothing; stdout and the
// exit status are go build's.
func TestBuildProgress(t *testing.T) {
	t.Parallel()
	many := make([]string, 120)
	for i := range many {
		many[i] = fmt.Sprintf("example.com/p%d", i)
	}
	cases := []struct {
		name               string
		list               string
		listRC             int
		buildErr, buildOut string
		buildRC            int
		wantErr            []string // lines of stderr, in order ("~" prefix: a prefix of the line)
		wantRC             int
		wantV              bool // go build was run with -v
	}{{
		name:     "a build with packages to compile counts them",
		list:     "internal/goarch\nfmt\nexample.com/m/cmd/a\n",
		buildErr: "internal/goarch\nfmt\nexample.com/m/cmd/a\n",
		buildOut: "go build's own stdout\n",
		wantErr:  []string{"compiling 3 packages", "[1/3] internal/goarch", "[2/3] fmt", "[3/3] example.com/m/cmd/a", "~built in 0m0"},
		wantV:    true,
	}, {
		name:     "a first build says it takes minutes",
		list:     strings.Join(many, "\n") + "\n",
		buildErr: strings.Join(many[:2], "\n") + "\n",
		wantErr:  []string{"~compiling 120 packages: a first build compiles the Go standard library", "[1/120] example.com/p0", "[2/120] example.com/p1", "~built in"},
		wantV:    true,
	}, {
		name:    "everything cached prints nothing, though go list calls the commands stale",
		list:    "example.com/m/cmd/a\n",
		wantErr: nil,
		wantV:   true,
	}, {
		name:     "with nothing to compile, what go build says passes through",
		list:     "",
		buildErr: "go: updates to go.mod needed\n",
		buildRC:  1,
		wantErr:  []string{"go: updates to go.mod needed"},
		wantRC:   1,
		wantV:    true,
	}, {
		name:     "compile errors pass through and the status is go build's",
		list:     "example.com/m/lib\nexample.com/m/cmd/a\n",
		buildErr: "example.com/m/lib\n# example.com/m/lib\nlib/bad.go:2:9: syntax error: unexpected {, expected )\n",
		buildRC:  1,
		wantErr:  []string{"compiling 2 packages", "[1/2] example.com/m/lib", "# example.com/m/lib", "lib/bad.go:2:9: syntax error: unexpected {, expected )"},
		wantRC:   1,
		wantV:    true,
	}, {
		name:     "go list failing builds without a count",
		list:     "",
		listRC:   1,
		buildErr: "go: cannot find main module\n",
		buildRC:  1,
		wantErr:  []string{"build-progress: go list failed; building without a count", "go: cannot find main module"},
		wantRC:   1,
		wantV:    false,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			files := map[string]string{
				"go": fakeGo, "list": c.list, "list.rc": strconv.Itoa(c.listRC),
				"build.err": c.buildErr, "build.out": c.buildOut, "build.rc": strconv.Itoa(c.buildRC),
			}
			for name, text := range files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("bash", "demo/build-progress.sh", "-ldflags", "-X main.V=1 -s", "-o", "bin/", "--", "./cmd/a", "./cmd/b")
			cmd.Env = append(os.Environ(), "GO="+filepath.Join(dir, "go"), "FAKE="+dir, "TMPDIR="+dir)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			rc := 0
			if ee, ok := err.(*exec.ExitError); ok {
				rc = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if rc != c.wantRC {
				t.Errorf("exit status %d, want %d; stderr:\n%s", rc, c.wantRC, stderr.String())
			}
			if stdout.String() != c.buildOut {
				t.Errorf("stdout %q, want go build's %q", stdout.String(), c.buildOut)
			}
			var got []string
			if s := strings.TrimSuffix(stderr.String(), "\n"); s != "" {
				got = strings.Split(s, "\n")
			}
			if len(got) != len(c.wantErr) {
				t.Fatalf("stderr has %d lines, want %d:\n%s", len(got), len(c.wantErr), stderr.String())
			}
			for i, want := range c.wantErr {
				if p, ok := strings.CutPrefix(want, "~"); ok && strings.HasPrefix(got[i], p) || got[i] == want {
					continue
				}
				t.Errorf("stderr line %d: %q, want %q", i+1, got[i], want)
			}
			args, err := os.ReadFile(filepath.Join(dir, "build.args"))
			if err != nil {
				t.Fatal(err)
			}
			want := "-ldflags\n-X main.V=1 -s\n-o\nbin/\n./cmd/a\n./cmd/b\n"
			if c.wantV {
				want = "-v\n" + want
			}
			if string(args) != want {
				t.Errorf("go build ran with %q, want %q", args, want)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "build-progress-*")); len(left) > 0 {
				t.Errorf("left behind %q", left)
			}
		})
	}
}

// TestMakeBuildShowsProgress: make build (which make demo runs first)
// compiles through build-progress.sh, so a first build is never silent.
func TestMakeBuildShowsProgress(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	_, recipe, ok := strings.Cut(string(b), "\nbuild:\n")
	if !ok {
		t.Fatal("Makefile has no build target")
	}
	recipe, _, _ = strings.Cut(recipe, "\n\n")
	if !regexp.MustCompile(`(?m)^\t.*\./deploy/demo/build-progress\.sh .* -- \./connector/cmd/uncaged-workflow \./gateway/cmd/uncaged-gateway$`).MatchString(recipe) {
		t.Errorf("make build does not compile through deploy/demo/build-progress.sh:\n%s", recipe)
	}
	if !regexp.MustCompile(`(?m)^demo: build$`).Match(b) {
		t.Error("make demo does not depend on make build")
	}
}
