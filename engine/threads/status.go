package threads

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/node"
)

// ErrUnsoundNode is matched (errors.Is) by every *NodeError: a head or
// start that cannot back what a view would say about its thread.
var ErrUnsoundNode = errors.New("thread node cannot be trusted")

// NodeError says why the head or start a thread's line names cannot be
// trusted.
type NodeError struct {
	// Field is "head" or "start".
	Field string
	// Hash is the node the line names.
	Hash string
	// Problem completes "<field> <hash> ...": "is not in the CAS", ...
	Problem string
}

// Error says which node and what is wrong with it.
func (e *NodeError) Error() string { return e.Field + " " + e.Hash + " " + e.Problem }

// Is makes errors.Is(err, ErrUnsoundNode) hold.
func (e *NodeError) Is(target error) bool { return target == ErrUnsoundNode }

// ReadStatus decides the status of the thread rec names: every view of a
// thread's status (listings, a thread's detail, the live stream, the
// fleet's change feed) comes from here, so none can show a status the
// store cannot back. It reads the head, as any status must, and checks
// that it is what the line says: a blob in the CAS whose bytes hash to its
// name, and either the line's start (a thread that has made no step yet)
// or a state of that start's chain; the start of a state head must be in
// the CAS too (one stat, not a read). A thread that fails any of these is
// StatusDamaged, with a *DamageError naming the line (rec.Path, rec.Line)
// and what is wrong; otherwise DeriveStatus decides.
//
// What it cannot see without reading more than the head: a start that is
// there but whose bytes were changed, and damage further down the chain
// (doctor reads every node).
func ReadStatus(store *cas.Store, rec Record, live Liveness) (Status, *DamageError) {
	n, err := readTrusted(store, "head", rec.Head)
	if err == nil {
		err = headOfLine(store, rec, n)
	}
	if err != nil {
		return StatusDamaged, &DamageError{
			Path: rec.Path, Line: rec.Line, Thread: rec.ThreadID,
			Reason: fmt.Sprintf("thread %s: %v, so its status cannot be known", rec.ThreadID, err),
		}
	}
	return DeriveStatus(rec.Source, endOf(n), live), nil
}

// headOfLine checks that n, the node read as rec's head, is where rec's
// chain can end: its start, or a state whose first ref (a state's start,
// in both implementations) is that start, which is in the CAS.
func headOfLine(store *cas.Store, rec Record, n node.Node) error {
	if rec.Head == rec.Start {
		if _, ok := n.(node.Start); !ok {
			return &NodeError{Field: "start", Hash: rec.Start, Problem: fmt.Sprintf("is a %s node, not the start of a thread", n.Type())}
		}
		return nil
	}
	st, ok := n.(node.State)
	if !ok {
		return &NodeError{Field: "head", Hash: rec.Head, Problem: fmt.Sprintf("is a %s node, not a step of start %s", n.Type(), rec.Start)}
	}
	first := ""
	if len(st.Refs) > 0 {
		first, _ = ids.ParseHash(st.Refs[0])
	}
	if first != rec.Start {
		return &NodeError{Field: "head", Hash: rec.Head, Problem: fmt.Sprintf("is a step of start %q, not of the line's start %s: the line was changed", first, rec.Start)}
	}
	switch ok, err := store.Exists(rec.Start); {
	case err != nil:
		return &NodeError{Field: "start", Hash: rec.Start, Problem: readProblem(store, err)}
	case !ok:
		return &NodeError{Field: "start", Hash: rec.Start, Problem: "is not in the CAS"}
	}
	return nil
}

// readTrusted reads the node a line names as its field and checks it is
// one: in the CAS, a regular file that reads, bytes that hash to its name
// and parse as a node.
func readTrusted(store *cas.Store, field, hash string) (node.Node, error) {
	b, err := store.Get(hash)
	switch {
	case errors.Is(err, cas.ErrNotFound):
		return nil, &NodeError{Field: field, Hash: hash, Problem: "is not in the CAS"}
	case err != nil:
		return nil, &NodeError{Field: field, Hash: hash, Problem: readProblem(store, err)}
	case !strings.EqualFold(ids.HashBytes(b), hash):
		return nil, &NodeError{Field: field, Hash: hash, Problem: "does not hash to its name: its bytes were changed"}
	}
	n, err := node.Parse(b)
	if err != nil {
		return nil, &NodeError{Field: field, Hash: hash, Problem: "is not a thread node: " + err.Error()}
	}
	return n, nil
}

// readProblem says why a blob could not be read without the machine's
// directory layout, which travels no further than the machine (the API's
// answers go through the gateway).
func readProblem(store *cas.Store, err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return "cannot be read: " + pe.Err.Error()
	}
	return "cannot be read: " + strings.ReplaceAll(err.Error(), store.Dir(), "cas")
}
