package cli

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/storage"
)

// isRoot says whether a command made dir a storage root (every root
// starts private, see TestANewRootIsPrivate).
func isRoot(dir string) bool {
	st, err := os.Stat(dir)
	return err == nil && st.IsDir()
}

// --storage-root, then UNCAGED_WORKFLOW_STORAGE_ROOT, then
// WORKFLOW_STORAGE_ROOT choose the root; empty variables count as unset.
func TestStorageRootPrecedence(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	flagRoot, newRoot, oldRoot := filepath.Join(base, "flag"), filepath.Join(base, "new"), filepath.Join(base, "old")
	c := newCLI(t)
	c.env = map[string]string{storage.EnvRoot: newRoot, storage.EnvLegacyRoot: oldRoot}

	c.ok("--storage-root", flagRoot, "thread", "list")
	if !isRoot(flagRoot) || isRoot(newRoot) || isRoot(oldRoot) {
		t.Fatal("the flag did not win over both variables")
	}
	c.ok("thread", "list", "--storage-root", flagRoot) // after the command, too
	c.ok("thread", "list")
	if !isRoot(newRoot) || isRoot(oldRoot) {
		t.Fatalf("%s did not win over %s", storage.EnvRoot, storage.EnvLegacyRoot)
	}
	c.env[storage.EnvRoot] = ""
	c.ok("thread", "list")
	if !isRoot(oldRoot) {
		t.Fatalf("%s unused when %s is empty", storage.EnvLegacyRoot, storage.EnvRoot)
	}
}

// A relative --storage-root is taken from the working directory, as the
// variables always were.
func TestStorageRootFlagIsMadeAbsolute(t *testing.T) {
	c := newCLI(t)
	inDir(t, t.TempDir())
	c.env = map[string]string{}
	out := c.ok("--storage-root", "rel", "status", "--json")
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(wd, "rel"); !strings.Contains(out, `"`+want+`"`) {
		t.Fatalf("status does not name %s:\n%s", want, out)
	}
}

// With neither the flag nor a variable, the root is under the home
// directory.
func TestStorageRootDefault(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	c := newCLI(t)
	c.env = map[string]string{storage.EnvRoot: ""}
	c.ok("thread", "list")
	if !isRoot(storage.DefaultRoot(home)) {
		t.Fatalf("no root at %s", storage.DefaultRoot(home))
	}
}

// setup parses the root's flags like every command: --storage-root picks
// the workflow.yaml it writes.
func TestSetupHonoursTheStorageRootFlag(t *testing.T) {
	c := newCLI(t)
	inDir(t, t.TempDir())
	other := filepath.Join(t.TempDir(), "other")
	c.ok("setup", "--storage-root", other, "--provider", "openai", "--base-url", "https://api.openai.com/v1", "--api-key", "sk", "--default-model", "openai/gpt-4o")
	if _, err := os.Stat(filepath.Join(other, "workflow.yaml")); err != nil {
		t.Fatal(err)
	}
	if isRoot(c.root) {
		t.Fatal("setup wrote to the variable's root despite the flag")
	}
}

// service install bakes a root chosen by the flag into the unit, as it does
// one chosen by a variable.
func TestServiceInstallBakesInAFlagStorageRoot(t *testing.T) {
	t.Parallel()
	s := newServiceCLI(t)
	root := filepath.Join(s.home, "store")
	unit := s.ok(append(s.install("--dry-run"), "--storage-root", root)...)
	if want := "\nEnvironment=" + storage.EnvRoot + "=" + root + "\n"; !strings.Contains(unit, want) {
		t.Fatalf("unit lacks %q:\n%s", want, unit)
	}
}

// Every command that reads or writes a storage root refuses one that
// another user could change — the root itself or a path the engine
// trusts in it, group- or world-writable, sticky or not — before it reads
// or changes anything, and says which path, its mode and what to run.
// Once that has been run, the root is used again.
func TestEveryCommandRefusesARootOthersCouldChange(t *testing.T) {
	t.Parallel()
	const thread = "01JBXYZ0000000000000000000"
	bundle := filepath.Join(t.TempDir(), "w.esm.js")
	if err := os.WriteFile(bundle, bundleSource("w"), 0o644); err != nil {
		t.Fatal(err)
	}
	commands := [][]string{
		{"thread", "list"}, {"thread", "ps"}, {"thread", "show", thread}, {"thread", "kill", thread},
		{"thread", "pause", thread}, {"thread", "resume", thread}, {"thread", "fork", thread},
		{"thread", "usage"}, {"thread", "live", thread}, {"thread", "run", "w", "--prompt", "p"}, {"run", "w"}, {"live", thread},
		{"workflow", "list"}, {"workflow", "show", "w"}, {"workflow", "history", "w"}, {"workflow", "add", "w", bundle},
		{"cas", "put", "x"}, {"cas", "get", "SSVQ0RZ55P9Y4"}, {"cas", "list"}, {"cas", "gc"},
		{"status"}, {"doctor"}, {"engine", "status"}, {"engine", "stop"}, {"engine", "restart"}, {"engine", "serve"},
		{"serve", "--listen", "127.0.0.1:0"},
		{"setup", "--provider", "openai", "--base-url", "https://api.openai.com/v1", "--api-key", "sk", "--default-model", "openai/gpt-4o"},
	}
	opened := []struct {
		path string // relative to the root
		mode os.FileMode
	}{
		{"", 0o777}, {"", 0o775}, {"", 0o757}, {"", 0o1777 | os.ModeSticky}, {"", 0o770},
		{"bundles", 0o777}, {"cas", 0o777}, {"logs", 0o775}, {"workflow.yaml", 0o666},
	}
	for i, args := range commands {
		o := opened[i%len(opened)]
		c := newCLI(t)
		c.ok("cas", "put", "x") // a root to refuse, with something in it
		if err := os.MkdirAll(filepath.Join(c.root, "bundles"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(c.root, "logs"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(c.root, "workflow.yaml"), []byte("workflows: {}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(c.root, o.path)
		if err := os.Chmod(p, o.mode&^0o1000); err != nil {
			t.Fatal(err)
		}
		before := c.snapshot()
		want := "unsafe storage root " + c.root + ": "
		if o.path == "" {
			want += fmt.Sprintf("it is writable by others (mode %s)", storage.OctalMode(o.mode&os.ModeSticky|o.mode.Perm()))
		} else {
			want += fmt.Sprintf("%s is writable by others (mode %04o)", p, o.mode.Perm())
		}
		out, errs, code := c.run(args...)
		if code != 1 || !strings.Contains(errs, want) || !strings.Contains(errs, "; run: chmod ") {
			t.Fatalf("%v on a root with %s at %04o: exit %d\nstdout: %s\nstderr: %s\nwant %q", args, o.path, o.mode.Perm(), code, out, errs, want)
		}
		c.unchanged(before)
		fix := strings.TrimSpace(errs[strings.LastIndex(errs, "; run: ")+len("; run: "):])
		want = "chmod -R go-w " + c.root
		if o.path == "" {
			want = "chmod go-w " + c.root
		}
		if fix != want {
			t.Fatalf("%v: the fix is %q, want %q", args, fix, want)
		}
		// What it does, without a process of its own: this package's tests
		// check locks and pids, which a child holds a moment as it starts.
		if err := filepath.WalkDir(c.root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.Type()&fs.ModeSymlink != 0 || (p != c.root && o.path == "") {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			return os.Chmod(p, fi.Mode()&^0o022)
		}); err != nil {
			t.Fatal(err)
		}
		// (thread list: some of the commands above would start a host.)
		c.ok("thread", "list")
	}
}
