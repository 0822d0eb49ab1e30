package yamlwf

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/uncaged/workflow/engine/canonyaml"
)

// checkStatusKeys holds a keyed route against the statuses its role's
// output schema allows (properties.status.enum, or const), since a key no
// status can take is a route that never fires — almost always a typo — and
// a status without a key fails the thread when it comes.
//
//   - A key that is not an allowed status is an error, FALLBACK or not.
//   - An allowed status without a key is an error unless FALLBACK covers it
//     (or a misspelt key is reported with it as the suggestion).
//   - A schema that does not list the statuses cannot be checked: without
//     FALLBACK, a warning says so, since an unforeseen status fails the
//     thread; with FALLBACK every status has a route and nothing is said.
//   - Without FALLBACK, a listed status the schema does not require is a
//     warning: a step without one fails the thread.
func (p *parser) checkStatusKeys(r *Role, from *yaml.Node, path string, keys []*yaml.Node, hasFallback bool) {
	outputPath := join("roles", r.Name) + ".output"
	allowed, listed := statusValues(r.Output)
	if !listed {
		if !hasFallback {
			p.warnings = append(p.warnings, errAt(from, path,
				"route keys are not checked: %s does not list the statuses (properties.status.enum); a status no key matches fails the thread (add the enum, or a %s entry)",
				outputPath, FallbackKey))
		}
		return
	}
	var names []string
	for _, v := range allowed {
		names = append(names, statusText(v))
	}
	routed := map[string]bool{}
	for _, k := range keys {
		if slices.ContainsFunc(allowed, func(v any) bool { return v == k.Value }) {
			routed[k.Value] = true
			continue
		}
		var strs []string
		for _, v := range allowed {
			if s, ok := v.(string); ok {
				strs = append(strs, s)
			}
		}
		if guess := closest(k.Value, strs); guess != "" {
			p.fail(errAt(k, join(path, k.Value), "no such status (did you mean %q?)", guess))
			// The fix of the key routes the status: one mistake, one report.
			routed[guess] = true
		} else {
			p.fail(errAt(k, join(path, k.Value), "no such status (%s allows: %s)", outputPath, strings.Join(names, ", ")))
		}
	}
	if hasFallback {
		return
	}
	for i, v := range allowed {
		s, isString := v.(string)
		switch {
		case !isString:
			p.fail(errAt(from, path, "status %s has no route: keys match string statuses only (add a %s entry, or make the status a string)", names[i], FallbackKey))
		case !routed[s]:
			p.fail(errAt(from, path, "status %q has no route (add %s: <role or %s>, or a %s entry)", s, quoteKey(s), "__end__", FallbackKey))
		}
	}
	if !requiresStatus(r.Output) {
		p.warnings = append(p.warnings, errAt(from, path,
			"%s does not require status; a step without one fails the thread (add status to required, or a %s entry)",
			outputPath, FallbackKey))
	}
}

// statusValues returns the values the schema allows for meta.status: its
// enum, or its const as a one-value list. listed is false when the schema
// does not pin them down there.
func statusValues(schema canonyaml.Map) (values []any, listed bool) {
	props, ok := schema.Get("properties")
	if !ok {
		return nil, false
	}
	pm, ok := props.(canonyaml.Map)
	if !ok {
		return nil, false
	}
	status, ok := pm.Get("status")
	if !ok {
		return nil, false
	}
	sm, ok := status.(canonyaml.Map)
	if !ok {
		return nil, false
	}
	if enum, ok := sm.Get("enum"); ok {
		if list, ok := enum.([]any); ok && len(list) > 0 {
			return list, true
		}
	}
	if c, ok := sm.Get("const"); ok {
		return []any{c}, true
	}
	return nil, false
}

// requiresStatus reports whether the schema's top-level required lists
// status.
func requiresStatus(schema canonyaml.Map) bool {
	req, ok := schema.Get("required")
	if !ok {
		return false
	}
	list, ok := req.([]any)
	return ok && slices.Contains(list, any("status"))
}

// statusText shows an enum value as JSON: "approved", 3, null.
func statusText(v any) string {
	if m, ok := v.(canonyaml.Map); ok {
		if b, err := m.MarshalJSON(); err == nil {
			return string(b)
		}
	}
	if b, err := json.Marshal(v); err == nil {
		return string(b)
	}
	return fmt.Sprint(v)
}

// quoteKey writes a status as a YAML mapping key would need it.
func quoteKey(s string) string {
	if s != "" && !strings.ContainsAny(s, ":#{}[],&*!|>'\"%@`") && strings.TrimSpace(s) == s {
		return s
	}
	return fmt.Sprintf("%q", s)
}
