// Package registry reads and writes workflow.yaml: the named workflows, each
// with its current bundle hash and older versions, and the config section
// (LLM providers, models, depth limits). It keeps the original's format and
// error messages, keeps the config section as written (an "env:VAR" API key
// stays a reference in the file), and serialises writers across processes.
package registry

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/uncaged/workflow/engine/atomicfile"
	"github.com/uncaged/workflow/engine/canonyaml"
)

// Version is one registered bundle of a workflow.
type Version struct {
	Hash      string `json:"hash"`
	Timestamp int64  `json:"timestamp"` // ms since the epoch
}

// Entry is a workflow: its current version and older ones, newest first.
type Entry struct {
	Hash      string    `json:"hash"`
	Timestamp int64     `json:"timestamp"`
	History   []Version `json:"history"`
}

// Registry is the parsed workflow.yaml.
type Registry struct {
	// config is the config section exactly as read (nil when absent), so a
	// write never rewrites what a person put there.
	config any
	// extra holds unknown top-level keys, kept on write.
	extra     canonyaml.Map
	names     []string // insertion order, as a JS object keeps it
	workflows map[string]Entry
	// Warnings are non-fatal findings of the last read (e.g. no models.default).
	Warnings []string
}

// ErrNotRegistered is wrapped by errors about unknown workflow names.
var ErrNotRegistered = errors.New("workflow not registered")

var nameRule = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

// ValidateName checks a workflow name: verb-first kebab-case.
func ValidateName(name string) error {
	if !nameRule.MatchString(name) {
		return errors.New(`invalid workflow name: use verb-first kebab-case (lowercase letters, digits, hyphens), e.g. "solve-issue"`)
	}
	return nil
}

// New returns an empty registry.
func New() *Registry { return &Registry{workflows: map[string]Entry{}} }

// Load reads path. A missing or blank file is an empty registry.
func Load(path string) (*Registry, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return New(), nil
	}
	if err != nil {
		return nil, err
	}
	r, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// Parse reads workflow.yaml text.
func Parse(b []byte) (*Registry, error) {
	if strings.TrimSpace(string(b)) == "" {
		return New(), nil
	}
	doc, err := canonyaml.ParseYAML(b)
	if err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	v, err := canonyaml.FromYAML(doc)
	if err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	root, ok := v.(canonyaml.Map)
	if !ok {
		return nil, errors.New("registry root must be a mapping")
	}
	r := New()
	wf, ok := root.Get("workflows")
	wfMap, isMap := wf.(canonyaml.Map)
	if !ok || !isMap {
		return nil, errors.New(`registry must contain a "workflows" mapping`)
	}
	for _, p := range wfMap {
		e, err := parseEntry(p.Key, p.Value)
		if err != nil {
			return nil, err
		}
		r.set(p.Key, e)
	}
	if c, ok := root.Get("config"); ok && c != nil {
		warnings, err := validateConfig(c)
		if err != nil {
			return nil, err
		}
		r.config, r.Warnings = c, warnings
	}
	for _, p := range root {
		if p.Key != "config" && p.Key != "workflows" {
			r.extra = append(r.extra, p)
		}
	}
	return r, nil
}

func parseEntry(name string, v any) (Entry, error) {
	m, ok := v.(canonyaml.Map)
	if !ok {
		return Entry{}, fmt.Errorf("workflow %q must be a mapping", name)
	}
	var e Entry
	h, _ := m.Get("hash")
	if e.Hash, ok = h.(string); !ok {
		return Entry{}, fmt.Errorf("workflow %q must have a string hash", name)
	}
	ts, _ := m.Get("timestamp")
	if e.Timestamp, ok = finite(ts); !ok {
		return Entry{}, fmt.Errorf("workflow %q must have a finite numeric timestamp", name)
	}
	hv, _ := m.Get("history")
	hist, ok := hv.([]any)
	if !ok {
		return Entry{}, fmt.Errorf("workflow %q must have a history array", name)
	}
	e.History = make([]Version, 0, len(hist))
	for i, item := range hist {
		hm, ok := item.(canonyaml.Map)
		if !ok {
			return Entry{}, fmt.Errorf("workflow %q history[%d] must be a mapping", name, i)
		}
		hh, _ := hm.Get("hash")
		hts, _ := hm.Get("timestamp")
		hash, okHash := hh.(string)
		ts, okTS := finite(hts)
		if !okHash || !okTS {
			return Entry{}, fmt.Errorf("workflow %q history[%d] must have hash and timestamp", name, i)
		}
		e.History = append(e.History, Version{Hash: hash, Timestamp: ts})
	}
	return e, nil
}

func finite(v any) (int64, bool) {
	f, ok := v.(float64)
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return int64(f), true
}

// Marshal writes the registry as the original does: double-quoted YAML
// followed by a newline.
func (r *Registry) Marshal() ([]byte, error) {
	wf := make(canonyaml.Map, 0, len(r.names))
	for _, name := range r.names {
		wf = append(wf, canonyaml.Pair{Key: name, Value: entryValue(r.workflows[name])})
	}
	root := canonyaml.Map{{Key: "config", Value: r.config}, {Key: "workflows", Value: wf}}
	root = append(root, r.extra...)
	b, err := canonyaml.MarshalWith(root, canonyaml.Options{DefaultStringType: canonyaml.DoubleQuoted})
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func entryValue(e Entry) canonyaml.Map {
	hist := make([]any, 0, len(e.History))
	for _, h := range e.History {
		hist = append(hist, canonyaml.Map{{Key: "hash", Value: h.Hash}, {Key: "timestamp", Value: h.Timestamp}})
	}
	return canonyaml.Map{{Key: "hash", Value: e.Hash}, {Key: "timestamp", Value: e.Timestamp}, {Key: "history", Value: hist}}
}

// ShowYAML renders one workflow as `workflow show` prints it:
// {name: {hash, timestamp, history}} in double-quoted YAML.
func ShowYAML(name string, e Entry) ([]byte, error) {
	return canonyaml.MarshalWith(canonyaml.Map{{Key: name, Value: entryValue(e)}}, canonyaml.Options{DefaultStringType: canonyaml.DoubleQuoted})
}

// Names returns the registered workflow names, sorted.
func (r *Registry) Names() []string {
	out := append([]string(nil), r.names...)
	sort.Strings(out)
	return out
}

// Get returns a workflow entry.
func (r *Registry) Get(name string) (Entry, bool) {
	e, ok := r.workflows[name]
	return e, ok
}

// NameOf returns the workflow whose current or past version is bundleHash,
// preferring a current one, or "" when none is.
func (r *Registry) NameOf(bundleHash string) string {
	return r.BundleNames()[bundleHash]
}

// BundleNames maps every known bundle hash (current and past) to its
// workflow name, current versions winning.
func (r *Registry) BundleNames() map[string]string {
	out := make(map[string]string)
	for _, name := range r.Names() {
		for _, v := range r.workflows[name].History {
			if _, ok := out[v.Hash]; !ok {
				out[v.Hash] = name
			}
		}
	}
	for _, name := range r.Names() {
		out[r.workflows[name].Hash] = name
	}
	return out
}

func (r *Registry) set(name string, e Entry) {
	if _, ok := r.workflows[name]; !ok {
		r.names = append(r.names, name)
	}
	r.workflows[name] = e
}

// Register makes hash the current version of name; a previous current
// version moves to the front of the history. It reports whether anything
// changed: re-adding the current version is not a new version, so it
// leaves the entry, its timestamp and its history alone (the original
// recorded a duplicate history row each time).
func (r *Registry) Register(name, hash string, timestamp int64) (changed bool) {
	e := Entry{Hash: hash, Timestamp: timestamp, History: []Version{}}
	if old, ok := r.workflows[name]; ok {
		if old.Hash == hash {
			return false
		}
		e.History = append([]Version{{Hash: old.Hash, Timestamp: old.Timestamp}}, old.History...)
	}
	r.set(name, e)
	return true
}

// Unregister removes name.
func (r *Registry) Unregister(name string) error {
	if _, ok := r.workflows[name]; !ok {
		return fmt.Errorf("%w: %s", ErrNotRegistered, name)
	}
	delete(r.workflows, name)
	for i, n := range r.names {
		if n == name {
			r.names = append(r.names[:i], r.names[i+1:]...)
			break
		}
	}
	return nil
}

// Rollback makes a version from name's history current: target, or the
// newest history entry when target is "". The replaced version goes to the
// front of the history; the chosen one keeps its original timestamp.
func (r *Registry) Rollback(name, target string) (Version, error) {
	e, ok := r.workflows[name]
	if !ok {
		return Version{}, fmt.Errorf("%w: %s", ErrNotRegistered, name)
	}
	if len(e.History) == 0 {
		return Version{}, errors.New("no history entry to rollback to")
	}
	idx := 0
	if target != "" {
		idx = -1
		for i, v := range e.History {
			if v.Hash == target {
				idx = i
				break
			}
		}
		if idx < 0 {
			return Version{}, fmt.Errorf("hash not found in history: %s", target)
		}
	}
	chosen := e.History[idx]
	hist := []Version{{Hash: e.Hash, Timestamp: e.Timestamp}}
	hist = append(hist, e.History[:idx]...)
	hist = append(hist, e.History[idx+1:]...)
	r.set(name, Entry{Hash: chosen.Hash, Timestamp: chosen.Timestamp, History: hist})
	return chosen, nil
}

// HistoryRow is one line of `workflow history`.
type HistoryRow struct {
	Version
	Current bool `json:"current"`
}

// VersionRows lists the current version and every older one, newest first.
func (e Entry) VersionRows() []HistoryRow {
	rows := []HistoryRow{{Version: Version{Hash: e.Hash, Timestamp: e.Timestamp}, Current: true}}
	for _, v := range e.History {
		rows = append(rows, HistoryRow{Version: v})
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Timestamp > rows[j].Timestamp })
	return rows
}

// Save writes the registry atomically, readable by its owner only: its
// config holds the providers' API keys. Callers that read, change and
// write should use Update, which also holds the lock.
func (r *Registry) Save(path string) error {
	b, err := r.Marshal()
	if err != nil {
		return err
	}
	return atomicfile.Write(path, b, 0o600)
}

// Update loads path under its lock, lets fn change the registry and saves it
// if fn returns nil. Concurrent updates from any process are serialised.
func Update(path string, fn func(*Registry) error) error {
	return atomicfile.Update(path, func() error {
		r, err := Load(path)
		if err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
		return r.Save(path)
	})
}

// RollbackFile rolls name back in the registry file at path (see Rollback)
// under its lock, refusing a version whose bundle file is gone:
// bundleExists says whether a hash's bundle is stored.
func RollbackFile(path, name, target string, bundleExists func(hash string) bool) (Version, error) {
	var chosen Version
	err := Update(path, func(r *Registry) error {
		v, err := r.Rollback(name, target)
		if err != nil {
			return err
		}
		if !bundleExists(v.Hash) {
			return fmt.Errorf("bundle file not found for hash %s", v.Hash)
		}
		chosen = v
		return nil
	})
	return chosen, err
}
