package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrUntrusted is matched (errors.Is) by Check's refusal of a root that
// another user could change.
var ErrUntrusted = errors.New("unsafe storage root")

// checkedDirs are the directories whose entries Check judges: the
// root's, and where the code that runs (bundles/), the thread indexes
// (bundles/<hash>/), the logs the engine appends to and the process
// records the host acts on (engine.agents/) live. The contents of cas/,
// of each log directory and of engine.idempotency/ are not listed — they
// are many, and once their directory (an entry of the root, judged with
// it) is closed to others nobody else can add, remove or replace an entry
// in them. (Listed rather than globbed: a root's own path may hold a * or
// a [.)
func (l Layout) checkedDirs() []string {
	dirs := []string{l.Root, l.BundlesDir(), filepath.Join(l.Root, "logs"), filepath.Join(l.Root, "engine.agents")}
	ents, _ := os.ReadDir(l.BundlesDir()) // none when there is no bundles/ yet
	for _, e := range ents {
		if e.IsDir() {
			dirs = append(dirs, l.BundleDir(e.Name()))
		}
	}
	return dirs
}

// Check refuses a storage root that someone other than its owner could
// change: the root, or an entry of it the engine writes or obeys (see
// checkedDirs), that a group or others may write — a sticky bit does
// not help, it still lets them add files such as an engine.sock of their
// own — or that belongs to another user, who could change its mode at any
// time. Entries owned by root are accepted (root can change anything
// anyway), and a symbolic link is judged by what it points to. The
// error names the path, its mode or owner and the command that fixes it.
// A root that does not exist yet passes: there is nothing to trust.
func (l Layout) Check() error {
	fi, err := os.Stat(l.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("storage root: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("storage root %s is not a directory", l.Root)
	}
	me := os.Geteuid()
	var found []problem
	if p, bad := judge(l.Root, fi, me); bad {
		found = append(found, p)
	}
	for _, dir := range l.checkedDirs() {
		found = append(found, checkEntries(dir, me)...)
	}
	if len(found) == 0 {
		return nil
	}
	return refusal(l.Root, found)
}

// Open makes the root ready for use: created when missing, open to its
// owner only whatever the umask (it holds every prompt, model answer and
// agent output, and the engine runs the code in it), then checked (Check).
func (l Layout) Open() error {
	if err := l.EnsureRoot(); err != nil {
		return err
	}
	return l.Check()
}

// problem is one path another user could change.
type problem struct {
	path  string
	mode  fs.FileMode
	owner int  // -1: the owner is fine, the mode is not
	link  bool // the mode is that of the file path links to
}

// judge reports whether fi, found at path, is not the user's alone.
func judge(path string, fi fs.FileInfo, me int) (problem, bool) {
	owner := -1
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != me && st.Uid != 0 {
		owner = int(st.Uid)
	}
	writable := fi.Mode().Perm()&0o022 != 0
	return problem{path: path, mode: fi.Mode(), owner: owner}, owner >= 0 || writable
}

// checkEntries judges the entries of dir; a directory that is not there
// (or is not a directory) has none to judge.
func checkEntries(dir string, me int) []problem {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var found []problem
	for _, e := range ents {
		path := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(path)
		if err != nil {
			continue // removed since it was listed
		}
		p, bad := judge(path, fi, me)
		if fi.Mode()&fs.ModeSymlink != 0 {
			// A link's own mode means nothing, its owner does; and it is
			// judged by its target too. A dangling one has none to change.
			bad = p.owner >= 0
			if target, err := os.Stat(path); err == nil && !bad {
				fi = target
				p, bad = judge(path, target, me)
				p.link = true
			}
		}
		if fi.Mode().Type() == fs.ModeSocket {
			// The engine's socket: its mode says who may connect, not who
			// may change it, and a client judges it — its owner, what it
			// is, and the user answering on it — each time it connects
			// (engine/host).
			continue
		}
		if bad {
			found = append(found, p)
		}
	}
	return found
}

// refusal says what is wrong with the first problem found (the root's,
// if any, comes first; another owner before a mode, as a mode is the
// owner's to change), how many more there are, and the command that
// fixes all of them.
func refusal(root string, found []problem) error {
	var owned, writable []problem
	for _, p := range found {
		if p.owner >= 0 {
			owned = append(owned, p)
		} else {
			writable = append(writable, p)
		}
	}
	name := func(p problem) string {
		if p.path == root {
			return "it"
		}
		return p.path
	}
	more := func(n int) string {
		if n == 0 {
			return ""
		}
		return fmt.Sprintf(" (and %d more path(s) in it)", n)
	}
	if len(owned) > 0 {
		p, me := owned[0], os.Geteuid()
		return fmt.Errorf("%w %s: %s belongs to %s, not to you (%s)%s; another user could change what the engine runs and reads: "+
			"use a storage root of your own (--storage-root or %s), or have it given to you: sudo chown -R %s %s",
			ErrUntrusted, root, name(p), DescribeUser(p.owner), DescribeUser(me), more(len(owned)-1), EnvRoot, userName(me), shellQuote(root))
	}
	// chmod -R leaves alone the links it meets, but follows those it is
	// given.
	var links, inside []string
	for _, q := range writable {
		if q.link {
			links = append(links, shellQuote(q.path))
		} else {
			inside = append(inside, q.path)
		}
	}
	var fixes []string
	switch {
	case len(inside) == 1 && inside[0] == root:
		fixes = append(fixes, "chmod go-w "+shellQuote(root))
	case len(inside) > 0:
		fixes = append(fixes, "chmod -R go-w "+shellQuote(root))
	}
	if len(links) > 0 {
		fixes = append(fixes, "chmod go-w "+strings.Join(links, " "))
	}
	fix := strings.Join(fixes, " && ")
	p := writable[0]
	return fmt.Errorf("%w %s: %s is writable by others (mode %s)%s: another user could change the workflows the engine runs "+
		"or put their own server at its socket; run: %s", ErrUntrusted, root, name(p), OctalMode(p.mode), more(len(writable)-1), fix)
}

// OctalMode is a mode as chmod writes it, with the sticky, setgid and
// setuid bits: 0777, 1777.
func OctalMode(m fs.FileMode) string {
	n := uint32(m.Perm())
	if m&fs.ModeSticky != 0 {
		n |= 0o1000
	}
	if m&fs.ModeSetgid != 0 {
		n |= 0o2000
	}
	if m&fs.ModeSetuid != 0 {
		n |= 0o4000
	}
	return fmt.Sprintf("%04o", n)
}

// DescribeUser is "uid 1000 (alice)", or "uid 1000" when the name is
// unknown.
func DescribeUser(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return fmt.Sprintf("uid %d (%s)", uid, u.Username)
	}
	return fmt.Sprintf("uid %d", uid)
}

// userName is uid's name for chown, or the number.
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return u.Username
	}
	return strconv.Itoa(uid)
}

// shellQuote writes s so that a shell reads it back as one word.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:@,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
