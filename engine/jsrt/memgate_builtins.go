package jsrt

import (
	"reflect"
	"runtime"
	"strings"

	"github.com/dop251/goja"
)

// goja's built-ins run as Go code that JavaScript cannot interrupt, and
// many allocate what a script sizes in one call: new Uint8Array(1e11),
// "x".repeat(3e9), new Array(2 ** 32 - 1).join("ab"), f.apply(null,
// {length: 1e9}). goja has no allocation hook, so at runtime setup each
// such built-in is replaced by a wrapper that asks the gate for what the
// call may allocate, computed from its arguments before it runs, and then
// calls the original. Constructors are wrapped in a Proxy with a construct
// trap: instanceof, prototypes, species and subclassing see the same
// objects as before. The tables below are the whole list; a built-in not
// in them allocates at most a small multiple of what its inputs already
// hold, or calls back into JavaScript for every item (which the watchdog
// can interrupt).

// intrinsics are the runtime's own built-ins the gates use, taken before
// a script can replace the globals.
type intrinsics struct {
	rangeError *goja.Object
	construct  nativeFunc // Reflect.construct
	isArray    nativeFunc // Array.isArray
	isView     nativeFunc // ArrayBuffer.isView
	regExp     *goja.Object
	exec       nativeFunc // RegExp.prototype.exec
}

type nativeFunc = func(goja.FunctionCall) goja.Value

// typedArrays are the typed array constructors and their element sizes.
var typedArrays = []struct {
	name string
	size int64
}{
	{"Int8Array", 1}, {"Uint8Array", 1}, {"Uint8ClampedArray", 1},
	{"Int16Array", 2}, {"Uint16Array", 2},
	{"Int32Array", 4}, {"Uint32Array", 4}, {"Float32Array", 4},
	{"Float64Array", 8}, {"BigInt64Array", 8}, {"BigUint64Array", 8},
}

// installMemoryGates wraps the built-ins that allocate what a script
// sizes. It runs before any script does.
func (e *jsEnv) installMemoryGates() {
	vm := e.vm
	global := vm.GlobalObject()
	get := func(o *goja.Object, key string) *goja.Object { return o.Get(key).(*goja.Object) }
	fn := func(o *goja.Object, key string) nativeFunc {
		f, _ := o.Get(key).Export().(nativeFunc)
		return f
	}
	array, str, object := get(global, "Array"), get(global, "String"), get(global, "Object")
	reflectObj, arrayBuffer := get(global, "Reflect"), get(global, "ArrayBuffer")
	e.intrinsics = intrinsics{
		rangeError: get(global, "RangeError"),
		construct:  fn(reflectObj, "construct"),
		isArray:    fn(array, "isArray"),
		isView:     fn(arrayBuffer, "isView"),
		regExp:     get(global, "RegExp"),
	}
	regExpProto := get(e.intrinsics.regExp, "prototype")
	e.intrinsics.exec = fn(regExpProto, "exec")

	// Constructors.
	e.gateConstructor(global, "ArrayBuffer", func(args []goja.Value) ask {
		if len(args) == 0 {
			return ask{}
		}
		return exactly(count(e.number(&args[0])))
	})
	for _, ta := range typedArrays {
		e.gateConstructor(global, ta.name, e.typedArrayAsk(ta.size))
	}
	typedArray := get(global, "Uint8Array").Prototype() // %TypedArray%
	typedProto := get(typedArray, "prototype")

	// Functions that take a count of items to make or copy.
	e.gateMethod(array, "from", func(c *goja.FunctionCall) ask { return atMost(satMul(itemsOf(c.Argument(0)), itemSize)) })
	e.gateMethod(typedArray, "from", func(c *goja.FunctionCall) ask { return atMost(satMul(itemsOf(c.Argument(0)), itemSize)) })
	e.gateMethod(get(get(global, "Function"), "prototype"), "apply", func(c *goja.FunctionCall) ask {
		return atMost(satMul(lengthOf(c.Argument(1)), valueSize))
	})
	e.gateMethod(reflectObj, "apply", func(c *goja.FunctionCall) ask { return atMost(satMul(lengthOf(c.Argument(2)), valueSize)) })
	e.gateMethod(reflectObj, "construct", func(c *goja.FunctionCall) ask { return atMost(satMul(lengthOf(c.Argument(1)), valueSize)) })
	bigInt := get(global, "BigInt")
	for _, name := range []string{"asUintN", "asIntN"} {
		e.gateMethod(bigInt, name, func(c *goja.FunctionCall) ask { return atMost(count(e.numberArg(c, 0)) / 8) })
	}
	for _, name := range []string{"keys", "values", "entries", "getOwnPropertyNames", "getOwnPropertyDescriptors"} {
		e.gateMethod(object, name, func(c *goja.FunctionCall) ask { return atMost(satMul(e.indexedOf(c.Argument(0)), 4*itemSize)) })
	}
	e.gateMethod(reflectObj, "ownKeys", func(c *goja.FunctionCall) ask { return atMost(satMul(e.indexedOf(c.Argument(0)), 4*itemSize)) })
	e.gateMethod(object, "assign", func(c *goja.FunctionCall) ask {
		n := int64(0)
		for _, src := range c.Arguments[min(1, len(c.Arguments)):] {
			n = satAdd(n, e.indexedOf(src))
		}
		return atMost(satMul(n, 4*itemSize))
	})

	// Array.prototype: a new array of a size the receiver's length says.
	// toReversed, toSorted and with always make that array, and map does
	// for an array (an array-like's is filled as its callback runs): what
	// they ask is charged, so that a second copy in the same instant is
	// judged with the first.
	arrayProto := get(array, "prototype")
	perItem := func(count func(c *goja.FunctionCall, l int64) int64) func(c *goja.FunctionCall) ask {
		return func(c *goja.FunctionCall) ask {
			return atMost(satMul(count(c, lengthOf(c.This)), valueSize))
		}
	}
	whole := func(_ *goja.FunctionCall, l int64) int64 { return l }
	for _, name := range []string{"toReversed", "toSorted", "with"} {
		e.gateMethod(arrayProto, name, func(c *goja.FunctionCall) ask { return exactly(satMul(lengthOf(c.This), valueSize)) })
	}
	e.gateMethod(arrayProto, "map", func(c *goja.FunctionCall) ask {
		a := ask{n: satMul(lengthOf(c.This), valueSize)}
		a.exact = e.isArray(c.This)
		return a
	})
	e.gateMethod(arrayProto, "sort", perItem(whole))
	e.gateMethod(arrayProto, "slice", perItem(func(c *goja.FunctionCall, l int64) int64 { return span(c, l, 0) }))
	e.gateMethod(arrayProto, "fill", func(c *goja.FunctionCall) ask {
		l := lengthOf(c.This)
		per := int64(valueSize)
		if !e.isArray(c.This) {
			per = 4 * itemSize // properties of an ordinary object
		}
		return atMost(satMul(span(c, l, 1), per))
	})
	e.gateMethod(arrayProto, "splice", perItem(func(c *goja.FunctionCall, l int64) int64 {
		added := int64(max(len(c.Arguments)-2, 0))
		if added > 0 {
			return satAdd(l, added)
		}
		return l
	}))
	e.gateMethod(arrayProto, "toSpliced", perItem(func(c *goja.FunctionCall, l int64) int64 {
		return satAdd(l, int64(max(len(c.Arguments)-2, 0)))
	}))
	e.gateMethod(arrayProto, "unshift", perItem(func(c *goja.FunctionCall, l int64) int64 {
		if len(c.Arguments) == 0 {
			return 0
		}
		return satAdd(l, int64(len(c.Arguments)))
	}))
	e.gateMethod(arrayProto, "concat", func(c *goja.FunctionCall) ask {
		n := e.spreadLength(c.This)
		for _, a := range c.Arguments {
			n = satAdd(n, e.spreadLength(a))
		}
		return atMost(satMul(n, valueSize))
	})
	e.gateMethod(arrayProto, "flat", func(c *goja.FunctionCall) ask {
		depth := 1.0
		if d := c.Argument(0); !goja.IsUndefined(d) {
			depth = e.numberArg(c, 0)
		}
		return atMost(satMul(e.flatLength(c.This, depth), valueSize))
	})
	e.gateMethod(arrayProto, "join", func(c *goja.FunctionCall) ask {
		sep := int64(1)
		if s := c.Argument(0); !goja.IsUndefined(s) {
			sep = strBytes(e.textArg(c, 0))
		}
		return atMost(e.joinSize(c.This, sep, 0))
	})
	e.gateMethod(arrayProto, "toLocaleString", func(c *goja.FunctionCall) ask { return atMost(e.joinSize(c.This, 1, 0)) })

	// %TypedArray%.prototype: copies of the receiver, and its text.
	// toReversed, toSorted and with construct their copy with goja's own
	// constructor, not the gated one: what they ask is charged here. map,
	// filter and slice construct theirs through the receiver's species,
	// the gated constructor, which charges it.
	typedPerItem := func(extra int64) func(c *goja.FunctionCall) ask {
		return func(c *goja.FunctionCall) ask {
			l, size := typedLength(c.This)
			return atMost(satMul(l, size+extra))
		}
	}
	for _, name := range []string{"toReversed", "toSorted", "with"} {
		e.gateMethod(typedProto, name, func(c *goja.FunctionCall) ask {
			l, size := typedLength(c.This)
			return exactly(satMul(l, size))
		})
	}
	e.gateMethod(typedProto, "map", typedPerItem(0))
	e.gateMethod(typedProto, "filter", typedPerItem(valueSize))
	e.gateMethod(typedProto, "slice", func(c *goja.FunctionCall) ask {
		l, size := typedLength(c.This)
		return atMost(satMul(span(c, l, 0), size))
	})
	typedText := func(c *goja.FunctionCall, sep int64) ask {
		l, size := typedLength(c.This)
		return atMost(satMul(l, satAdd(sep, numberChars(size))))
	}
	e.gateMethod(typedProto, "join", func(c *goja.FunctionCall) ask {
		sep := int64(1)
		if s := c.Argument(0); !goja.IsUndefined(s) {
			sep = strBytes(e.textArg(c, 0))
		}
		return typedText(c, sep)
	})
	e.gateMethod(typedProto, "toLocaleString", func(c *goja.FunctionCall) ask { return typedText(c, 1) })
	uint8Proto := get(get(global, "Uint8Array"), "prototype")
	for _, name := range []string{"toBase64", "toHex"} {
		if _, ok := uint8Proto.Get(name).(*goja.Object); ok {
			e.gateMethod(uint8Proto, name, func(c *goja.FunctionCall) ask {
				l, _ := typedLength(c.This)
				return atMost(satMul(l, 2))
			})
		}
	}
	e.gateMethod(get(arrayBuffer, "prototype"), "slice", func(c *goja.FunctionCall) ask {
		l := int64(0)
		if o, ok := c.This.(*goja.Object); ok && isArrayBuffer(o) {
			l = int64(len(o.Export().(goja.ArrayBuffer).Bytes()))
		}
		return atMost(span(c, l, 0)) // the species constructor charges it
	})

	// Strings built to a size an argument says.
	stringProto := get(str, "prototype")
	e.gateMethod(stringProto, "repeat", func(c *goja.FunctionCall) ask {
		s := e.textThis(c)
		return exactly(satMul(strBytes(s), count(e.numberArg(c, 0))))
	})
	for _, name := range []string{"padStart", "padEnd"} {
		e.gateMethod(stringProto, name, func(c *goja.FunctionCall) ask {
			s := e.textThis(c)
			n := count(e.numberArg(c, 0))
			size := charSize(s)
			if fill := c.Argument(1); !goja.IsUndefined(fill) {
				size = max(size, charSize(e.textArg(c, 1)))
			}
			return atMost(satMul(n, size))
		})
	}
	e.gateMethod(stringProto, "concat", func(c *goja.FunctionCall) ask {
		n := strBytes(e.textThis(c))
		for _, a := range c.Arguments {
			n = satAdd(n, 2*strLen(a))
		}
		return atMost(n)
	})
	e.gateMethod(stringProto, "split", func(c *goja.FunctionCall) ask {
		if isRegExpLike(c.Argument(0)) {
			return ask{} // RegExp.prototype[Symbol.split] asks
		}
		s := e.textThis(c)
		if goja.IsUndefined(c.Argument(0)) {
			return ask{}
		}
		sep := e.textArg(c, 0)
		return atMost(splitSize(s, countOccurrences(s, sep)))
	})
	for _, name := range []string{"replace", "replaceAll"} {
		all := name == "replaceAll"
		e.gateMethod(stringProto, name, func(c *goja.FunctionCall) ask {
			if isRegExpLike(c.Argument(0)) {
				return ask{} // RegExp.prototype[Symbol.replace] asks
			}
			s := e.textThis(c)
			pattern := e.textArg(c, 0)
			if _, ok := goja.AssertFunction(c.Argument(1)); ok {
				return atMost(strBytes(s))
			}
			r := e.textArg(c, 1)
			matches := int64(1)
			if all {
				matches = countOccurrences(s, pattern)
			}
			return atMost(replaceSize(s, r, strLen(pattern), matches))
		})
	}
	e.gateMethod(str, "raw", func(c *goja.FunctionCall) ask { return atMost(e.rawSize(c)) })
	e.gateSymbolMethod(regExpProto, goja.SymReplace, func(c *goja.FunctionCall) ask {
		s := e.textArg(c, 0)
		if _, ok := goja.AssertFunction(c.Argument(1)); ok {
			return atMost(strBytes(s))
		}
		r := e.textArg(c, 1)
		matches := int64(1)
		if rx, ok := c.This.(*goja.Object); ok && rx.Get("global").ToBoolean() {
			matches = e.regExpMatches(rx, s, func(m int64) int64 { return replaceSize(s, r, strLen(s), m) })
		}
		return atMost(replaceSize(s, r, strLen(s), matches))
	})
	e.gateSymbolMethod(regExpProto, goja.SymSplit, func(c *goja.FunctionCall) ask {
		s := e.textArg(c, 0)
		rx, _ := c.This.(*goja.Object)
		return atMost(splitSize(s, e.regExpMatches(rx, s, func(m int64) int64 { return splitSize(s, m) })))
	})
	e.gateSymbolMethod(regExpProto, goja.SymMatch, func(c *goja.FunctionCall) ask {
		s := e.textArg(c, 0)
		rx, ok := c.This.(*goja.Object)
		if !ok || !rx.Get("global").ToBoolean() {
			return ask{}
		}
		return atMost(splitSize(s, e.regExpMatches(rx, s, func(m int64) int64 { return splitSize(s, m) })))
	})

	// JSON.
	jsonObj := get(global, "JSON")
	e.gateMethod(jsonObj, "parse", func(c *goja.FunctionCall) ask { return atMost(jsonParseSize(e.textArg(c, 0))) })
	e.gateJSONStringify(jsonObj)

	// Iterators: a built-in that drains one (spread, Array.from, new Set,
	// Promise.all) allocates per item in Go the watchdog cannot
	// interrupt; the iterator's next stops once the run is killed, so the
	// watchdog's stop lands. The iterators of arrays (and typed arrays)
	// walk holes that hold nothing, those of strings and matchAll make an
	// object per character of what they walk; those of Maps and Sets walk
	// what the run holds and make little more.
	e.gateNext(e.iteratorOf(vm.NewArray()))
	e.gateNext(e.iteratorOf(vm.ToValue("")))
	matchAllGated := false
	gateMatchAll := func(c *goja.FunctionCall) ask {
		if !matchAllGated {
			matchAllGated = true
			rx, err := vm.New(e.intrinsics.regExp, vm.ToValue("x"), vm.ToValue("g"))
			if f, ok := goja.AssertFunction(rx.GetSymbol(goja.SymMatchAll)); ok && err == nil {
				if it, err := f(rx, vm.ToValue("")); err == nil {
					e.gateNext(it)
				}
			}
		}
		return ask{}
	}
	e.gateMethod(stringProto, "matchAll", gateMatchAll)
	e.gateSymbolMethod(regExpProto, goja.SymMatchAll, gateMatchAll)
}

// gateConstructor replaces holder[name], a constructor, with a native
// constructor that asks first and then constructs the original with the
// same new.target: it has the original's prototype object (whose
// constructor it becomes), statics and [[Prototype]], so instanceof,
// species and subclassing work as before.
func (e *jsEnv) gateConstructor(holder *goja.Object, name string, cost func(args []goja.Value) ask) {
	orig, ok := holder.Get(name).(*goja.Object)
	if !ok {
		return
	}
	construct := e.intrinsics.construct
	var gated *goja.Object
	gated = e.vm.ToValue(func(call goja.ConstructorCall) *goja.Object {
		args := append([]goja.Value(nil), call.Arguments...)
		e.gate(cost(args))
		items := make([]any, len(args))
		for i, a := range args {
			items[i] = a
		}
		// goja gives a native constructor no new.target for a plain
		// `new X(...)`: that is X itself.
		newTarget := call.NewTarget
		if newTarget == nil {
			newTarget = gated
		}
		return construct(goja.FunctionCall{Arguments: []goja.Value{orig, e.vm.NewArray(items...), newTarget}}).(*goja.Object)
	}).(*goja.Object)
	_ = gated.SetPrototype(orig.Prototype())
	for _, k := range orig.GetOwnPropertyNames() {
		v := orig.Get(k)
		switch {
		case k == "prototype":
			_ = gated.DefineDataProperty(k, v, goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE)
		case k == "name" || k == "length":
			_ = gated.DefineDataProperty(k, v, goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
		case isObject(v):
			if _, fn := goja.AssertFunction(v); fn {
				_ = gated.DefineDataProperty(k, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
				break
			}
			fallthrough
		default:
			_ = gated.DefineDataProperty(k, v, goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE)
		}
	}
	// Symbol-keyed statics cannot be listed (goja lists enumerable ones
	// only); the one that matters is Symbol.species, an accessor whose
	// value read here would be the original: a constructor's species is
	// itself.
	if s := orig.GetSymbol(goja.SymSpecies); s != nil && !goja.IsUndefined(s) {
		species := e.vm.ToValue(func(call goja.FunctionCall) goja.Value { return call.This })
		_ = gated.DefineAccessorPropertySymbol(goja.SymSpecies, species, nil, goja.FLAG_TRUE, goja.FLAG_FALSE)
	}
	if proto, ok := orig.Get("prototype").(*goja.Object); ok {
		_ = proto.DefineDataProperty("constructor", gated, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	}
	_ = holder.DefineDataProperty(name, gated, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// gateMethod replaces o[key], a native function, with one that asks for
// cost(call) first; name and length stay the original's. cost may
// replace the receiver and arguments by their primitive values (see
// textThis), so that a conversion with side effects runs once.
func (e *jsEnv) gateMethod(o *goja.Object, key string, cost func(*goja.FunctionCall) ask) {
	orig, ok := o.Get(key).(*goja.Object)
	if !ok {
		return
	}
	if w := e.gated(orig, cost); w != nil {
		_ = o.DefineDataProperty(key, w, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	}
}

// gateSymbolMethod is gateMethod for a method keyed by a symbol.
func (e *jsEnv) gateSymbolMethod(o *goja.Object, key *goja.Symbol, cost func(*goja.FunctionCall) ask) {
	orig, ok := o.GetSymbol(key).(*goja.Object)
	if !ok {
		return
	}
	if w := e.gated(orig, cost); w != nil {
		_ = o.DefineDataPropertySymbol(key, w, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	}
}

func (e *jsEnv) gated(orig *goja.Object, cost func(*goja.FunctionCall) ask) *goja.Object {
	f, ok := orig.Export().(nativeFunc)
	if !ok {
		return nil
	}
	w := e.vm.ToValue(func(call goja.FunctionCall) goja.Value {
		e.gate(cost(&call))
		return f(call)
	}).(*goja.Object)
	_ = w.DefineDataProperty("name", orig.Get("name"), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	_ = w.DefineDataProperty("length", orig.Get("length"), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	return w
}

// gateNext makes next, on the prototype of the built-in iterator it, throw
// once the run has been killed: a Go loop draining the iterator then
// ends.
func (e *jsEnv) gateNext(it goja.Value) {
	o, ok := it.(*goja.Object)
	if !ok || o.Prototype() == nil {
		return
	}
	proto := o.Prototype()
	orig, ok := proto.Get("next").(*goja.Object)
	if !ok {
		return
	}
	f, ok := orig.Export().(nativeFunc)
	if !ok {
		return
	}
	killed := &e.loop.killed
	w := e.vm.ToValue(func(call goja.FunctionCall) goja.Value {
		if killed.Load() {
			panic(e.vm.NewGoError(e.loop.killedErr()))
		}
		e.drained(call.This)
		return f(call)
	}).(*goja.Object)
	_ = w.DefineDataProperty("name", orig.Get("name"), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	_ = w.DefineDataProperty("length", orig.Get("length"), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	_ = proto.DefineDataProperty("next", w, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// drainCheck is how many items of one iterator pass between two looks
// at whether Go code is draining it.
const drainCheck = 1 << 14

// drain counts the items taken from the iterator last stepped.
type drain struct {
	it *goja.Object
	n  int64
}

// drained counts an item taken from the iterator it. When Go code drains
// the iterator whole (a spread, Array.from, new Set, Promise.all: goja's
// iterate), each item is kept as it comes, in an array that grows by
// copying: the drain is held to the budget as a call making an array of
// that many items twice over would be. A for-of loop steps through the
// iterator from JavaScript and keeps nothing on its behalf: it is only
// counted.
func (e *jsEnv) drained(it goja.Value) {
	o, ok := it.(*goja.Object)
	if !ok {
		return
	}
	if e.drain.it != o {
		e.drain = drain{it: o}
	}
	e.drain.n++
	if e.drain.n%drainCheck == 0 && drainingInGo() {
		e.gate(atMost(satMul(e.drain.n, 2*valueSize)))
	}
}

// drainingInGo says whether the iterator being stepped is drained by
// goja's Go loop (iteratorRecord.iterate) rather than by a for-of loop,
// which steps it one item at a time.
func drainingInGo() bool {
	var pcs [24]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs[:])])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "goja.(*iteratorRecord).iterate") {
			return true
		}
		if !more {
			return false
		}
	}
}

func (e *jsEnv) iteratorOf(v goja.Value) goja.Value {
	o, ok := v.(*goja.Object)
	if !ok {
		o = v.ToObject(e.vm)
	}
	f, ok := goja.AssertFunction(o.GetSymbol(goja.SymIterator))
	if !ok {
		return nil
	}
	it, err := f(v)
	if err != nil {
		return nil
	}
	return it
}

// typedArrayAsk is what new <TypedArray>(arg) allocates: a length times
// the element size, a copy of an array-like or iterable (whose items are
// gathered first), or nothing for a view of an ArrayBuffer.
func (e *jsEnv) typedArrayAsk(size int64) func(args []goja.Value) ask {
	return func(args []goja.Value) ask {
		if len(args) == 0 || goja.IsUndefined(args[0]) {
			return ask{}
		}
		o, ok := args[0].(*goja.Object)
		if !ok {
			return exactly(satMul(count(e.number(&args[0])), size))
		}
		if isArrayBuffer(o) {
			return ask{}
		}
		if e.isTypedArray(o) {
			l, _ := typedLength(o)
			return exactly(satMul(l, size))
		}
		per := size
		if _, iterable := goja.AssertFunction(o.GetSymbol(goja.SymIterator)); iterable {
			per += valueSize // gathered into a list first
		}
		return atMost(satMul(itemsOf(o), per))
	}
}

// isArrayBuffer tells an ArrayBuffer without exporting anything else
// (Export copies an ordinary object whole).
func isArrayBuffer(o *goja.Object) bool { return o.ExportType() == arrayBufferType }

var arrayBufferType = reflect.TypeOf(goja.ArrayBuffer{})

func (e *jsEnv) isArray(v goja.Value) bool {
	return e.intrinsics.isArray(goja.FunctionCall{Arguments: []goja.Value{v}}).ToBoolean()
}

func (e *jsEnv) isTypedArray(v goja.Value) bool {
	o, ok := v.(*goja.Object)
	return ok && e.intrinsics.isView(goja.FunctionCall{Arguments: []goja.Value{v}}).ToBoolean() && o.Get("BYTES_PER_ELEMENT") != nil
}

// typedLength is a typed array's length and element size (0, 1 for
// anything else).
func typedLength(v goja.Value) (int64, int64) {
	o, ok := v.(*goja.Object)
	if !ok {
		return 0, 1
	}
	size := int64(1)
	if b := o.Get("BYTES_PER_ELEMENT"); b != nil {
		size = max(b.ToInteger(), 1)
	}
	return lengthOf(o), size
}

// numberChars is the longest text of one element of a typed array whose
// elements are size bytes ("-128", "-32768", a float's shortest form).
func numberChars(size int64) int64 {
	switch size {
	case 1:
		return 4
	case 2:
		return 6
	}
	return 24
}

// itemsOf is how many items a built-in will gather from v: its length, a
// Map's or Set's size, a string's length; 0 for an iterator, whose next
// is gated instead.
func itemsOf(v goja.Value) int64 {
	if s, ok := v.(goja.String); ok {
		return int64(s.Length())
	}
	o, ok := v.(*goja.Object)
	if !ok {
		return 0
	}
	if l := o.Get("length"); l != nil && !goja.IsUndefined(l) {
		return toLength(l)
	}
	if goja.IsNumber(o.Get("size")) {
		return toLength(o.Get("size"))
	}
	return 0
}

// indexedOf is how many index properties v has that hold no memory of
// their own: a typed array's or a string's elements. 0 for anything else.
func (e *jsEnv) indexedOf(v goja.Value) int64 {
	switch x := v.(type) {
	case goja.String:
		return int64(x.Length())
	case *goja.Object:
		if e.isTypedArray(x) {
			return lengthOf(x)
		}
		if x.ClassName() == "String" {
			return lengthOf(x)
		}
	}
	return 0
}

// spreadLength is how many items concat takes from v.
func (e *jsEnv) spreadLength(v goja.Value) int64 {
	o, ok := v.(*goja.Object)
	if !ok {
		return 1
	}
	spread := e.isArray(o)
	if s := o.GetSymbol(goja.SymIsConcatSpreadable); s != nil && !goja.IsUndefined(s) {
		spread = s.ToBoolean()
	}
	if spread {
		return lengthOf(o)
	}
	return 1
}

// span is how many items an argument pair (start, end) at first selects
// of l, as slice and fill read them; arguments that are not numbers count
// as everything (a bound; their valueOf is left to the built-in).
func span(c *goja.FunctionCall, l int64, first int) int64 {
	rel := func(i int, def int64) int64 {
		v := c.Argument(i)
		if goja.IsUndefined(v) {
			return def
		}
		if !goja.IsNumber(v) {
			return -1
		}
		f := v.ToFloat()
		switch {
		case f != f:
			return 0
		case f < 0:
			return max(l+int64(max(f, -float64(l))), 0)
		}
		return min(int64(min(f, float64(l))), l)
	}
	start, end := rel(first, 0), rel(first+1, l)
	if start < 0 || end < 0 {
		return l
	}
	return max(end-start, 0)
}

// numberArg is argument i as a number, converted once (see number).
func (e *jsEnv) numberArg(c *goja.FunctionCall, i int) float64 {
	if i >= len(c.Arguments) {
		return goja.Undefined().ToFloat()
	}
	if _, ok := c.Arguments[i].(*goja.Object); ok {
		c.Arguments = append([]goja.Value(nil), c.Arguments...)
	}
	return e.number(&c.Arguments[i])
}

// textArg is argument i as a string, converted once.
func (e *jsEnv) textArg(c *goja.FunctionCall, i int) goja.Value {
	if i >= len(c.Arguments) {
		return goja.Undefined().ToString()
	}
	if _, ok := c.Arguments[i].(goja.String); !ok {
		c.Arguments = append([]goja.Value(nil), c.Arguments...)
	}
	return e.text(&c.Arguments[i])
}

// textThis is the receiver as a string, converted once (null and
// undefined are left for the built-in to refuse).
func (e *jsEnv) textThis(c *goja.FunctionCall) goja.Value {
	if c.This == nil || goja.IsUndefined(c.This) || goja.IsNull(c.This) {
		return goja.Undefined().ToString()
	}
	return e.text(&c.This)
}

// isRegExpLike says whether a string method hands v's own Symbol method
// the call (a RegExp, or anything with Symbol.split/replace/match).
func isRegExpLike(v goja.Value) bool {
	o, ok := v.(*goja.Object)
	if !ok {
		return false
	}
	for _, s := range []*goja.Symbol{goja.SymReplace, goja.SymSplit, goja.SymMatch} {
		if m := o.GetSymbol(s); m != nil && !goja.IsUndefined(m) && !goja.IsNull(m) {
			return true
		}
	}
	return false
}

// countOccurrences is how many times sep is found in s, as split and
// replaceAll find it (an empty sep: between every character).
func countOccurrences(s, sep goja.Value) int64 {
	n, m := strLen(s), strLen(sep)
	if m == 0 {
		return n + 1
	}
	if charSize(s) == 1 && charSize(sep) == 1 {
		return int64(strings.Count(s.String(), sep.String()))
	}
	ss, ps := s.(goja.String), sep.(goja.String)
	found := int64(0)
	first := ps.CharAt(0)
	for i := 0; i+int(m) <= int(n); i++ {
		if ss.CharAt(i) != first {
			continue
		}
		j := 1
		for ; j < int(m) && ss.CharAt(i+j) == ps.CharAt(j); j++ {
		}
		if j == int(m) {
			found++
			i += int(m) - 1
		}
	}
	return found
}

// splitSize is what splitting s into parts+1 items makes: an array slot
// and a small string per item, and at most a copy of s.
func splitSize(s goja.Value, parts int64) int64 {
	return satAdd(satMul(satAdd(parts, 1), itemSize), strBytes(s))
}

// replaceSize bounds the result of replacing matches of a pattern of
// length m in s by r: r once per match, where "$&" inserts the match and
// "$`", "$'" or a capture insert at most s.
func replaceSize(s, r goja.Value, m, matches int64) int64 {
	dollars, matchRefs := dollarsIn(r)
	perMatch := strLen(r)
	perMatch = satAdd(perMatch, satMul(matchRefs, m))
	perMatch = satAdd(perMatch, satMul(dollars-matchRefs, strLen(s)))
	return satMul(satAdd(strLen(s), satMul(matches, perMatch)), 2)
}

// dollarsIn counts the "$" of a replacement string, and of them the
// "$&".
func dollarsIn(r goja.Value) (dollars, matchRefs int64) {
	rs, ok := r.(goja.String)
	if !ok {
		return 0, 0
	}
	n := rs.Length()
	for i := 0; i < n; i++ {
		if rs.CharAt(i) == '$' {
			dollars++
			if i+1 < n && rs.CharAt(i+1) == '&' {
				matchRefs++
			}
		}
	}
	return dollars, matchRefs
}

// regExpMatches counts the matches of the global form of rx in s, as far
// as it matters: when even a match at every position fits (enough(len+1)
// is small) it does not run the expression. The count stops as soon as
// enough says the result is over what any budget could hold.
func (e *jsEnv) regExpMatches(rx *goja.Object, s goja.Value, enough func(int64) int64) int64 {
	upper := strLen(s) + 1
	if rx == nil || e.loop.acct.Fits(enough(upper)) == nil {
		return upper
	}
	source, flags := rx.Get("source"), rx.Get("flags")
	if source == nil || flags == nil {
		return upper
	}
	f := flags.String()
	if !strings.Contains(f, "g") {
		f += "g"
	}
	clone, err := e.vm.New(e.intrinsics.regExp, source, e.vm.ToValue(f))
	if err != nil {
		return upper
	}
	found := int64(0)
	for {
		m := e.intrinsics.exec(goja.FunctionCall{This: clone, Arguments: []goja.Value{s}})
		if goja.IsNull(m) {
			return found
		}
		found++
		if found&0xfff == 0 {
			if e.loop.killed.Load() {
				panic(e.vm.NewGoError(e.loop.killedErr()))
			}
			if e.loop.acct.Fits(enough(found)) != nil {
				return found
			}
		}
		if strLen(m.(*goja.Object).Get("0")) == 0 {
			last := clone.Get("lastIndex").ToInteger()
			_ = clone.Set("lastIndex", last+1)
		}
	}
}

// rawSize is what String.raw(template, ...subs) makes: its raw strings
// and substitutions joined.
func (e *jsEnv) rawSize(c *goja.FunctionCall) int64 {
	t, ok := c.Argument(0).(*goja.Object)
	if !ok {
		return 0
	}
	raw, ok := t.Get("raw").(*goja.Object)
	if !ok {
		return 0
	}
	l := lengthOf(raw)
	total := int64(0)
	for i := int64(0); i < l; i++ {
		total = satAdd(total, 2*textSize(raw.Get(itoa(i))))
		if sub := int(i) + 1; i+1 < l && sub < len(c.Arguments) {
			total = satAdd(total, 2*textSize(c.Arguments[sub]))
		}
		if i&0xffff == 0xffff && e.loop.acct.Fits(total) != nil {
			return total
		}
	}
	return total
}

// textSize is the length of the text a primitive value converts to
// ("undefined" for a missing one); 0 for objects, whose conversion runs
// their JavaScript (which the watchdog can interrupt).
func textSize(v goja.Value) int64 {
	switch {
	case v == nil || goja.IsUndefined(v):
		return 9
	case goja.IsNull(v):
		return 4
	case goja.IsString(v):
		return strLen(v)
	}
	if _, ok := v.(*goja.Object); ok {
		return 0
	}
	return 24
}

// jsonParseSize bounds what JSON.parse makes of text: every container an
// object, every separator a value, and the characters themselves.
func jsonParseSize(text goja.Value) int64 {
	n := strLen(text)
	if n*charSize(text) < 1<<20 {
		return 0
	}
	containers, values := int64(0), int64(1)
	count := func(c uint16) {
		switch c {
		case '{', '[':
			containers++
		case ',', ':':
			values++
		}
	}
	if charSize(text) == 1 {
		b := text.String() // an ASCII string converts without a copy
		for i := 0; i < len(b); i++ {
			count(uint16(b[i]))
		}
	} else {
		s := text.(goja.String)
		for i := 0; i < int(n); i++ {
			count(s.CharAt(i))
		}
	}
	return satAdd(satAdd(satMul(containers, 4*itemSize), satMul(values, itemSize)), strBytes(text))
}

// gateBuffer gates goja_nodejs's Buffer, held in exports: new Buffer and
// Buffer.from copy what they are given (an array-like's length in bytes),
// Buffer.alloc makes size bytes and Buffer.concat the sum of its list or
// the total it is told. buffer.js builds the rest of Buffer on these.
func (e *jsEnv) gateBuffer(exports *goja.Object) {
	from := func(args []goja.Value) ask {
		if len(args) == 0 {
			return ask{}
		}
		switch a := args[0].(type) {
		case goja.String:
			enc := "utf8"
			if len(args) > 1 && goja.IsString(args[1]) {
				enc = args[1].String()
			}
			return atMost(encodedSize(a, enc))
		case *goja.Object:
			if isArrayBuffer(a) {
				return ask{}
			}
			return exactly(itemsOf(a))
		}
		return ask{}
	}
	e.gateConstructor(exports, "Buffer", from)
	buf, ok := exports.Get("Buffer").(*goja.Object)
	if !ok {
		return
	}
	e.gateMethod(buf, "from", func(c *goja.FunctionCall) ask { return from(c.Arguments) })
	e.gateMethod(buf, "alloc", func(c *goja.FunctionCall) ask {
		if !goja.IsNumber(c.Argument(0)) {
			return ask{} // refused by alloc itself
		}
		return exactly(count(c.Argument(0).ToFloat()))
	})
	e.gateMethod(buf, "concat", func(c *goja.FunctionCall) ask {
		if total := c.Argument(1); goja.IsNumber(total) {
			return exactly(count(total.ToFloat()))
		}
		list, ok := c.Argument(0).(*goja.Object)
		if !ok {
			return ask{}
		}
		n := int64(0)
		for i, l := int64(0), lengthOf(list); i < l; i++ {
			n = satAdd(n, lengthOf(list.Get(itoa(i))))
			if i%walkCheck == walkCheck-1 && e.loop.acct.Fits(n) != nil {
				break
			}
		}
		return exactly(n)
	})
}
