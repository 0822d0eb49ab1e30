// Package tools holds the workspace tools a react agent offers its model
// (the original's, same names and parameters): read_file, write_file, patch_file and
// shell_exec. File tools are confined to one workspace directory: relative
// paths resolve inside it, and any path — absolute, with "..", or through a
// symlink — that would land outside is refused. Failures go back to the
// model as "Error: <msg>" text, so a bad call never ends the role.
package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Workspace is a directory the file tools are confined to. It holds the
// directory open (os.Root), so a symlink swapped in after a path was checked
// still cannot lead outside.
type Workspace struct {
	dir  string // absolute, symlinks resolved
	root *os.Root
	// Env is the environment shell_exec's commands get: the thread's
	// (nil: the engine host's own).
	Env []string
}

// Open opens dir (relative to the working directory when not absolute) as
// a workspace. It must exist and be a directory.
func Open(dir string) (*Workspace, error) {
	if strings.TrimSpace(dir) == "" {
		return nil, errors.New("workspace: no directory given")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("workspace %q does not exist", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", dir, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("workspace %q is not a directory", dir)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", dir, err)
	}
	return &Workspace{dir: real, root: root}, nil
}

// Dir is the workspace's absolute path with symlinks resolved.
func (w *Workspace) Dir() string { return w.dir }

// Close releases the workspace directory.
func (w *Workspace) Close() error { return w.root.Close() }

// Resolve maps a path the model gave to its location inside the workspace,
// relative to the workspace directory ("." for the directory itself).
// Symlinks are resolved on the deepest part of the path that exists; the
// rest is taken as written. A path that leads outside is an error.
func (w *Workspace) Resolve(path string) (string, error) {
	if strings.TrimSpace(path) == "" {
		return "", errors.New("path is required")
	}
	if strings.ContainsRune(path, 0) {
		return "", errors.New("path contains a NUL byte")
	}
	full := filepath.Clean(path)
	if !filepath.IsAbs(full) {
		full = filepath.Join(w.dir, full)
	}
	existing, rest := full, []string(nil)
	for {
		_, err := os.Lstat(existing)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return "", fmt.Errorf("%s: %w", path, unwrapPath(err))
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		rest = append([]string{filepath.Base(existing)}, rest...)
		existing = parent
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, unwrapPath(err))
	}
	rel, err := filepath.Rel(w.dir, filepath.Join(append([]string{real}, rest...)...))
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("path %s is outside the workspace %s", path, w.dir)
	}
	return rel, nil
}

// unwrapPath drops the operation and path of a *fs.PathError, whose path
// would be the resolved one rather than what the model wrote.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// fsErr describes a failed file operation on path (as the model wrote it).
func fsErr(path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("file not found: %s", path)
	case errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("%s is a directory", path)
	}
	return fmt.Errorf("%s: %w", path, unwrapPath(err))
}
