package llm

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/ids"
)

// CasGetToolName is the name of the tool returned by CasGetTool.
const CasGetToolName = "cas_get"

// Texts returned to the model for bad cas_get arguments (spec §7.5).
const (
	casGetRequiresHash = `cas_get requires {"hash": "<cas-hash>"}.`
	casGetNotJSON      = `cas_get arguments were not valid JSON.`
)

// CasGetTool returns the cas_get tool (spec §7.5, §8.3): {"hash": "..."} →
// the raw stored blob (YAML for nodes), or "null" when the hash is not
// stored or not a valid hash. Bad arguments produce explanatory text for the
// model rather than an error.
func CasGetTool(store *cas.Store) Tool {
	return Tool{
		Name:        CasGetToolName,
		Description: "Read a Merkle DAG node from content-addressed storage by its hash. Returns YAML-formatted node with type, payload, and refs or children fields (content nodes use refs).",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"hash":{"type":"string","description":"The CAS hash to retrieve"}},"required":["hash"]}`),
		Handler: func(_ context.Context, argsJSON string) (string, error) {
			var v any
			if err := json.Unmarshal([]byte(argsJSON), &v); err != nil {
				return casGetNotJSON, nil
			}
			args, _ := v.(map[string]any)
			h, ok := args["hash"].(string)
			if !ok || h == "" {
				return casGetRequiresHash, nil
			}
			if _, err := ids.ParseHash(h); err != nil {
				return "null", nil
			}
			b, err := store.Get(h)
			if errors.Is(err, cas.ErrNotFound) {
				return "null", nil
			}
			if err != nil {
				return "", err
			}
			return string(b), nil
		},
	}
}
