package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/evanw/esbuild/pkg/api"

	"github.com/uncaged/workflow/engine/jsrt"
)

// resolveBundleImports returns the bundle `workflow add` registers. A
// bundle that imports only modules the engine provides is registered as
// it is. One built elsewhere may import other packages, as the original's
// build left every @uncaged/* import to be resolved when the bundle was
// added: those are looked up in node_modules beside the file (and in its
// parents', as Node looks) and bundled in, so the registered bundle is
// self-contained. bundled names them; a package that is not installed is
// an error that says where it was looked for.
func resolveBundleImports(source []byte, file string) (out []byte, bundled []string, err error) {
	base := filepath.Base(file)
	external, err := jsrt.ExternalImports(source, base)
	if err != nil || len(external) == 0 {
		return source, nil, err
	}
	dir := filepath.Dir(file)
	result := api.Build(api.BuildOptions{
		Stdin: &api.StdinOptions{
			Contents:   string(source),
			ResolveDir: dir,
			Sourcefile: base,
			Loader:     api.LoaderJS,
		},
		AbsWorkingDir: dir,
		Bundle:        true,
		Write:         false,
		Outfile:       base,
		Format:        api.FormatESModule,
		Platform:      api.PlatformNode, // keeps node:* and bare built-ins external
		Target:        api.ES2020,
		External:      jsrt.ProvidedPackages(),
		Charset:       api.CharsetUTF8,
		LogLevel:      api.LogLevelSilent,
	})
	if len(result.Errors) > 0 {
		return nil, nil, unresolvedImportError(result.Errors[0], external, dir)
	}
	for _, f := range result.OutputFiles {
		if strings.HasSuffix(f.Path, ".js") {
			return f.Contents, external, nil
		}
	}
	return nil, nil, errors.New("bundling the imports of " + base + ": esbuild produced no output")
}

// unresolvedImportError explains a failed resolution: which package, where
// it was looked for, and what the engine provides without node_modules.
func unresolvedImportError(m api.Message, external []string, dir string) error {
	for _, spec := range external {
		if strings.Contains(m.Text, fmt.Sprintf("%q", spec)) {
			return fmt.Errorf("cannot resolve import %q: the engine does not provide it and it is not installed in node_modules beside the bundle (looked in %s and its parents); install it there (npm install %s) or bundle it into the file (uncaged-workflow build does); the engine provides %s and Node's built-ins",
				spec, filepath.Join(dir, "node_modules"), packageName(spec), strings.Join(jsrt.ProvidedPackages(), ", "))
		}
	}
	where := ""
	if m.Location != nil {
		where = fmt.Sprintf("%s:%d:%d: ", displayPath(dir, absFrom(dir, m.Location.File)), m.Location.Line, m.Location.Column+1)
	}
	return fmt.Errorf("bundling the imports %s from node_modules: %s%s", strings.Join(external, ", "), where, m.Text)
}

// packageName is the npm package a specifier imports from ("@a/b/c" →
// "@a/b", "x/y" → "x").
func packageName(spec string) string {
	parts := strings.Split(spec, "/")
	if strings.HasPrefix(spec, "@") && len(parts) > 1 {
		return parts[0] + "/" + parts[1]
	}
	return parts[0]
}
