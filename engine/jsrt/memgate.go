package jsrt

import (
	"errors"
	"math"
	"reflect"

	"github.com/dop251/goja"

	"github.com/uncaged/workflow/engine/membudget"
)

// One call can allocate gigabytes before the memory watchdog's next
// sample, and Go's "runtime: out of memory" ends the whole host rather
// than the call. So every call whose allocation a script sizes — a number
// it passes, the length of something it holds, data a file, a response or
// a child process produces — asks the run's account first (gate, or
// membudget.Account.Reserve off the loop), and throws a RangeError naming
// the budget instead of allocating when that does not fit in what the
// thread's budget leaves or what the host has left. Host functions ask
// where they allocate; goja's built-ins are wrapped at runtime setup
// (memgate_builtins.go).

// ask is what a call may allocate at once: exactly n bytes (charged to
// the run when it goes ahead), or at most n (only checked).
type ask struct {
	n     int64
	exact bool
}

func exactly(n int64) ask { return ask{n: n, exact: true} }
func atMost(n int64) ask  { return ask{n: n} }

// gate is the one place a call on the loop asks before it allocates: it
// throws the refusal as a RangeError when the ask does not fit.
func (e *jsEnv) gate(a ask) {
	if a.n < membudget.ReserveFloor {
		return
	}
	var err error
	if a.exact {
		err = e.loop.acct.Reserve(a.n)
	} else {
		err = e.loop.acct.Fits(a.n)
	}
	if err != nil {
		panic(e.refusal(err))
	}
}

// errCodeMemory is the code of the RangeError a refused call throws.
const errCodeMemory = "ERR_MEMORY_BUDGET"

// refusal is the RangeError a refused call throws: the budget's message,
// and code ERR_MEMORY_BUDGET for a script that wants to tell it apart.
// It is built from the runtime's own RangeError, not the global a script
// may have replaced.
func (e *jsEnv) refusal(err error) *goja.Object {
	obj, cerr := e.vm.New(e.intrinsics.rangeError, e.vm.ToValue(err.Error()))
	if cerr != nil {
		obj = e.vm.NewGoError(err)
	}
	_ = obj.Set("code", errCodeMemory)
	return obj
}

// refusedError is a refusal that escaped a run's JavaScript: the thread
// fails with the refusal's message and where it was thrown, and
// errors.Is(err, membudget.ErrExceeded) holds.
type refusedError struct{ *JSError }

func (e refusedError) Unwrap() error        { return e.JSError }
func (e refusedError) Is(target error) bool { return target == membudget.ErrExceeded }

// asRefusal marks a JSError whose exception was a refusal.
func asRefusal(err error, v goja.Value) error {
	var je *JSError
	if obj, ok := v.(*goja.Object); ok && errors.As(err, &je) {
		if c := obj.Get("code"); c != nil && c.String() == errCodeMemory {
			return refusedError{je}
		}
	}
	return err
}

// Sizes of what goja allocates per item, for asks that are bounds.
const (
	// valueSize is one slot of an array or argument list (an interface).
	valueSize = 16
	// itemSize is one small value made per item (a substring, a key, a
	// number's string): its slot and its header.
	itemSize = 48
)

// sat are saturating operations on sizes: an ask that overflows is as
// refused as one that does not fit.
func satMul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// charSize is the bytes per character goja keeps s in: 1 when it holds it
// as ASCII, else 2 (UTF-16). A string it cannot tell is counted as 2.
func charSize(s goja.Value) int64 {
	if t := reflect.TypeOf(s); t != nil && t.Name() == "asciiString" {
		return 1
	}
	return 2
}

// strLen is the length of a string value in UTF-16 units (0 for anything
// else).
func strLen(v goja.Value) int64 {
	if s, ok := v.(goja.String); ok {
		return int64(s.Length())
	}
	return 0
}

// strBytes is what goja holds s in (0 for anything that is not a string).
func strBytes(v goja.Value) int64 { return strLen(v) * charSize(v) }

// lengthOf is the length property of an object (ToLength: 0 to 2^53-1),
// or the length of a string; 0 for anything else.
func lengthOf(v goja.Value) int64 {
	switch x := v.(type) {
	case goja.String:
		return int64(x.Length())
	case *goja.Object:
		l := x.Get("length")
		if l == nil {
			return 0
		}
		return toLength(l)
	}
	return 0
}

// toLength is ECMAScript's ToLength of a value that is already primitive.
func toLength(v goja.Value) int64 {
	f := v.ToFloat()
	switch {
	case math.IsNaN(f) || f <= 0:
		return 0
	case f >= 1<<53-1:
		return 1<<53 - 1
	}
	return int64(f)
}

// primitive replaces *v with its primitive number (ToNumber) and returns
// it, so that the ask and the built-in read the same value and an
// object's valueOf runs once, as it would without the gate.
func (e *jsEnv) number(v *goja.Value) float64 {
	if *v == nil {
		*v = goja.Undefined()
	}
	n := (*v).ToNumber()
	*v = n
	return n.ToFloat()
}

// text replaces *v with its primitive string (ToString), as number does.
func (e *jsEnv) text(v *goja.Value) goja.Value {
	if *v == nil {
		*v = goja.Undefined()
	}
	if _, ok := (*v).(goja.String); !ok {
		*v = (*v).ToString()
	}
	return *v
}

// count is a non-negative integer argument as a size: NaN 0, infinity
// and anything huge saturated.
func count(f float64) int64 {
	switch {
	case math.IsNaN(f) || f <= 0:
		return 0
	case f >= math.MaxInt64/2:
		return math.MaxInt64 / 2
	}
	return int64(f)
}
