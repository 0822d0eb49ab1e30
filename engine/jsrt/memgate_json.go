package jsrt

import (
	"github.com/dop251/goja"
)

// JSON.stringify writes its whole text in Go: a sparse array of 2^30
// holes is "null" 2^30 times, and an array of references to one large
// string is as many copies of it. Its wrapper counts the text as goja
// writes it, through a replacer function goja calls for every value
// (after toJSON, before writing it): the user's replacer runs inside it,
// and a replacer array (a list of property names, for objects) becomes
// the same selection made by the function, in the list's order.

// jsonMeter is one stringify call's count.
type jsonMeter struct {
	e     *jsEnv
	user  goja.Callable // the caller's replacer function, if any
	keys  []string      // the caller's replacer array, if any
	gap   int64         // indentation per level
	total int64         // bytes written so far, at most
	next  int64         // total at which to ask the gate again
	calls int64
	// holders are the containers being written, outermost first: the
	// indentation of a value is the gap times their number.
	holders []*goja.Object
}

// gateJSONStringify wraps JSON.stringify with a jsonMeter.
func (e *jsEnv) gateJSONStringify(jsonObj *goja.Object) {
	orig, ok := jsonObj.Get("stringify").(*goja.Object)
	if !ok {
		return
	}
	f, ok := orig.Export().(nativeFunc)
	if !ok {
		return
	}
	w := e.vm.ToValue(func(call goja.FunctionCall) goja.Value {
		m := &jsonMeter{e: e, next: 1 << 20}
		replacer := call.Argument(1)
		if r, ok := replacer.(*goja.Object); ok {
			if fn, ok := goja.AssertFunction(r); ok {
				m.user = fn
			} else if e.isArray(r) {
				e.gate(atMost(satMul(lengthOf(r), itemSize)))
				m.keys = propertyList(r)
			}
		}
		m.gap = gapOf(call.Argument(2))
		args := []goja.Value{call.Argument(0), e.vm.ToValue(m.replace), call.Argument(2)}
		return f(goja.FunctionCall{This: call.This, Arguments: args})
	}).(*goja.Object)
	_ = w.DefineDataProperty("name", orig.Get("name"), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	_ = w.DefineDataProperty("length", orig.Get("length"), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	_ = jsonObj.DefineDataProperty("stringify", w, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// propertyList is a replacer array's names, as stringify reads them:
// strings and numbers (and their wrapper objects), each once.
func propertyList(r *goja.Object) []string {
	l := lengthOf(r)
	seen := map[string]bool{}
	keys := []string{}
	for i := int64(0); i < l; i++ {
		v := r.Get(itoa(i))
		switch {
		case v == nil:
			continue
		case goja.IsString(v) || goja.IsNumber(v):
		case isObject(v) && (v.(*goja.Object).ClassName() == "String" || v.(*goja.Object).ClassName() == "Number"):
		default:
			continue
		}
		k := v.String()
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// gapOf is the indentation stringify takes from space: up to 10 spaces
// or the first 10 characters of a string.
func gapOf(space goja.Value) int64 {
	switch {
	case space == nil:
		return 0
	case goja.IsNumber(space):
		return min(count(space.ToFloat()), 10)
	case goja.IsString(space):
		return min(strLen(space), 10)
	}
	if o, ok := space.(*goja.Object); ok {
		switch o.ClassName() {
		case "Number":
			return min(count(o.ToFloat()), 10)
		case "String":
			return min(lengthOf(o), 10)
		}
	}
	return 0
}

// replace is the replacer goja calls with the holder as this, for every
// key and value it is about to write. It runs once per value written:
// it tells objects apart by class, not by calls into the runtime.
func (m *jsonMeter) replace(call goja.FunctionCall) goja.Value {
	holder, _ := call.This.(*goja.Object)
	key, value := call.Argument(0), call.Argument(1)
	if m.user != nil {
		v, err := m.user(call.This, key, value)
		if err != nil {
			panic(err)
		}
		value = v
	}
	e := m.e
	m.calls++
	if m.calls%walkCheck == 0 && e.loop.killed.Load() {
		panic(e.vm.NewGoError(e.loop.killedErr()))
	}
	for len(m.holders) > 0 && holder != nil && m.holders[len(m.holders)-1] != holder {
		m.holders = m.holders[:len(m.holders)-1]
	}
	size := int64(0)
	if m.gap > 0 {
		size = 1 + m.gap*int64(len(m.holders))
	}
	if len(m.holders) > 0 && holder.ClassName() != "Array" {
		size += 2*strLen(key) + 4
	}
	switch v := value.(type) {
	case nil:
		size += 4
	case goja.String:
		size = satAdd(size, satMul(int64(v.Length()), 3)+2)
	case *goja.Object:
		switch v.ClassName() {
		case "Function":
			size += 4
		case "Array":
			size = satAdd(size, satAdd(lengthOf(v), 2))
			m.push(v)
		case "String":
			size = satAdd(size, satMul(lengthOf(v), 3)+2)
		case "Number", "Boolean", "BigInt":
			size += 24
		default:
			size += 2
			if m.keys != nil {
				v = m.pick(v)
				value = v
			}
			m.push(v)
		}
	default:
		size += 24
	}
	m.total = satAdd(m.total, size)
	if m.total >= m.next {
		e.gate(atMost(m.total))
		m.next = satAdd(m.total, max(m.total/8, 1<<20))
	}
	return value
}

// push enters a container goja is about to write the items of.
func (m *jsonMeter) push(o *goja.Object) {
	if len(m.holders) >= maxNesting {
		panic(m.e.newErrorOf(m.e.intrinsics.rangeError, "Maximum call stack size exceeded: JSON.stringify of values nested deeper than "+itoa(maxNesting)))
	}
	m.holders = append(m.holders, o)
}

// pick is o restricted to the replacer array's names, in its order, as
// stringify writes an object given one: read with Get, inherited
// properties included. Its prototype is null, so nothing is added.
func (m *jsonMeter) pick(o *goja.Object) *goja.Object {
	out := m.e.vm.CreateObject(nil)
	for _, k := range m.keys {
		if v := o.Get(k); v != nil {
			_ = out.Set(k, v)
		}
	}
	return out
}
