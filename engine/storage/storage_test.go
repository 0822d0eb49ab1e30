package storage

import (
	"os"
	"path/filepath"
	"testing"
)

func TestResolveRootPriority(t *testing.T) {
	// Serial: sets HOME (t.Setenv).
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"uncaged wins", map[string]string{EnvRoot: "/a", EnvLegacyRoot: "/b"}, "/a"},
		{"legacy", map[string]string{EnvLegacyRoot: "/b"}, "/b"},
		{"empty uncaged falls through", map[string]string{EnvRoot: "", EnvLegacyRoot: "/b"}, "/b"},
	}
	for _, c := range cases {
		got, err := ResolveRoot(func(k string) string { return c.env[k] })
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
		}
	}
	t.Setenv("HOME", "/home/someone")
	got, err := ResolveRoot(func(string) string { return "" })
	if err != nil || got != "/home/someone/.uncaged/workflow" {
		t.Errorf("default: %q %v", got, err)
	}
	rel, _ := ResolveRoot(func(k string) string {
		if k == EnvRoot {
			return "rel/dir"
		}
		return ""
	})
	if !filepath.IsAbs(rel) {
		t.Errorf("relative root not made absolute: %q", rel)
	}
}

func TestLayoutPaths(t *testing.T) {
	t.Parallel()
	l := Layout{Root: "/tmp/wf-root"}
	checks := map[string]string{
		l.CASDir():                "/tmp/wf-root/cas",
		l.RegistryFile():          "/tmp/wf-root/workflow.yaml",
		l.BundleFile("H"):         "/tmp/wf-root/bundles/H.esm.js",
		l.DescriptorFile("H"):     "/tmp/wf-root/bundles/H.yaml",
		l.BundleDir("H"):          "/tmp/wf-root/bundles/H",
		l.InfoLog("H", "T"):       "/tmp/wf-root/logs/H/T.info.jsonl",
		l.RunningMarker("H", "T"): "/tmp/wf-root/logs/H/T.running",
		l.WorkerFile("H"):         "/tmp/wf-root/workers/H.json",
		l.TypesFile("H"):          "/tmp/wf-root/bundles/H.d.ts",
		DefaultRoot("/home/x"):    "/home/x/.uncaged/workflow",
	}
	for got, want := range checks {
		if got != want {
			t.Errorf("got %q want %q", got, want)
		}
	}
}

func TestHasBundle(t *testing.T) {
	t.Parallel()
	l := Layout{Root: t.TempDir()}
	if err := os.MkdirAll(l.BundlesDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.BundleFile("SSVQ0RZ55P9Y4"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !l.HasBundle("SSVQ0RZ55P9Y4") || !l.HasBundle("ssvq0rz55p9y4") {
		t.Fatal("stored bundle not found")
	}
	for _, h := range []string{"D7V7WGCMTYHZG", "../../etc/passwd", ""} {
		if l.HasBundle(h) {
			t.Errorf("HasBundle(%q) = true", h)
		}
	}
}

func TestEnsureRootCreatesAPrivateRootAndLeavesAnExistingOneAlone(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	fresh := Layout{Root: filepath.Join(base, "home", ".uncaged", "workflow")}
	if err := fresh.EnsureRoot(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{fresh.Root, filepath.Dir(fresh.Root)} {
		if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want a 0700 directory", dir, st.Mode(), err)
		}
	}
	existing := Layout{Root: filepath.Join(base, "shared")}
	if err := os.Mkdir(existing.Root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := existing.EnsureRoot(); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(existing.Root); st.Mode().Perm() != 0o755 {
		t.Errorf("an existing root changed mode: %v", st.Mode())
	}
	if err := os.WriteFile(filepath.Join(base, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := (Layout{Root: filepath.Join(base, "file", "root")}).EnsureRoot(); err == nil {
		t.Error("a root under a file was accepted")
	}
}

func TestIdempotencyFileIsNamedByTheKeysHash(t *testing.T) {
	t.Parallel()
	l := Layout{Root: "/tmp/wf-root"}
	// sha256("run_01jf"), computed outside Go.
	if got, want := l.IdempotencyFile("run_01jf"), "/tmp/wf-root/engine.idempotency/bf097d1ddbdc2b44bc9b0e8d82c9dd030626d776c33cb16ab2671b68357011ec.json"; got != want {
		t.Errorf("got %q want %q", got, want)
	}
	// Whatever a key holds, its file is a plain name in the directory,
	// and keys differing in one byte or in case get files of their own.
	seen := map[string]string{}
	for _, key := range []string{"../../etc/passwd", "a/b", "A/b", ".", "..", "run_x", "run_X", "run_x "} {
		p := l.IdempotencyFile(key)
		if filepath.Dir(p) != l.IdempotencyDir() || len(filepath.Base(p)) != 64+len(".json") {
			t.Errorf("key %q: file %q is not a hash-named entry of %s", key, p, l.IdempotencyDir())
		}
		if other, dup := seen[p]; dup {
			t.Errorf("keys %q and %q share the file %s", other, key, p)
		}
		seen[p] = key
	}
}
