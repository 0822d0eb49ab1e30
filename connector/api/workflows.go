package api

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/workflow"
	"github.com/uncaged/workflow/engine/yamlwf"
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
// older ones (newest first), the descriptor stored beside the current
// bundle (null when missing or invalid) and its roles' agents.
type WorkflowDetail struct {
	WorkflowSummary
	History    []registry.Version   `json:"history"`
	Descriptor *workflow.Descriptor `json:"descriptor"`
	RoleAgents RoleAgents           `json:"roleAgents"`
}

// RoleAgents are each role's agent, by role name, for a YAML workflow;
// null for a JavaScript bundle (its code picks its agents) and for a YAML
// file that no longer parses.
type RoleAgents map[string]RoleAgent

// RoleAgent is what names the agent a YAML workflow's role runs. A spec's
// args, env and the like are left out on purpose: they may hold secrets,
// and a page showing the workflow must never leak them.
type RoleAgent struct {
	Type string `json:"type"`
	// Name is the agent under agents: the role refers to, if it does.
	Name     string `json:"name,omitempty"`
	Model    string `json:"model,omitempty"`
	Command  string `json:"command,omitempty"`
	Workflow string `json:"workflow,omitempty"`
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
	RoleAgents RoleAgents           `json:"roleAgents"`
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
		RoleAgents:      s.roleAgents(e.Hash),
	})
}

// maxRoleAgentsSource bounds what roleAgents reads: above yamlwf's own
// limit, so a bigger file is refused by Parse like any other bad file.
const maxRoleAgentsSource = 8 << 20

// roleAgents parses the YAML workflow stored as bundle hash for its roles'
// agents: nil for a JavaScript bundle, and for a YAML file that cannot be
// read or parsed, which leaves the rest of the page to show (logged at
// debug). Only the routes showing one version call it: it parses the file.
func (s *server) roleAgents(hash string) RoleAgents {
	hash, err := ids.ParseHash(hash)
	if err != nil {
		return nil
	}
	f, err := os.Open(s.opts.Layout.YAMLWorkflowFile(hash))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.Debug("no role agents: cannot read the YAML workflow", "bundle", hash, "err", err)
		}
		return nil
	}
	defer func() { _ = f.Close() }() // opened read-only
	src, err := io.ReadAll(io.LimitReader(f, maxRoleAgentsSource))
	if err != nil {
		s.log.Debug("no role agents: cannot read the YAML workflow", "bundle", hash, "err", err)
		return nil
	}
	def, err := yamlwf.Parse(src)
	if err != nil {
		s.log.Debug("no role agents: the YAML workflow does not parse", "bundle", hash, "err", err)
		return nil
	}
	return namedAgents(def)
}

// namedAgents names the agent of each role of a parsed YAML workflow.
func namedAgents(def *yamlwf.Definition) RoleAgents {
	out := RoleAgents{}
	for _, r := range def.Roles {
		a := r.Agent
		out[r.Name] = RoleAgent{Type: a.Kind, Name: r.AgentName, Model: a.Model, Command: a.Command, Workflow: a.Workflow}
	}
	return out
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
		return c.JSON(http.StatusOK, WorkflowVersion{Name: name, Hash: hash, Timestamp: e.Timestamp, Current: true, Descriptor: s.descriptor(hash), RoleAgents: s.roleAgents(hash)})
	}
	for _, v := range e.History {
		if v.Hash == hash {
			return c.JSON(http.StatusOK, WorkflowVersion{Name: name, Hash: hash, Timestamp: v.Timestamp, Descriptor: s.descriptor(hash), RoleAgents: s.roleAgents(hash)})
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

// maxBundleSource bounds the source GET /api/bundles/:hash sends: enough
// for any hand-written workflow, and a bundled one is cut, not refused.
const maxBundleSource = 1 << 20

// BundleDetail is GET /api/bundles/:hash: what a thread's bundle hash
// names. A bundle hash is not a CAS node, so the CAS route does not know
// it; this is what the dashboard shows behind a thread's bundle link.
type BundleDetail struct {
	Hash string `json:"hash"`
	// Kind is "js" for a JavaScript bundle, "yaml" for a YAML workflow.
	Kind string `json:"kind"`
	// Workflows are the registered workflows that have this version,
	// current or older (none once every one moved past it and was removed).
	Workflows []BundleWorkflow `json:"workflows"`
	// Source is the stored file's text, its first maxBundleSource bytes;
	// a YAML workflow's with its agents' env values and args hidden
	// (yamlwf.RedactSecrets), since a page shows it to whoever may look
	// at the machine's workflows.
	Source string `json:"source"`
	// Truncated says Source was cut; Size is the whole file's size.
	Truncated bool  `json:"truncated"`
	Size      int64 `json:"size"`
	// Hidden are the paths of the values hidden in Source.
	Hidden []string `json:"hidden,omitempty"`
	// Withheld says why Source is empty: a stored YAML workflow that does
	// not parse cannot be told safe to show.
	Withheld string `json:"withheld,omitempty"`
	// Descriptor is the descriptor stored beside it, null when missing.
	Descriptor *workflow.Descriptor `json:"descriptor"`
	// RoleAgents are a YAML workflow's roles' agents (null for "js").
	RoleAgents RoleAgents `json:"roleAgents"`
}

// BundleWorkflow is a workflow a bundle is a version of.
type BundleWorkflow struct {
	Name    string `json:"name"`
	Current bool   `json:"current"`
}

func (s *server) getBundle(c echo.Context) error {
	hash, err := ids.ParseHash(c.Param("hash"))
	if err != nil {
		return fail(http.StatusBadRequest, "%s", err.Error())
	}
	l := s.opts.Layout
	out := BundleDetail{Hash: hash, Workflows: []BundleWorkflow{}}
	var f *os.File
	for _, try := range []struct{ kind, path string }{{"js", l.BundleFile(hash)}, {"yaml", l.YAMLWorkflowFile(hash)}} {
		f, err = os.Open(try.path)
		if err == nil {
			out.Kind = try.kind
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return s.internal(c, err)
		}
	}
	if f == nil {
		return fail(http.StatusNotFound, "bundle not found: %s", hash)
	}
	defer func() { _ = f.Close() }() // opened read-only
	fi, err := f.Stat()
	if err != nil {
		return s.internal(c, err)
	}
	limit := int64(maxBundleSource)
	if out.Kind == "yaml" {
		limit = yamlwf.MaxInput + 1 // read whole, to find its secrets
	}
	src, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return s.internal(c, err)
	}
	out.Size = fi.Size()
	if out.Kind == "yaml" {
		shown, hidden, def, err := yamlwf.RedactSecrets(src)
		if err != nil {
			s.log.Warn("a stored YAML workflow does not parse: its source is not shown", "bundle", hash, "err", err)
			out.Withheld = "the stored workflow does not parse, so what in it may be secret cannot be told: " + err.Error()
		} else {
			out.RoleAgents = namedAgents(def)
		}
		src, out.Hidden = shown, hidden
	}
	out.Truncated = len(src) > maxBundleSource || (out.Kind == "js" && fi.Size() > int64(len(src)))
	if len(src) > maxBundleSource {
		src = src[:maxBundleSource]
	}
	out.Source = string(src)
	out.Descriptor = s.descriptor(hash)
	reg, err := s.registry(c)
	if err != nil {
		return err
	}
	for _, name := range reg.Names() {
		e, _ := reg.Get(name)
		if e.Hash == hash {
			out.Workflows = append(out.Workflows, BundleWorkflow{Name: name, Current: true})
			continue
		}
		for _, v := range e.History {
			if v.Hash == hash {
				out.Workflows = append(out.Workflows, BundleWorkflow{Name: name})
				break
			}
		}
	}
	return c.JSON(http.StatusOK, out)
}
