package yamlwf

import (
	"math"
	"strings"

	"github.com/uncaged/workflow/engine/canonyaml"
)

// CollectCASRefs returns the CAS references in meta: every string whose
// schema carries "casRef": true (how Zod's .meta({casRef: true}) appears in
// a JSON Schema), each once, in the order met. The schema is walked beside
// the value through local $refs, properties (in the value's key order) and
// additionalProperties, prefixItems/items, every allOf branch, and the first
// anyOf/oneOf branch the value matches by a shallow check (type, const, enum,
// required keys and the const/enum of its properties — the discriminator of
// a discriminated union).
//
// This is, rule for rule, collectCasRefs of the JavaScript runtime
// (engine/jsrt/js/runtime.js), so a YAML workflow and a bundle store the
// same refs for the same meta.
func CollectCASRefs(schema canonyaml.Map, meta canonyaml.Map) []string {
	if schema == nil {
		return nil
	}
	c := refCollector{root: schema, seen: map[string]bool{}}
	c.walk(schema, meta, 0)
	return c.out
}

type refCollector struct {
	root canonyaml.Map
	out  []string
	seen map[string]bool
}

// maxSchemaDepth stops a pathological schema/value pair from recursing
// without bound; real schemas are a few levels deep.
const maxSchemaDepth = 64

func (c *refCollector) walk(node any, v any, depth int) {
	if depth > maxSchemaDepth {
		return
	}
	s, ok := c.resolve(node).(canonyaml.Map)
	if !ok {
		return
	}
	if flag, _ := s.Get("casRef"); flag == true {
		if str, ok := v.(string); ok && !c.seen[str] {
			c.seen[str] = true
			c.out = append(c.out, str)
		}
	}
	if all, ok := getList(s, "allOf"); ok {
		for _, b := range all {
			c.walk(b, v, depth+1)
		}
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		branches, ok := getList(s, kw)
		if !ok {
			continue
		}
		for _, b := range branches {
			if c.branchMatches(b, v) {
				c.walk(b, v, depth+1)
				break
			}
		}
	}
	switch x := v.(type) {
	case canonyaml.Map:
		props, _ := getMap(s, "properties")
		additional, hasAdditional := getMap(s, "additionalProperties")
		for _, key := range uniqueKeys(x) {
			val, _ := x.Get(key)
			if p, ok := props.Get(key); ok && props != nil {
				c.walk(p, val, depth+1)
			} else if hasAdditional {
				c.walk(additional, val, depth+1)
			}
		}
	case []any:
		prefix, ok := getList(s, "prefixItems")
		if !ok {
			prefix, _ = getList(s, "items")
		}
		var rest any
		if m, ok := getMap(s, "items"); ok {
			rest = m
		} else if m, ok := getMap(s, "additionalItems"); ok {
			rest = m
		}
		for i, item := range x {
			if i < len(prefix) {
				c.walk(prefix[i], item, depth+1)
			} else if rest != nil {
				c.walk(rest, item, depth+1)
			}
		}
	}
}

// resolve follows local "$ref"s ("#/$defs/Name") within the root schema.
func (c *refCollector) resolve(schema any) any {
	s := schema
	for i := 0; i < 32; i++ {
		m, ok := s.(canonyaml.Map)
		if !ok {
			return s
		}
		ref, ok := m.Get("$ref")
		refStr, isStr := ref.(string)
		if !ok || !isStr {
			return s
		}
		if !strings.HasPrefix(refStr, "#") {
			return s
		}
		var target any = c.root
		for _, part := range strings.Split(refStr[1:], "/") {
			if part == "" {
				continue
			}
			key := strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
			tm, ok := target.(canonyaml.Map)
			if !ok {
				target = nil
				break
			}
			target, _ = tm.Get(key)
		}
		if _, ok := target.(canonyaml.Map); !ok {
			return s
		}
		s = target
	}
	return s
}

func (c *refCollector) branchMatches(schema any, v any) bool {
	resolved := c.resolve(schema)
	s, ok := resolved.(canonyaml.Map)
	if !ok {
		return resolved == true
	}
	if t, ok := s.Get("type"); ok && !typeAllows(t, v) {
		return false
	}
	if !constEnumAllow(s, v) {
		return false
	}
	if obj, ok := v.(canonyaml.Map); ok {
		if req, ok := getList(s, "required"); ok {
			for _, k := range req {
				ks, isStr := k.(string)
				if !isStr {
					return false // JS hasOwn(v, 1) is true only for key "1"; no schema writes that
				}
				if _, has := obj.Get(ks); !has {
					return false
				}
			}
		}
		if props, ok := getMap(s, "properties"); ok {
			for _, p := range props {
				val, has := obj.Get(p.Key)
				if !has {
					continue
				}
				if _, isObj := p.Value.(canonyaml.Map); !isObj {
					continue
				}
				ps, ok := c.resolve(p.Value).(canonyaml.Map)
				if ok && !constEnumAllow(ps, val) {
					return false
				}
			}
		}
	}
	return true
}

// constEnumAllow checks "const" and "enum" the way the runtime does: by
// comparing JSON texts.
func constEnumAllow(s canonyaml.Map, v any) bool {
	if cv, ok := s.Get("const"); ok && jsonText(cv) != jsonText(v) {
		return false
	}
	if enum, ok := getList(s, "enum"); ok {
		want := jsonText(v)
		for _, e := range enum {
			if jsonText(e) == want {
				return true
			}
		}
		return false
	}
	return true
}

func jsonText(v any) string {
	b, err := canonyaml.Map{{Key: "v", Value: v}}.MarshalJSON()
	if err != nil {
		return "\x00invalid"
	}
	return string(b)
}

func typeAllows(t any, v any) bool {
	kind := jsonType(v)
	ok := func(one any) bool { return one == kind || (one == "number" && kind == "integer") }
	if list, isList := t.([]any); isList {
		for _, one := range list {
			if ok(one) {
				return true
			}
		}
		return false
	}
	return ok(t)
}

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case canonyaml.Map, map[string]any:
		return "object"
	case []any:
		return "array"
	case float64:
		if !math.IsInf(x, 0) && x == math.Trunc(x) {
			return "integer"
		}
		return "number"
	case int, int64, int32:
		return "integer"
	}
	return "number"
}

func getList(m canonyaml.Map, key string) ([]any, bool) {
	v, _ := m.Get(key)
	l, ok := v.([]any)
	return l, ok
}

func getMap(m canonyaml.Map, key string) (canonyaml.Map, bool) {
	v, _ := m.Get(key)
	mm, ok := v.(canonyaml.Map)
	return mm, ok
}

// uniqueKeys lists a map's keys once each, in order: a JavaScript object
// has no duplicate keys, and Get reads the last of a repeated key.
func uniqueKeys(m canonyaml.Map) []string {
	seen := make(map[string]bool, len(m))
	keys := make([]string, 0, len(m))
	for _, p := range m {
		if !seen[p.Key] {
			seen[p.Key] = true
			keys = append(keys, p.Key)
		}
	}
	return keys
}
