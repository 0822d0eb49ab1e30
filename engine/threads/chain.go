package threads

import (
	"errors"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/node"
)

// Frame is one state of a thread's chain with its hash.
type Frame struct {
	Hash  string
	State node.State
}

// Walk returns the state frames that end at head, oldest first, following
// each state's direct parent (ancestors[0]). It stops, without error, at a
// missing blob, a node that is not a state (the start node) or a state with no
// ancestors; a blob that cannot be parsed is an error.
func Walk(store *cas.Store, head string) ([]Frame, error) {
	var frames []Frame
	seen := make(map[string]bool)
	for h := head; h != "" && !seen[h]; {
		seen[h] = true
		n, err := store.GetNode(h)
		if errors.Is(err, cas.ErrNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		st, ok := n.(node.State)
		if !ok {
			break
		}
		frames = append(frames, Frame{Hash: h, State: st})
		h = ""
		if len(st.Payload.Ancestors) > 0 {
			h = st.Payload.Ancestors[0]
		}
	}
	for i, j := 0, len(frames)-1; i < j; i, j = i+1, j-1 {
		frames[i], frames[j] = frames[j], frames[i]
	}
	return frames, nil
}

// HeadEnd returns the head state when it is an __end__ state, else nil
// (a step, or the start of a thread that has made none). A head that
// cannot be trusted — not in the CAS, unreadable, bytes that do not hash
// to its name, not a start or state node — is a *NodeError
// (ErrUnsoundNode): nothing can be said about how the thread stands.
// ReadStatus also checks the head against its line's start.
func HeadEnd(store *cas.Store, head string) (*node.State, error) {
	n, err := readTrusted(store, "head", head)
	if err != nil {
		return nil, err
	}
	if _, ok := n.(node.Content); ok {
		return nil, &NodeError{Field: "head", Hash: head, Problem: "is a content node, not a step or the start of a thread"}
	}
	return endOf(n), nil
}

// endOf is n when it is an __end__ state, else nil.
func endOf(n node.Node) *node.State {
	if st, ok := n.(node.State); ok && st.IsEnd() {
		return &st
	}
	return nil
}

// ContentPayload returns the text of a content node, or false when hash
// names no readable content node.
func ContentPayload(store *cas.Store, hash string) (string, bool) {
	n, err := store.GetNode(hash)
	if err != nil {
		return "", false
	}
	c, ok := n.(node.Content)
	if !ok {
		return "", false
	}
	return c.Payload, true
}
