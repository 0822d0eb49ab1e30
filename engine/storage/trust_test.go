package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// nobody is another user of the machine, for the tests that run as root.
const nobody = 65534

// trustRoot builds a root as the engine leaves it, every path its owner's
// alone, and returns it with the paths Check judges (relative to it).
func trustRoot(t *testing.T) (root string, judged []string) {
	t.Helper()
	root = filepath.Join(t.TempDir(), "a [root]*?") // no pattern, a name
	dirs := []string{"", "bundles", "bundles/H1", "bundles/H1/history", "cas", "logs", "logs/H1", "engine.agents"}
	files := []string{"workflow.yaml", "engine.lock", "bundles/H1.esm.js", "bundles/H1.yaml", "bundles/H1/threads.json",
		"bundles/H1/history/2025-01-01.jsonl", "cas/X.txt", "logs/engine.log", "logs/H1/T.info.jsonl", "engine.agents/T-1"}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(root, d), 0o755); err != nil { // whatever the umask
			t.Fatal(err)
		}
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(root, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(root, f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Everything but what lies inside cas/, a log directory and a thread
	// history: those are closed by their directories.
	judged = []string{"", "bundles", "bundles/H1", "bundles/H1/history", "cas", "logs", "logs/H1", "engine.agents",
		"workflow.yaml", "engine.lock", "bundles/H1.esm.js", "bundles/H1.yaml", "bundles/H1/threads.json", "logs/engine.log", "engine.agents/T-1"}
	return root, judged
}

func TestARootOnlyItsOwnerCanChangeIsAccepted(t *testing.T) {
	t.Parallel()
	root, _ := trustRoot(t)
	for _, mode := range []fs.FileMode{0o700, 0o750, 0o755, 0o711, 0o500, 0o705} {
		if err := os.Chmod(root, mode); err != nil {
			t.Fatal(err)
		}
		if err := (Layout{Root: root}).Check(); err != nil {
			t.Errorf("root mode %04o: %v", mode, err)
		}
	}
	if err := os.Chmod(root, 0o700); err != nil {
		t.Fatal(err)
	}
	// What the engine leaves alone: inside cas/ and a log directory.
	for _, f := range []string{"cas/X.txt", "logs/H1/T.info.jsonl", "bundles/H1/history/2025-01-01.jsonl"} {
		if err := os.Chmod(filepath.Join(root, f), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	if err := (Layout{Root: root}).Check(); err != nil {
		t.Errorf("files inside closed directories: %v", err)
	}
	if err := (Layout{Root: filepath.Join(root, "not-there")}).Check(); err != nil {
		t.Errorf("a root not made yet: %v", err)
	}
	// A root may be a link to where it lives; the link's target is judged.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	if err := (Layout{Root: link}).Check(); err != nil {
		t.Errorf("a root through a link: %v", err)
	}
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := (Layout{Root: link}).Check(); !errors.Is(err, ErrUntrusted) {
		t.Errorf("a link to an open root: %v", err)
	}
}

// Whatever path of the root a group or others may write, and whatever
// else is wrong beside it, Check refuses the root, names the first such
// path and its mode, and the command it prints fixes all of them.
func TestARootOthersCouldChangeIsRefusedWithTheFix(t *testing.T) {
	t.Parallel()
	writable := []fs.FileMode{0o777, 0o775, 0o757, 0o770, 0o730, 0o703, 0o722, 0o720, 0o702, 0o666, 0o664, 0o646, 0o662, 0o1777, 0o1775, 0o2775}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 25))
	for i := 0; i < 40; i++ {
		root, judged := trustRoot(t)
		// One to three paths opened up, each with a mode drawn at random
		// (a file gets the mode's permission bits only).
		opened := map[string]fs.FileMode{}
		for n := 1 + rng.IntN(3); len(opened) < n; {
			opened[judged[rng.IntN(len(judged))]] = writable[rng.IntN(len(writable))]
		}
		for rel, mode := range opened {
			p := filepath.Join(root, rel)
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if !fi.IsDir() {
				mode &= 0o777
			}
			if err := os.Chmod(p, mode|fs.FileMode(stickyBits(mode))); err != nil {
				t.Fatal(err)
			}
		}
		err := (Layout{Root: root}).Check()
		if !errors.Is(err, ErrUntrusted) {
			t.Fatalf("opened %v: %v, want it refused", opened, err)
		}
		msg := err.Error()
		first := firstOpened(root, judged, opened)
		fi, _ := os.Stat(filepath.Join(root, first))
		wantPath := filepath.Join(root, first)
		if first == "" {
			wantPath = "unsafe storage root " + root + ": it is"
		}
		if !strings.Contains(msg, wantPath) || !strings.Contains(msg, "mode "+OctalMode(fi.Mode())) {
			t.Fatalf("opened %v: %q does not name %s and mode %s", opened, msg, wantPath, OctalMode(fi.Mode()))
		}
		runFix(t, err)
		if err := (Layout{Root: root}).Check(); err != nil {
			t.Fatalf("opened %v; after the fix: %v", opened, err)
		}
	}
}

// runFix runs the command a refusal says to run.
func runFix(t *testing.T, refusal error) {
	t.Helper()
	msg := refusal.Error()
	fix := msg[strings.LastIndex(msg, "run: ")+len("run: "):]
	if !strings.HasPrefix(fix, "chmod ") {
		t.Fatalf("no chmod to run in %q", msg)
	}
	if out, err := exec.Command("/bin/sh", "-c", fix).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v %s", fix, err, out)
	}
}

// stickyBits turns the chmod-style high bits of m into FileMode's.
func stickyBits(m fs.FileMode) uint32 {
	var out fs.FileMode
	if m&0o1000 != 0 {
		out |= fs.ModeSticky
	}
	if m&0o2000 != 0 {
		out |= fs.ModeSetgid
	}
	return uint32(out)
}

// firstOpened is the opened path Check meets first: the root, then in
// the order of checkedDirs, each directory's entries by name.
func firstOpened(root string, judged []string, opened map[string]fs.FileMode) string {
	if _, ok := opened[""]; ok {
		return ""
	}
	for _, dir := range (Layout{Root: root}).checkedDirs() {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			rel, _ := filepath.Rel(root, filepath.Join(dir, e.Name()))
			if _, ok := opened[rel]; ok {
				return rel
			}
		}
	}
	return "?"
}

// A link in the root is judged by what it points to; one pointing
// nowhere has nothing to change.
func TestALinkIsJudgedByItsTarget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode fs.FileMode
		ok   bool
	}{{0o644, true}, {0o600, true}, {0o666, false}, {0o664, false}} {
		root, _ := trustRoot(t)
		target := filepath.Join(t.TempDir(), "elsewhere.yaml")
		if err := os.WriteFile(target, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(target, tc.mode); err != nil {
			t.Fatal(err)
		}
		reg := filepath.Join(root, "workflow.yaml")
		if err := os.Remove(reg); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, reg); err != nil {
			t.Fatal(err)
		}
		err := (Layout{Root: root}).Check()
		if tc.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), reg+" is writable by others (mode "+fmt.Sprintf("%04o", tc.mode))) {
			t.Errorf("workflow.yaml linked to a %04o file: %v", tc.mode, err)
		}
		if err != nil {
			runFix(t, err)
			if err := (Layout{Root: root}).Check(); err != nil {
				t.Errorf("workflow.yaml linked to a %04o file, after the fix: %v", tc.mode, err)
			}
		}
	}
	root, _ := trustRoot(t)
	if err := os.Symlink(filepath.Join(root, "gone"), filepath.Join(root, "dangling")); err != nil {
		t.Fatal(err)
	}
	if err := (Layout{Root: root}).Check(); err != nil {
		t.Errorf("a dangling link: %v", err)
	}
}

func TestARootThatIsNotADirectoryIsRefused(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := (Layout{Root: f}).Check(); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Fatalf("a file as the root: %v", err)
	}
}

// A root, or a path in it, that belongs to another user is refused: its
// owner could open it up at any time. Root's own paths are accepted.
func TestARootOfAnotherUserIsRefused(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("giving a path to another user (uid 65534) needs root")
	}
	for _, rel := range []string{"", "bundles", "bundles/H1.esm.js", "bundles/H1/threads.json", "workflow.yaml", "logs/H1", "engine.agents/T-1"} {
		root, _ := trustRoot(t)
		p := filepath.Join(root, rel)
		if err := os.Lchown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		err := (Layout{Root: root}).Check()
		want := p + " belongs to uid 65534"
		if rel == "" {
			want = "unsafe storage root " + root + ": it belongs to uid 65534"
		}
		if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "sudo chown -R ") {
			t.Errorf("%s owned by uid 65534: %v", rel, err)
		}
	}
}

// A new root is its owner's alone whatever the umask: under umask 000 a
// plain mkdir would leave it open to everyone.
func TestANewRootIsPrivateWhateverTheUmask(t *testing.T) {
	// Serial: changes the process-wide umask.
	for _, mask := range []int{0, 0o002, 0o022, 0o077} {
		old := syscall.Umask(mask)
		root := filepath.Join(t.TempDir(), "a", "root")
		err := (Layout{Root: root}).Open()
		syscall.Umask(old)
		if err != nil {
			t.Fatalf("umask %03o: %v", mask, err)
		}
		for _, d := range []string{root, filepath.Dir(root)} {
			if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("umask %03o: %s is %v (%v), want 0700", mask, d, fi.Mode(), err)
			}
		}
	}
}
