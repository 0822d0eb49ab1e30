package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/node"
)

// ExtractMaxRounds is the round limit of Extract (MAX_REACT_ROUNDS).
const ExtractMaxRounds = 10

// ExtractSystemPrompt is the system prompt of the CAS extractor for the
// structured tool toolName (spec §17.6).
func ExtractSystemPrompt(toolName string) string {
	return "You extract structured metadata from content. The content is from a CAS node. " +
		"Use cas_get to read referenced nodes if needed. When ready, call the " + toolName +
		" tool with JSON matching the schema. You may instead reply with only a JSON object (no prose) when no tools are needed."
}

// ExtractResult is the outcome of Extract: the validated metadata and the
// payload of the content node it was extracted from. Refs is always empty.
type ExtractResult struct {
	Meta           json.RawMessage
	ContentPayload string
	Refs           []string
}

// Extract runs the CAS extractor (spec §8.3, §17.6): it loads the content
// node contentHash, and runs React with the cas_get tool and the output
// schema. Errors are prefixed "extract failed: ", except a missing content
// node ("extract: missing CAS content node for hash <h>").
func Extract(ctx context.Context, c Chatter, store *cas.Store, schema json.RawMessage, contentHash string, log func(tag, content string)) (ExtractResult, error) {
	n, err := store.GetNode(contentHash)
	if err != nil {
		return ExtractResult{}, fmt.Errorf("extract: missing CAS content node for hash %s", contentHash)
	}
	content, ok := n.(node.Content)
	if !ok {
		return ExtractResult{}, fmt.Errorf("extract: missing CAS content node for hash %s", contentHash)
	}
	out := Output{Schema: schema}
	meta, err := React(ctx, c, Request{
		System:    ExtractSystemPrompt(outputName(out)),
		User:      content.Payload + "\n\nExtract structured metadata according to the schema.",
		Tools:     []Tool{CasGetTool(store)},
		Output:    out,
		MaxRounds: ExtractMaxRounds,
		Log:       log,
	})
	if err != nil {
		return ExtractResult{}, fmt.Errorf("extract failed: %w", err)
	}
	return ExtractResult{Meta: meta, ContentPayload: content.Payload, Refs: []string{}}, nil
}

// outputName is the structured tool name React will use for o.
func outputName(o Output) string {
	if n := strings.TrimSpace(o.Name); n != "" {
		return n
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(o.Schema, &obj) == nil {
		if n := schemaString(obj["title"]); n != "" {
			return n
		}
	}
	return DefaultOutputName
}
