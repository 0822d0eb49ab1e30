package cli

import (
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
