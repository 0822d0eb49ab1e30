package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeFile is the README, relative to this package's directory.
const readmeFile = "../README.md"

// readmeMaxLines is how long the README may grow. It is a new user's first
// page: what the system is, the two commands, a first workflow, a second
// machine, deploying. Reference material belongs in docs/.
const readmeMaxLines = 200

// TestReadmeIsShortAndStartsWithTheTwoCommands keeps the README a first
// page: at most readmeMaxLines lines, and its first code block, within
// the first screen, is `make demo` and `make test`.
func TestReadmeIsShortAndStartsWithTheTwoCommands(t *testing.T) {
	b, err := os.ReadFile(readmeFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move reference material to docs/ and link it", len(lines), readmeMaxLines)
	}
	blocks := fencedBlocks(string(b))
	if len(blocks) == 0 {
		t.Fatal("README.md has no code block")
	}
	first := blocks[0]
	if first.line > 15 {
		t.Errorf("README.md's first code block starts on line %d; the two commands belong at the top", first.line)
	}
	var cmds []string
	for _, l := range strings.Split(first.text, "\n") {
		if f := strings.Fields(l); len(f) >= 2 {
			cmds = append(cmds, f[0]+" "+f[1])
		}
	}
	if strings.Join(cmds, ", ") != "make demo, make test" {
		t.Errorf("README.md's first code block runs %q, want make demo, then make test", cmds)
	}
}

// block is a fenced code block: its text and the line its fence is on.
type block struct {
	line int
	text string
}

// fencedBlocks returns the fenced code blocks of a Markdown text.
func fencedBlocks(text string) []block {
	var out []block
	var cur *block
	var fence string
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == nil {
			if f := fenceOf(trimmed); f != "" {
				cur, fence = &block{line: i + 1}, f
			}
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
			out = append(out, *cur)
			cur = nil
			continue
		}
		cur.text += line + "\n"
	}
	return out
}

// fenceOf is the fence a line opens (``` or ~~~, three or more), or "".
func fenceOf(trimmed string) string {
	for _, c := range []string{"`", "~"} {
		n := len(trimmed) - len(strings.TrimLeft(trimmed, c))
		if n >= 3 {
			return strings.Repeat(c, n)
		}
	}
	return ""
}

// gatewayCommand is a command line of the gateway that opens its store:
// serve and the token commands.
var gatewayCommand = regexp.MustCompile(`(?:^|[\s;&(])uncaged-gateway (serve|token [a-z]+)\b([^|;&#\n]*)`)

// storeFlag is a flag naming the gateway's store, with its value.
var storeFlag = regexp.MustCompile(`--(data-dir|database-url|database-url-file)[= ](\S+)`)

// storeExport sets a variable naming the gateway's store in a shell.
var storeExport = regexp.MustCompile(`(?m)^\s*export (UNCAGED_GATEWAY_(?:DATA_DIR|DATABASE_URL|DATABASE_URL_FILE))=(\S+)`)

// storeVariable maps a store flag to the variable serve and the token
// commands both read for it.
var storeVariable = map[string]string{
	"data-dir":          "UNCAGED_GATEWAY_DATA_DIR",
	"database-url":      "UNCAGED_GATEWAY_DATABASE_URL",
	"database-url-file": "UNCAGED_GATEWAY_DATABASE_URL_FILE",
}

// gatewayStores reads a shell block as a reader would run it, and returns,
// for each gateway command that opens the store, the store it opens: its
// flag, else the variable exported above it, else "" (the default).
func gatewayStores(script string) (cmds, stores []string) {
	env := map[string]string{}
	for _, line := range strings.Split(script, "\n") {
		if m := storeExport.FindStringSubmatch(line); m != nil {
			env[m[1]] = m[2]
		}
		for _, m := range gatewayCommand.FindAllStringSubmatch(line, -1) {
			store := ""
			for _, v := range []string{"UNCAGED_GATEWAY_DATA_DIR", "UNCAGED_GATEWAY_DATABASE_URL", "UNCAGED_GATEWAY_DATABASE_URL_FILE"} {
				if env[v] != "" {
					store = v + "=" + env[v]
				}
			}
			if f := storeFlag.FindStringSubmatch(m[2]); f != nil {
				store = storeVariable[f[1]] + "=" + f[2]
			}
			cmds = append(cmds, strings.TrimSpace(m[1]))
			stores = append(stores, store)
		}
	}
	return cmds, stores
}

// TestGatewayStoresReadsAShellBlock: the store each gateway command of a
// block opens, as a shell would decide it.
func TestGatewayStoresReadsAShellBlock(t *testing.T) {
	cases := []struct {
		script string
		want   []string
	}{
		{"uncaged-gateway serve --listen :8080\nuncaged-gateway token create --dashboard\n", []string{"", ""}},
		{"uncaged-gateway serve --data-dir /srv/gw\nuncaged-gateway token create --dashboard\n", []string{"UNCAGED_GATEWAY_DATA_DIR=/srv/gw", ""}},
		{"export UNCAGED_GATEWAY_DATA_DIR=/srv/gw\nuncaged-gateway serve &\nuncaged-gateway token list  # x\n",
			[]string{"UNCAGED_GATEWAY_DATA_DIR=/srv/gw", "UNCAGED_GATEWAY_DATA_DIR=/srv/gw"}},
		{"export UNCAGED_GATEWAY_DATA_DIR=/a\nuncaged-gateway token revoke ID --data-dir=/b | --kind x\n", []string{"UNCAGED_GATEWAY_DATA_DIR=/b"}},
		{"uncaged-gateway status --json\nuncaged-gateway key generate\n", nil},
	}
	for _, c := range cases {
		_, got := gatewayStores(c.script)
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%q: stores %q, want %q", c.script, got, c.want)
		}
	}
}

// TestGatewayAndTokenCommandsShareOneStore: wherever the docs start a
// gateway by hand and make tokens for it, the token commands open the
// store serve opens, named explicitly (one exported variable, or the same
// flag on each), so a reader who changes where the gateway keeps its
// state changes it for both. A token made in another store is refused as
// unknown. The README must show one such block.
func TestGatewayAndTokenCommandsShareOneStore(t *testing.T) {
	files := append([]string{readmeFile}, mustGlob(t, "*.md")...)
	readmeShows := false
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, blk := range fencedBlocks(string(b)) {
			cmds, stores := gatewayStores(blk.text)
			serve := -1
			for i, c := range cmds {
				if c == "serve" {
					serve = i
				}
			}
			if serve < 0 || len(cmds) < 2 {
				continue
			}
			for i, c := range cmds {
				if stores[i] == "" {
					t.Errorf("%s, block at line %d: `uncaged-gateway %s` names no store: export UNCAGED_GATEWAY_DATA_DIR (or UNCAGED_GATEWAY_DATABASE_URL) above the commands, so serve and the token commands open the same one", f, blk.line, c)
				} else if stores[i] != stores[serve] {
					t.Errorf("%s, block at line %d: `uncaged-gateway %s` opens %s, serve %s", f, blk.line, c, stores[i], stores[serve])
				}
			}
			if f == readmeFile {
				readmeShows = true
			}
		}
	}
	if !readmeShows {
		t.Error("README.md shows no block that starts a gateway (uncaged-gateway serve) and makes its tokens with the same store")
	}
}

// mustGlob is filepath.Glob, failing the test on a bad pattern.
func mustGlob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
