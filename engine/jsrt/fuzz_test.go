package jsrt

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzLoad feeds arbitrary bytes to Load: it must return (a bundle or an
// error) without panicking or hanging. Top-level code that never finishes
// is interrupted by the validation timeout.
func FuzzLoad(f *testing.F) {
	for _, dir := range []string{"testdata", filepath.Join("testdata", "invalid")} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.esm.js"))
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	for _, s := range []string{
		"",
		"\x00\xff",
		"export const run = 1",
		"export const descriptor = {}; export const run = () => {}",
		"function f() { f() } f(); export const run = f;",
		"export const descriptor = new Proxy({}, { get() { throw 1 } }); export const run = () => {};",
		"const o = {}; o.o = o; export const descriptor = o; export const run = () => {};",
		"export const descriptor = { get description() { for (;;) {} } }; export const run = () => {};",
		"export const run = () => {}; export const descriptor = { description: 1n, roles: {}, graph: { edges: [] } };",
		"export { a as run, a as descriptor }; function a() {}",
		"import x from 'node:path'; export const run = x.join; export const descriptor = x;",
		"`${", "/*", "'\\u{110000}'", "class A { #x; static { throw 1 } }",
		"export const run = async function* () {}; export const descriptor = JSON.parse('{\"description\":\"d\",\"roles\":{\"r\":{\"description\":\"x\",\"schema\":{}}},\"graph\":{\"edges\":[]}}');",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		b, err := Load(src, "fuzz.esm.js", Options{ValidationTimeout: time.Second})
		if err == nil && b == nil {
			t.Fatal("nil bundle without an error")
		}
		if err == nil {
			// A valid bundle's descriptor serializes.
			if _, err := b.Descriptor().MarshalYAML(); err != nil {
				t.Fatalf("descriptor of a loaded bundle does not marshal: %v", err)
			}
		}
	})
}
