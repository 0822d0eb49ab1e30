package jsrt

import (
	"context"
	"errors"
	"fmt"

	"github.com/dop251/goja"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/workflow"
)

// requireHost throws when host capabilities are used while a bundle's
// top level is validated: the descriptor must be computable without them.
func (e *jsEnv) requireHost(what string) {
	if e.validating || e.host == nil {
		e.throwError(fmt.Sprintf("%s is not available while a bundle is validated (at its top level); use it inside run", what))
	}
}

func (e *jsEnv) store() *cas.Store {
	e.requireHost("the CAS")
	s := e.host.CAS()
	if s == nil {
		e.throwError("this host has no CAS")
	}
	return s
}

// runtimeHost is the Go binding of @uncaged/workflow-runtime.
func (e *jsEnv) runtimeHost() *goja.Object {
	return e.obj(
		// putContentNode(payload, refs) stores a content node exactly as the
		// original's putContentNodeWithRefs does and returns its hash.
		"putContentNode", func(call goja.FunctionCall) goja.Value {
			store := e.store()
			payload := call.Argument(0)
			if !goja.IsString(payload) {
				e.throwTypeError("content payload must be a string")
			}
			refs, err := e.hashList(call.Argument(1), "refs")
			if err != nil {
				e.throwTypeError(err.Error())
			}
			h, err := store.PutNode(node.NewContent(payload.String(), refs))
			if err != nil {
				e.throwError(err.Error())
			}
			return e.vm.ToValue(h)
		},
		// roleBegins(role) tells a host that asks (workflow.RoleAnnouncer)
		// which role createWorkflow's loop runs now.
		"roleBegins", func(call goja.FunctionCall) goja.Value {
			if a, ok := e.host.(workflow.RoleAnnouncer); ok && !e.validating {
				a.RoleBegins(call.Argument(0).String())
			}
			return goja.Undefined()
		},
		// runChild(name, prompt) runs a registered workflow as a child thread
		// through the host and resolves with its outcome.
		"runChild", func(call goja.FunctionCall) goja.Value {
			e.requireHost("running a child workflow")
			name, prompt := call.Argument(0).String(), call.Argument(1).String()
			host := e.host
			return e.async(func(ctx context.Context) (any, error) {
				return host.RunChild(ctx, name, prompt)
			}, func(v any) goja.Value {
				r := v.(workflow.ChildResult)
				return e.obj("returnCode", r.ReturnCode, "summary", r.Summary, "rootHash", r.RootHash, "threadId", r.ThreadID)
			})
		},
	)
}

// runtimeObject is the second argument of run: {cas, extract}.
func (e *jsEnv) runtimeObject() *goja.Object {
	casObj := e.obj(
		// put(content) stores text the way the original's CasStore.put does:
		// raw text is wrapped into a content node, node YAML is kept as is.
		"put", func(call goja.FunctionCall) goja.Value {
			content := call.Argument(0)
			if !goja.IsString(content) {
				return e.settled(nil, &jsValueError{e.newError("TypeError", "runtime.cas.put(content): content must be a string")})
			}
			h, err := e.store().Put(content.String())
			return e.settled(h, err)
		},
		// get(hash) resolves with the stored text, or null when missing.
		"get", func(call goja.FunctionCall) goja.Value {
			b, err := e.store().Get(call.Argument(0).String())
			if errors.Is(err, cas.ErrNotFound) {
				return e.settled(goja.Null(), nil)
			}
			if err != nil {
				return e.settled(nil, err)
			}
			return e.settled(string(b), nil)
		},
		"delete", func(call goja.FunctionCall) goja.Value {
			return e.settled(goja.Undefined(), e.store().Delete(call.Argument(0).String()))
		},
		"list", func(call goja.FunctionCall) goja.Value {
			hashes, err := e.store().List()
			if err != nil {
				return e.settled(nil, err)
			}
			items := make([]any, len(hashes))
			for i, h := range hashes {
				items[i] = h
			}
			return e.settled(e.vm.NewArray(items...), nil)
		},
	)
	// extract(schema, contentHash) asks the host's model for metadata that
	// matches schema: a JSON Schema object, anything with toJSONSchema()
	// (a Zod-like schema), or a Zod schema from before Zod had that method,
	// read from its definition. It resolves {meta, contentPayload, refs: []}.
	extract := func(call goja.FunctionCall) goja.Value {
		e.requireHost("runtime.extract")
		schemaVal, hash := call.Argument(0), call.Argument(1)
		if obj, ok := schemaVal.(*goja.Object); ok {
			convert, ok := goja.AssertFunction(obj.Get("toJSONSchema"))
			var this goja.Value = obj
			var args []goja.Value
			if !ok && obj.Get("_zod") != nil {
				// A Zod schema from before Zod had toJSONSchema().
				zod := e.requireModule("internal:zod").ToObject(e.vm)
				convert, ok = goja.AssertFunction(zod.Get("zodToJSONSchema"))
				this, args = goja.Undefined(), []goja.Value{obj}
			}
			if ok {
				v, err := convert(this, args...)
				if err != nil {
					return e.settled(nil, err)
				}
				schemaVal = v
			}
		}
		tree, err := e.exportTree(schemaVal)
		if err != nil {
			return e.settled(nil, err)
		}
		schema, ok := stripFunctions(tree).(canonyaml.Map)
		if !ok {
			return e.settled(nil, &jsValueError{e.newError("TypeError", "runtime.extract(schema, contentHash): schema must be a JSON Schema object")})
		}
		if !goja.IsString(hash) {
			return e.settled(nil, &jsValueError{e.newError("TypeError", "runtime.extract(schema, contentHash): contentHash must be a string")})
		}
		schemaJSON, err := schema.MarshalJSON()
		if err != nil {
			return e.settled(nil, err)
		}
		host, contentHash := e.host, hash.String()
		return e.async(func(ctx context.Context) (any, error) {
			return host.Extract(ctx, schemaJSON, contentHash)
		}, func(v any) goja.Value {
			r := v.(workflow.ExtractResult)
			return e.obj("meta", e.valueToJS(r.Meta), "contentPayload", r.ContentPayload, "refs", e.vm.NewArray())
		})
	}
	return e.obj("cas", casObj, "extract", extract)
}

// hashList reads an optional array of CAS hashes (undefined or null is
// empty) in canonical form.
func (e *jsEnv) hashList(v goja.Value, what string) ([]string, error) {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return []string{}, nil
	}
	obj, ok := v.(*goja.Object)
	if !ok || obj.ClassName() != "Array" {
		return nil, fmt.Errorf("%s must be an array of CAS hashes, got %s", what, describeJS(v))
	}
	out := []string{}
	var err error
	i := 0
	e.vm.ForOf(obj, func(item goja.Value) bool {
		if !goja.IsString(item) {
			err = fmt.Errorf("%s[%d] must be a CAS hash string, got %s", what, i, describeJS(item))
			return false
		}
		h, perr := ids.ParseHash(item.String())
		if perr != nil {
			err = fmt.Errorf("%s[%d] %q is not a CAS hash", what, i, item.String())
			return false
		}
		out = append(out, h)
		i++
		return true
	})
	return out, err
}

// describeJS names a value's type for error messages.
func describeJS(v goja.Value) string {
	switch {
	case v == nil || goja.IsUndefined(v):
		return "undefined"
	case goja.IsNull(v):
		return "null"
	}
	if obj, ok := v.(*goja.Object); ok {
		switch obj.ClassName() {
		case "Array":
			return "an array"
		case "Function":
			return "a function"
		}
		return "an object"
	}
	return fmt.Sprintf("%s %s", typeofJS(v), safeString(v))
}

func typeofJS(v goja.Value) string {
	if _, ok := v.(*goja.Symbol); ok {
		return "symbol"
	}
	switch {
	case goja.IsString(v):
		return "string"
	case goja.IsNumber(v):
		return "number"
	case goja.IsBigInt(v):
		return "bigint"
	}
	if _, ok := v.Export().(bool); ok {
		return "boolean"
	}
	return "value"
}
