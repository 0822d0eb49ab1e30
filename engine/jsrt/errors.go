package jsrt

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/dop251/goja"
)

// Load errors. Their texts are the original validator's (docs/compatibility.md,
// "Bundles"), because authors search for them.
var (
	errSuffix         = errors.New(`workflow bundle file must use the ".esm.js" suffix`)
	errDefaultExport  = errors.New(`workflow bundle must not use default export; use "export const run" instead`)
	errRunNotCallable = errors.New(`workflow bundle must export run as a callable (e.g. "export const run = async function* (...)")`)
	errNoDescriptor   = errors.New(`workflow bundle must export descriptor (e.g. "export const descriptor = { description, roles, graph }")`)
	errDynamicImport  = errors.New("dynamic import() is not allowed in workflow bundles")
	errRequire        = errors.New("require() is not allowed in workflow bundles")
)

// ErrStalled is returned by Next when the step's promise is pending but
// nothing is left that could settle it: no timer, request, child process
// or child workflow is outstanding (for example `await new Promise(() => {})`).
// Node would exit silently here; a workflow engine must say why a thread
// stopped.
var ErrStalled = errors.New("workflow stalled: the step is waiting on a promise that nothing can settle (no timers, requests, child processes or child workflows are pending)")

// JSError is a JavaScript exception that escaped a bundle, at load time or
// while a run was stepping.
type JSError struct {
	// Message is the exception as JavaScript converts it to a string, for
	// example "TypeError: x is not a function".
	Message string
	// Location is file:line:column of the innermost stack frame in the
	// bundle's own code, or of the innermost frame at all when no such
	// frame is on the stack; "" when unknown. When the bundle carries an
	// inline source map (as `build` writes it), the position is the
	// original source's ("workflows/boom-entry.ts:9:25"); without one it is
	// the bundle's ("16EXBRW66PEZE.esm.js:9:25").
	Location string
	// Stack is the exception's full stack trace, when it has one.
	Stack string
}

// Error returns the message and, when known, the location.
func (e *JSError) Error() string {
	if e.Location == "" {
		return e.Message
	}
	return fmt.Sprintf("%s (%s)", e.Message, e.Location)
}

// stackLine matches one frame of a goja stack string:
// "\tat name (file:line:col(pc))" or "\tat file:line:col(pc)".
var stackLine = regexp.MustCompile(`^\s*at (?:.*? \()?(.+?):(\d+):(\d+)\(\d+\)\)?\s*$`)

// exceptionError turns a goja error from a call into JS into a Go error: a
// JSError for exceptions, the error itself otherwise.
func exceptionError(err error, bundleName string) error {
	var ex *goja.Exception
	if errors.As(err, &ex) {
		if _, ok := err.(*goja.InterruptedError); ok {
			return err
		}
		je := valueError(ex.Value(), bundleName)
		if je.Location == "" || je.Stack == "" {
			// The thrown value carries no stack (a string was thrown, say):
			// the frames goja recorded when it was thrown still tell where.
			frames := ex.Stack()
			var b strings.Builder
			b.WriteString(je.Message)
			for i := range frames {
				b.WriteString("\n\tat ")
				p := frames[i].Position()
				if p.Filename == "" {
					b.WriteString(frames[i].FuncName())
					b.WriteString(" (native)")
					continue
				}
				fmt.Fprintf(&b, "%s (%s:%d:%d)", frames[i].FuncName(), p.Filename, p.Line, p.Column)
			}
			if je.Stack == "" {
				je.Stack = b.String()
			}
			if je.Location == "" {
				je.Location = frameLocation(frames, bundleName)
			}
		}
		return asRefusal(je, ex.Value())
	}
	return err
}

func frameLocation(frames []goja.StackFrame, bundleName string) string {
	first := ""
	for i := range frames {
		p := frames[i].Position()
		if p.Filename == "" {
			continue
		}
		loc := p.Filename + ":" + strconv.Itoa(p.Line) + ":" + strconv.Itoa(p.Column)
		if isBundleFrame(p.Filename, bundleName) {
			return loc
		}
		if first == "" {
			first = loc
		}
	}
	return first
}

// isBundleFrame tells the bundle's own frames from the engine's: the
// modules the engine provides are compiled as "internal:<file>", while a
// bundle's frames carry its name or, through its source map, the names of
// the sources it was built from.
func isBundleFrame(file, bundleName string) bool {
	return file == bundleName || (file != "" && !strings.HasPrefix(file, "internal:"))
}

// valueError describes a thrown or rejected JavaScript value.
func valueError(v goja.Value, bundleName string) *JSError {
	je := &JSError{Message: safeString(v)}
	obj, ok := v.(*goja.Object)
	if !ok {
		return je
	}
	stack := obj.Get("stack")
	if stack == nil || goja.IsUndefined(stack) || goja.IsNull(stack) {
		return je
	}
	je.Stack = stack.String()
	first := ""
	for _, line := range strings.Split(je.Stack, "\n") {
		m := stackLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		loc := m[1] + ":" + m[2] + ":" + m[3]
		if isBundleFrame(m[1], bundleName) {
			je.Location = loc
			return je
		}
		if first == "" {
			first = loc
		}
	}
	je.Location = first
	return je
}

// safeString converts a thrown value to a string the way JavaScript would,
// without letting a hostile toString throw again.
func safeString(v goja.Value) (s string) {
	if v == nil {
		return "undefined"
	}
	defer func() {
		if recover() != nil {
			s = "[exception whose toString throws]"
		}
	}()
	return v.String()
}
