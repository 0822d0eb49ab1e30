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

// HeadEnd returns the head state when it is an __end__ state, else nil.
func HeadEnd(store *cas.Store, head string) (*node.State, error) {
	n, err := store.GetNode(head)
	if errors.Is(err, cas.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if st, ok := n.(node.State); ok && st.IsEnd() {
		return &st, nil
	}
	return nil, nil
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
