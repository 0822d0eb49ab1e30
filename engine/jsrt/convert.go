package jsrt

import (
	"errors"
	"math"

	"github.com/dop251/goja"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/membudget"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/workflow"
)

// threadToJS builds the ThreadContext a bundle's run receives
// (docs/compatibility.md, "Bundles"). thread.prompt is the start content too, for bundles
// written against the oldest signature; it is not enumerable, so the
// object still serializes to the documented shape.
func (e *jsEnv) threadToJS(t workflow.ThreadContext) *goja.Object {
	var parent any
	if t.Start.ParentState != "" {
		parent = t.Start.ParentState
	}
	start := e.obj(
		"role", node.RoleStart,
		"content", t.Start.Content,
		"meta", e.vm.NewObject(),
		"timestamp", t.Start.Timestamp,
		"parentState", parent,
	)
	steps := make([]any, len(t.Steps))
	for i, s := range t.Steps {
		refs := make([]any, len(s.Refs))
		for j, r := range s.Refs {
			refs[j] = r
		}
		steps[i] = e.obj(
			"role", s.Role,
			"meta", e.valueToJS(mapOrEmpty(s.Meta)),
			"contentHash", s.ContentHash,
			"refs", e.vm.NewArray(refs...),
			"timestamp", s.Timestamp,
		)
	}
	obj := e.obj(
		"threadId", t.ThreadID,
		"depth", t.Depth,
		"bundleHash", t.BundleHash,
		"start", start,
		"steps", e.vm.NewArray(steps...),
	)
	_ = obj.DefineDataProperty("prompt", e.vm.ToValue(t.Start.Content), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	return obj
}

func mapOrEmpty(m canonyaml.Map) canonyaml.Map {
	if m == nil {
		return canonyaml.Map{}
	}
	return m
}

// valueToJS converts a canonyaml value tree to fresh JavaScript values.
func (e *jsEnv) valueToJS(v any) goja.Value {
	switch x := v.(type) {
	case nil:
		return goja.Null()
	case canonyaml.Map:
		o := e.vm.NewObject()
		for _, p := range x {
			_ = o.Set(p.Key, e.valueToJS(p.Value))
		}
		return o
	case map[string]any:
		o := e.vm.NewObject()
		for k, val := range x {
			_ = o.Set(k, e.valueToJS(val))
		}
		return o
	case []any:
		items := make([]any, len(x))
		for i, it := range x {
			items[i] = e.valueToJS(it)
		}
		return e.vm.NewArray(items...)
	case []string:
		items := make([]any, len(x))
		for i, it := range x {
			items[i] = it
		}
		return e.vm.NewArray(items...)
	}
	return e.vm.ToValue(v)
}

// jsFunction stands for a JavaScript function in an exported tree: a value
// that is neither an object nor a string to descriptor validation, and is
// dropped like JSON.stringify drops it everywhere else.
type jsFunction struct{}

// maxExportDepth bounds nesting, which also catches cycles.
const maxExportDepth = 1000

var errTooDeep = errors.New("value is nested too deeply or is cyclic")

// exportTree converts a JavaScript value to a canonyaml value tree with
// JSON.stringify's rules — toJSON is honoured, undefined and symbols are
// dropped from objects and become null in arrays, non-finite numbers
// become null, key order is JavaScript's — except that functions become
// jsFunction placeholders, for the caller to judge or strip. The tree is
// held to the run's memory budget as it grows (a sparse array of 2^32
// holes, or many references to one large string, would otherwise become
// a tree that size): past it the export fails with the refusal.
func (e *jsEnv) exportTree(v goja.Value) (any, error) {
	m := &treeMeter{acct: e.loop.acct, next: 1 << 20}
	return m.tree(v, 0)
}

// treeMeter counts what an export has made.
type treeMeter struct {
	acct        *membudget.Account
	total, next int64
}

// add counts n bytes and asks the account once the total has grown by
// an eighth since it last asked.
func (m *treeMeter) add(n int64) error {
	m.total = satAdd(m.total, n)
	if m.total < m.next {
		return nil
	}
	m.next = satAdd(m.total, max(m.total/8, 1<<20))
	return m.acct.Fits(m.total)
}

func (m *treeMeter) tree(v goja.Value, depth int) (any, error) {
	if depth > maxExportDepth {
		return nil, errTooDeep
	}
	if err := m.add(valueSize); err != nil {
		return nil, err
	}
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return nil, nil
	}
	if obj, ok := v.(*goja.Object); ok {
		if toJSON, ok := goja.AssertFunction(obj.Get("toJSON")); ok {
			r, err := toJSON(obj)
			if err != nil {
				return nil, err
			}
			if r != v {
				return m.tree(r, depth+1)
			}
		}
		if _, ok := goja.AssertFunction(v); ok {
			return jsFunction{}, nil
		}
		switch obj.ClassName() {
		case "Array":
			n := lengthOf(obj)
			if err := m.add(satMul(n, valueSize)); err != nil {
				return nil, err
			}
			out := make([]any, 0, n)
			for i := int64(0); i < n; i++ {
				item, err := m.tree(obj.Get(itoa(i)), depth+1)
				if err != nil {
					return nil, err
				}
				if _, ok := item.(jsFunction); ok {
					item = nil
				}
				out = append(out, item)
			}
			return out, nil
		case "Number", "String", "Boolean":
			if valueOf, ok := goja.AssertFunction(obj.Get("valueOf")); ok {
				prim, err := valueOf(obj)
				if err != nil {
					return nil, err
				}
				if _, isObj := prim.(*goja.Object); !isObj {
					return m.tree(prim, depth+1)
				}
			}
		}
		keys := obj.Keys()
		out := make(canonyaml.Map, 0, len(keys))
		for _, k := range keys {
			val := obj.Get(k)
			if val == nil || goja.IsUndefined(val) {
				continue
			}
			if _, ok := val.(*goja.Symbol); ok {
				continue
			}
			if err := m.add(int64(len(k)) + 2*valueSize); err != nil {
				return nil, err
			}
			item, err := m.tree(val, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, canonyaml.Pair{Key: k, Value: item})
		}
		return out, nil
	}
	switch {
	case goja.IsString(v):
		if err := m.add(strLen(v) * (2*charSize(v) - 1)); err != nil { // UTF-8: up to 3 bytes a unit
			return nil, err
		}
		return v.String(), nil
	case goja.IsNumber(v):
		f := v.ToFloat()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, nil
		}
		return f, nil
	case goja.IsBigInt(v):
		return nil, errors.New("a BigInt cannot be serialized")
	}
	if b, ok := v.Export().(bool); ok {
		return b, nil
	}
	return nil, nil // a symbol
}

// stripFunctions removes jsFunction placeholders with JSON.stringify's
// rules: dropped from objects, null in arrays.
func stripFunctions(v any) any {
	switch x := v.(type) {
	case jsFunction:
		return nil
	case canonyaml.Map:
		out := make(canonyaml.Map, 0, len(x))
		for _, p := range x {
			if _, ok := p.Value.(jsFunction); ok {
				continue
			}
			out = append(out, canonyaml.Pair{Key: p.Key, Value: stripFunctions(p.Value)})
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, it := range x {
			out[i] = stripFunctions(it)
		}
		return out
	}
	return v
}
