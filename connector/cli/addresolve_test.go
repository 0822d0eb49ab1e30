package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const resolveRuntimeOnly = `import { START } from "@uncaged/workflow-runtime";
import { join } from "node:path";
export const descriptor = { description: START + join("a", "b"), roles: {}, graph: { edges: [] } };
export const run = async function* () {};
`

// TestResolveBundleImports: a bundle importing only what the engine
// provides is registered byte for byte; a package in node_modules (here
// the parent directory's, as Node looks) is bundled in; anything else is
// refused, saying why, before anything is registered.
func TestResolveBundleImports(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pkg := filepath.Join(dir, "node_modules", "@scope", "pad")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "package.json"), []byte(`{"name":"@scope/pad","main":"index.js"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "index.js"), []byte("module.exports = function pad(s) { return ' ' + s; };\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "dist")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(sub, "x.esm.js")

	src := []byte(resolveRuntimeOnly)
	out, bundled, err := resolveBundleImports(src, file)
	if err != nil || !bytes.Equal(out, src) || bundled != nil {
		t.Fatalf("runtime only: %q %v %v; want the source unchanged", out, bundled, err)
	}

	src = []byte(`import pad from "@scope/pad";` + "\n" + resolveRuntimeOnly + "export const padded = pad(\"x\");\n")
	out, bundled, err = resolveBundleImports(src, file)
	if err != nil || len(bundled) != 1 || bundled[0] != "@scope/pad" {
		t.Fatalf("with @scope/pad installed: %v %v", bundled, err)
	}
	if !strings.Contains(string(out), "node_modules/@scope/pad/index.js") || strings.Contains(string(out), `from "@scope/pad"`) ||
		!strings.Contains(string(out), `from "@uncaged/workflow-runtime"`) {
		t.Errorf("the package was not bundled in, or the runtime was:\n%s", out)
	}

	for _, c := range []struct{ name, src, want string }{
		{"missing", `import x from "@scope/absent/deep";` + resolveRuntimeOnly, `cannot resolve import "@scope/absent/deep"`},
		{"missing names the package", `import x from "@scope/absent/deep";` + resolveRuntimeOnly, "npm install @scope/absent)"},
		{"relative", `import x from "./helper.js";` + resolveRuntimeOnly, `disallowed import specifier "./helper.js"`},
		{"absolute", `import x from "/etc/x.js";` + resolveRuntimeOnly, `disallowed import specifier "/etc/x.js"`},
		{"unknown built-in", `import x from "node:sqlite";` + resolveRuntimeOnly, `disallowed import specifier "node:sqlite"`},
		{"dynamic", resolveRuntimeOnly + `export const later = () => import("left-pad");`, "dynamic import"},
		{"syntax", "export const = 1;", "failed to parse"},
	} {
		if _, _, err := resolveBundleImports([]byte(c.src), file); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}
