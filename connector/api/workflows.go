package api

import (
	"net/http"
	"os"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/workflow"
)

// WorkflowSummary is one workflow in GET /api/workflows: its current
// version. (The original's dashboard read "currentHash"; the server always
// sent "hash", which is what it is called here.)
type WorkflowSummary struct {
	Name      string `json:"name"`
	Hash      string `json:"hash"`
	Timestamp int64  `json:"timestamp"`
}

// WorkflowDetail is GET /api/workflows/:name: the current version, the
// older ones (newest first), and the descriptor stored beside the current
// bundle (null when missing or invalid).
type WorkflowDetail struct {
	WorkflowSummary
	History    []registry.Version   `json:"history"`
	Descriptor *workflow.Descriptor `json:"descriptor"`
}

// WorkflowVersion is GET /api/workflows/:name/versions/:hash: one version
// of a workflow, current or older, with the descriptor stored beside its
// bundle. The dashboard draws a thread's graph from the version the thread
// ran, not from whatever is current now.
type WorkflowVersion struct {
	Name       string               `json:"name"`
	Hash       string               `json:"hash"`
	Timestamp  int64                `json:"timestamp"`
	Current    bool                 `json:"current"`
	Descriptor *workflow.Descriptor `json:"descriptor"`
}

// WorkflowHistory is GET /api/workflows/:name/history: every version,
// newest first, the current one marked.
type WorkflowHistory struct {
	Name    string                `json:"name"`
	History []registry.HistoryRow `json:"history"`
}

func (s *server) registry(c echo.Context) (*registry.Registry, error) {
	r, err := registry.Load(s.opts.Layout.RegistryFile())
	if err != nil {
		return nil, s.internal(c, err)
	}
	return r, nil
}

func (s *server) listWorkflows(c echo.Context) error {
	r, err := s.registry(c)
	if err != nil {
		return err
	}
	out := []WorkflowSummary{}
	for _, name := range r.Names() {
		e, _ := r.Get(name)
		out = append(out, WorkflowSummary{Name: name, Hash: e.Hash, Timestamp: e.Timestamp})
	}
	return c.JSON(http.StatusOK, map[string]any{"workflows": out})
}

// lookupWorkflow finds :name: 404 for a name the registry does not have,
// 400 when the name could never be registered.
func (s *server) lookupWorkflow(c echo.Context) (string, registry.Entry, error) {
	name := c.Param("name")
	r, err := s.registry(c)
	if err != nil {
		return name, registry.Entry{}, err
	}
	if e, ok := r.Get(name); ok {
		return name, e, nil
	}
	if err := registry.ValidateName(name); err != nil {
		return name, registry.Entry{}, fail(http.StatusBadRequest, "%s", err.Error())
	}
	return name, registry.Entry{}, fail(http.StatusNotFound, "workflow not found: %s", name)
}

func (s *server) getWorkflow(c echo.Context) error {
	name, e, err := s.lookupWorkflow(c)
	if err != nil {
		return err
	}
	history := e.History
	if history == nil {
		history = []registry.Version{}
	}
	return c.JSON(http.StatusOK, WorkflowDetail{
		WorkflowSummary: WorkflowSummary{Name: name, Hash: e.Hash, Timestamp: e.Timestamp},
		History:         history,
		Descriptor:      s.descriptor(e.Hash),
	})
}

// descriptor reads bundles/<hash>.yaml, or nil when it is missing or does
// not validate (as the original).
func (s *server) descriptor(hash string) *workflow.Descriptor {
	// workflow.yaml is a file anyone may edit: never build a path from a
	// hash that is not one.
	hash, err := ids.ParseHash(hash)
	if err != nil {
		return nil
	}
	b, err := os.ReadFile(s.opts.Layout.DescriptorFile(hash))
	if err != nil {
		return nil
	}
	d, err := workflow.ParseDescriptorYAML(b)
	if err != nil {
		return nil
	}
	return &d
}

func (s *server) workflowVersion(c echo.Context) error {
	name, e, err := s.lookupWorkflow(c)
	if err != nil {
		return err
	}
	hash, err := ids.ParseHash(c.Param("hash"))
	if err != nil {
		return fail(http.StatusBadRequest, "%s", err.Error())
	}
	if hash == e.Hash {
		return c.JSON(http.StatusOK, WorkflowVersion{Name: name, Hash: hash, Timestamp: e.Timestamp, Current: true, Descriptor: s.descriptor(hash)})
	}
	for _, v := range e.History {
		if v.Hash == hash {
			return c.JSON(http.StatusOK, WorkflowVersion{Name: name, Hash: hash, Timestamp: v.Timestamp, Descriptor: s.descriptor(hash)})
		}
	}
	return fail(http.StatusNotFound, "version not found: %s has no version %s", name, hash)
}

func (s *server) workflowHistory(c echo.Context) error {
	name, e, err := s.lookupWorkflow(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, WorkflowHistory{Name: name, History: e.VersionRows()})
}

// rollbackWorkflow is POST /api/workflows/:name/rollback {"hash"?}: make an
// earlier version current (default: the previous one).
func (s *server) rollbackWorkflow(c echo.Context) error {
	name, _, err := s.lookupWorkflow(c)
	if err != nil {
		return err
	}
	obj, err := readObject(c, true)
	if err != nil {
		return err
	}
	target := ""
	switch v := obj["hash"].(type) {
	case nil:
	case string:
		if target, err = ids.ParseHash(v); err != nil {
			return fail(http.StatusBadRequest, "%s", err.Error())
		}
	default:
		return fail(http.StatusBadRequest, "hash must be a string")
	}
	l := s.opts.Layout
	v, err := registry.RollbackFile(l.RegistryFile(), name, target, l.HasBundle)
	if err != nil {
		return fail(http.StatusBadRequest, "%s", err.Error())
	}
	return c.JSON(http.StatusOK, map[string]any{"name": name, "hash": v.Hash, "timestamp": v.Timestamp})
}
