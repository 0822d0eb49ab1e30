package jsrt

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/dop251/goja"

	"github.com/uncaged/workflow/engine/membudget"
	"github.com/uncaged/workflow/engine/threadenv"
)

// The file system calls run on the loop: they are quick local calls, and
// doing them inline keeps every JavaScript-visible effect on one goroutine.
// Their promise forms (fs.promises) settle on the next microtask, which is
// all a caller can observe.

// errnoCodes names the errors Node reports with a code.
var errnoCodes = map[syscall.Errno]string{
	syscall.ENOENT:       "ENOENT",
	syscall.EEXIST:       "EEXIST",
	syscall.EACCES:       "EACCES",
	syscall.EPERM:        "EPERM",
	syscall.ENOTDIR:      "ENOTDIR",
	syscall.EISDIR:       "EISDIR",
	syscall.ENOTEMPTY:    "ENOTEMPTY",
	syscall.EINVAL:       "EINVAL",
	syscall.EBADF:        "EBADF",
	syscall.EMFILE:       "EMFILE",
	syscall.ELOOP:        "ELOOP",
	syscall.ENAMETOOLONG: "ENAMETOOLONG",
	syscall.EXDEV:        "EXDEV",
	syscall.EBUSY:        "EBUSY",
	syscall.EROFS:        "EROFS",
	syscall.ENOSPC:       "ENOSPC",
}

// throwFS throws err the way Node's fs does:
// "ENOENT: no such file or directory, open '/x'" with code, errno,
// syscall and path set.
func (e *jsEnv) throwFS(err error, syscallName, path string) {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		code := errnoCodes[errno]
		if code == "" {
			code = fmt.Sprintf("E%d", int(errno))
		}
		msg := fmt.Sprintf("%s: %s, %s '%s'", code, errno.Error(), syscallName, path)
		e.throwError(msg, "code", code, "errno", -int(errno), "syscall", syscallName, "path", path)
	}
	e.throwError(fmt.Sprintf("%s, %s '%s'", err.Error(), syscallName, path), "syscall", syscallName, "path", path)
}

func fileType(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "char"
	case m&fs.ModeDevice != 0:
		return "block"
	}
	return "unknown"
}

// fsHost backs fs.js.
func (e *jsEnv) fsHost() *goja.Object {
	str := func(call goja.FunctionCall, i int) string { return call.Argument(i).String() }
	// A relative path is relative to process.cwd(): the thread's directory,
	// not the engine host's.
	path := func(call goja.FunctionCall, i int) string { return threadenv.Of(e.host).Abs(str(call, i)) }
	undef := goja.Undefined()
	return e.obj(
		"readFile", func(call goja.FunctionCall) goja.Value {
			return e.arrayBuffer(e.readFile(path(call, 0)))
		},
		"writeFile", func(call goja.FunctionCall) goja.Value {
			p := path(call, 0)
			data, _ := bytesOf(call.Argument(1))
			mode := os.FileMode(call.Argument(2).ToInteger()) & os.ModePerm
			flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
			if call.Argument(3).ToBoolean() {
				flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
			}
			f, err := os.OpenFile(p, flags, mode)
			if err != nil {
				e.throwFS(err, "open", p)
			}
			_, err = f.Write(data)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				e.throwFS(err, "write", p)
			}
			return undef
		},
		"mkdir", func(call goja.FunctionCall) goja.Value {
			p := path(call, 0)
			mode := os.FileMode(call.Argument(2).ToInteger()) & os.ModePerm
			if !call.Argument(1).ToBoolean() {
				if err := os.Mkdir(p, mode); err != nil {
					e.throwFS(err, "mkdir", p)
				}
				return undef
			}
			// Node returns the first directory it created, or undefined.
			abs, err := filepath.Abs(p)
			if err != nil {
				e.throwFS(err, "mkdir", p)
			}
			first := ""
			for d := abs; ; d = filepath.Dir(d) {
				if _, err := os.Stat(d); err == nil {
					break
				}
				first = d
				if filepath.Dir(d) == d {
					break
				}
			}
			if err := os.MkdirAll(p, mode); err != nil {
				e.throwFS(err, "mkdir", p)
			}
			if first == "" {
				return undef
			}
			return e.vm.ToValue(first)
		},
		"readdir", func(call goja.FunctionCall) goja.Value {
			p := path(call, 0)
			entries, err := os.ReadDir(p)
			if err != nil {
				e.throwFS(err, "scandir", p)
			}
			out := make([]any, len(entries))
			for i, de := range entries {
				out[i] = e.vm.NewArray(de.Name(), fileType(de.Type()))
			}
			return e.vm.NewArray(out...)
		},
		"stat", func(call goja.FunctionCall) goja.Value {
			p := path(call, 0)
			lstat, throwIfMissing := call.Argument(1).ToBoolean(), call.Argument(2).ToBoolean()
			var fi os.FileInfo
			var err error
			name := "stat"
			if lstat {
				fi, err = os.Lstat(p)
				name = "lstat"
			} else {
				fi, err = os.Stat(p)
			}
			if err != nil {
				if !throwIfMissing && errors.Is(err, fs.ErrNotExist) {
					return goja.Null()
				}
				e.throwFS(err, name, p)
			}
			return e.statObject(fi)
		},
		"exists", func(call goja.FunctionCall) goja.Value {
			_, err := os.Stat(path(call, 0))
			return e.vm.ToValue(err == nil)
		},
		"access", func(call goja.FunctionCall) goja.Value {
			p := path(call, 0)
			if err := access(p, uint32(call.Argument(1).ToInteger())); err != nil {
				e.throwFS(err, "access", p)
			}
			return undef
		},
		"rm", func(call goja.FunctionCall) goja.Value {
			p := path(call, 0)
			recursive, force := call.Argument(1).ToBoolean(), call.Argument(2).ToBoolean()
			fi, err := os.Lstat(p)
			if err != nil {
				if force && errors.Is(err, fs.ErrNotExist) {
					return undef
				}
				e.throwFS(err, "lstat", p)
			}
			if fi.IsDir() && !recursive {
				e.throwError(fmt.Sprintf("Path is a directory: rm returned EISDIR (is a directory) %s", p), "code", "ERR_FS_EISDIR", "path", p)
			}
			if err := os.RemoveAll(p); err != nil {
				e.throwFS(err, "rm", p)
			}
			return undef
		},
		"rmdir", func(call goja.FunctionCall) goja.Value {
			p := path(call, 0)
			var err error
			if call.Argument(1).ToBoolean() {
				err = os.RemoveAll(p)
			} else {
				err = removeDir(p)
			}
			if err != nil {
				e.throwFS(err, "rmdir", p)
			}
			return undef
		},
		"unlink", func(call goja.FunctionCall) goja.Value {
			p := path(call, 0)
			if err := removeFile(p); err != nil {
				e.throwFS(err, "unlink", p)
			}
			return undef
		},
		"rename", func(call goja.FunctionCall) goja.Value {
			from, to := path(call, 0), path(call, 1)
			if err := os.Rename(from, to); err != nil {
				e.throwFS(err, "rename", from)
			}
			return undef
		},
		"copyFile", func(call goja.FunctionCall) goja.Value {
			src, dst := path(call, 0), path(call, 1)
			if err := copyFile(src, dst, call.Argument(2).ToBoolean()); err != nil {
				e.throwFS(err, "copyfile", src)
			}
			return undef
		},
		"realpath", func(call goja.FunctionCall) goja.Value {
			p := path(call, 0)
			abs, err := filepath.Abs(p)
			if err == nil {
				abs, err = filepath.EvalSymlinks(abs)
			}
			if err != nil {
				e.throwFS(err, "realpath", p)
			}
			return e.vm.ToValue(abs)
		},
		"mkdtemp", func(call goja.FunctionCall) goja.Value {
			prefix := path(call, 0)
			dir, base := filepath.Split(prefix)
			if dir == "" {
				dir = "."
			}
			d, err := os.MkdirTemp(dir, base+"*")
			if err != nil {
				e.throwFS(err, "mkdtemp", prefix+"XXXXXX")
			}
			return e.vm.ToValue(d)
		},
		"readlink", func(call goja.FunctionCall) goja.Value {
			p := path(call, 0)
			t, err := os.Readlink(p)
			if err != nil {
				e.throwFS(err, "readlink", p)
			}
			return e.vm.ToValue(t)
		},
		"symlink", func(call goja.FunctionCall) goja.Value {
			target, p := str(call, 0), path(call, 1) // the target is relative to the link
			if err := os.Symlink(target, p); err != nil {
				e.throwFS(err, "symlink", target)
			}
			return undef
		},
		"chmod", func(call goja.FunctionCall) goja.Value {
			p := path(call, 0)
			if err := os.Chmod(p, os.FileMode(call.Argument(1).ToInteger())&os.ModePerm); err != nil {
				e.throwFS(err, "chmod", p)
			}
			return undef
		},
	)
}

// readFile reads the file at p whole, as os.ReadFile does but within what
// the run's memory budget and the host leave (readAll): /dev/zero or a
// file larger than that throws the refusal instead.
func (e *jsEnv) readFile(p string) []byte {
	f, err := os.Open(p)
	if err != nil {
		e.throwFS(err, "open", p)
	}
	defer func() { _ = f.Close() }() // opened read-only
	hint := int64(0)
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		hint = fi.Size()
	}
	b, err := readAll(e.loop.acct, f, hint)
	if errors.Is(err, membudget.ErrExceeded) {
		panic(e.refusal(err))
	}
	if err != nil {
		e.throwFS(err, "open", p)
	}
	return b
}

func (e *jsEnv) statObject(fi os.FileInfo) goja.Value {
	mtime := float64(fi.ModTime().UnixNano()) / 1e6
	st := statTimes(fi)
	atime, ctime := mtime, mtime
	if st.ok {
		atime, ctime = st.atimeMs, st.ctimeMs
	}
	return e.obj(
		"type", fileType(fi.Mode()),
		"size", fi.Size(),
		"mode", st.mode(fi),
		"dev", st.dev, "ino", st.ino, "nlink", st.nlink, "uid", st.uid, "gid", st.gid,
		"atimeMs", atime,
		"mtimeMs", mtime,
		"ctimeMs", ctime,
		"birthtimeMs", ctime,
	)
}

func copyFile(src, dst string, exclusive bool) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }() // opened read-only
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if exclusive {
		flags |= os.O_EXCL
	}
	out, err := os.OpenFile(dst, flags, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		return errors.Join(err, out.Close())
	}
	return out.Close()
}
