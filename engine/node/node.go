// Package node defines the immutable nodes a thread is made of — content,
// start and state — their YAML envelope {type, payload, refs}, and the exact
// serialization the original engine hashes. A node's hash is the hash of its
// serialized bytes, so two implementations agree on a hash only if they agree
// on every byte; canonyaml provides that byte-exact form.
package node

import (
	"errors"
	"fmt"

	"github.com/uncaged/workflow/engine/canonyaml"
)

// Node types, the value of the envelope's "type" key.
const (
	TypeContent = "content"
	TypeStart   = "start"
	TypeState   = "state"
)

// Reserved role names.
const (
	RoleStart = "__start__"
	RoleEnd   = "__end__"
	RoleFork  = "__fork__"
)

// AncestorsCap is how many predecessors a state node lists: the direct parent
// and the ten before it.
const AncestorsCap = 11

// Node is any thread node.
type Node interface {
	// Type is the envelope's type: content, start or state.
	Type() string
	// References lists the hashes this node points to, in envelope order.
	References() []string
	// Marshal returns the exact bytes that are stored and hashed.
	Marshal() ([]byte, error)
}

// Content is a piece of text (a prompt, a role's output, a summary) plus the
// hashes of artifacts it refers to.
type Content struct {
	Payload string
	Refs    []string
}

// StartPayload describes a thread's start. It carries no thread id and no
// timestamp, so forks of a thread share their start node.
type StartPayload struct {
	Name  string
	Hash  string // bundle hash
	Depth int64
	// ParentState is the parent thread's state hash for a child thread, or
	// "" (YAML null) for a top-level thread.
	ParentState string
}

// Start is the first node of a thread. Refs[0] is the prompt's content node.
type Start struct {
	Payload StartPayload
	Refs    []string
}

// StatePayload is one step of a thread.
type StatePayload struct {
	Role      string // role name, RoleEnd or RoleFork
	Meta      canonyaml.Map
	Start     string   // start node hash
	Content   string   // content node hash
	Ancestors []string // newest first, at most AncestorsCap; empty for the first step
	// Compact is reserved by the original and always "" (null).
	Compact   string
	Timestamp int64 // milliseconds since the epoch
	// ChildThread is the final state hash of a child thread this step ran, or "".
	ChildThread string
}

// State is one step of a thread.
type State struct {
	Payload StatePayload
	Refs    []string
}

// NewContent builds a content node. refs may be nil.
func NewContent(payload string, refs []string) Content {
	return Content{Payload: payload, Refs: nonNil(refs)}
}

// NewStart builds a start node whose refs are the prompt's content hash and,
// for a child thread, the parent state.
func NewStart(p StartPayload, promptHash string) Start {
	refs := []string{promptHash}
	if p.ParentState != "" {
		refs = append(refs, p.ParentState)
	}
	return Start{Payload: p, Refs: refs}
}

// NewState builds a state node with refs = CollectRefs(p).
func NewState(p StatePayload) State {
	return State{Payload: p, Refs: CollectRefs(p)}
}

// CollectRefs returns the hashes a state payload points to, in the order the
// original writes them: start, content, ancestors..., compact, childThread
// (the last two only when set).
func CollectRefs(p StatePayload) []string {
	refs := make([]string, 0, 2+len(p.Ancestors)+2)
	refs = append(refs, p.Start, p.Content)
	refs = append(refs, p.Ancestors...)
	if p.Compact != "" {
		refs = append(refs, p.Compact)
	}
	if p.ChildThread != "" {
		refs = append(refs, p.ChildThread)
	}
	return refs
}

// Ancestors returns the ancestor list for the state that follows parent:
// parent first, then parent's own ancestors, capped at AncestorsCap. A first
// step (parent == "") has none.
func Ancestors(parent string, parentAncestors []string) []string {
	if parent == "" {
		return []string{}
	}
	out := make([]string, 0, AncestorsCap)
	out = append(out, parent)
	for _, a := range parentAncestors {
		if len(out) == AncestorsCap {
			break
		}
		out = append(out, a)
	}
	return out
}

// Type implements Node.
func (Content) Type() string { return TypeContent }

// Type implements Node.
func (Start) Type() string { return TypeStart }

// Type implements Node.
func (State) Type() string { return TypeState }

// References implements Node.
func (n Content) References() []string { return n.Refs }

// References implements Node.
func (n Start) References() []string { return n.Refs }

// References implements Node.
func (n State) References() []string { return n.Refs }

// Marshal implements Node.
func (n Content) Marshal() ([]byte, error) {
	return envelope(TypeContent, n.Payload, n.Refs)
}

// Marshal implements Node.
func (n Start) Marshal() ([]byte, error) {
	p := canonyaml.Map{
		{Key: "name", Value: n.Payload.Name},
		{Key: "hash", Value: n.Payload.Hash},
		{Key: "depth", Value: n.Payload.Depth},
		{Key: "parentState", Value: nullable(n.Payload.ParentState)},
	}
	return envelope(TypeStart, p, n.Refs)
}

// Marshal implements Node.
func (n State) Marshal() ([]byte, error) {
	meta := n.Payload.Meta
	if meta == nil {
		meta = canonyaml.Map{}
	}
	p := canonyaml.Map{
		{Key: "role", Value: n.Payload.Role},
		{Key: "meta", Value: meta},
		{Key: "start", Value: n.Payload.Start},
		{Key: "content", Value: n.Payload.Content},
		{Key: "ancestors", Value: nonNil(n.Payload.Ancestors)},
		{Key: "compact", Value: nullable(n.Payload.Compact)},
		{Key: "timestamp", Value: n.Payload.Timestamp},
		{Key: "childThread", Value: nullable(n.Payload.ChildThread)},
	}
	return envelope(TypeState, p, n.Refs)
}

// IsEnd reports whether this state closes its thread.
func (n State) IsEnd() bool { return n.Payload.Role == RoleEnd }

// ReturnCode reads an __end__ state's meta.returnCode. A missing or
// non-numeric code counts as 1, as in the original.
func (n State) ReturnCode() int {
	v, ok := n.Payload.Meta.Get("returnCode")
	if !ok {
		return 1
	}
	switch x := v.(type) {
	case float64:
		return int(x)
	case int64:
		return int(x)
	case int:
		return x
	}
	return 1
}

// Summary reads an __end__ state's meta.summary, or "".
func (n State) Summary() string {
	v, _ := n.Payload.Meta.Get("summary")
	s, _ := v.(string)
	return s
}

func envelope(typ string, payload any, refs []string) ([]byte, error) {
	b, err := canonyaml.Marshal(canonyaml.Map{
		{Key: "type", Value: typ},
		{Key: "payload", Value: payload},
		{Key: "refs", Value: nonNil(refs)},
	})
	if err != nil {
		return nil, fmt.Errorf("serialize %s node: %w", typ, err)
	}
	return b, nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ErrNotNode is wrapped by Parse errors for text that is not a thread node.
var ErrNotNode = errors.New("not a thread node")
