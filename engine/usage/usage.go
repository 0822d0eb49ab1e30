// Package usage keeps what model calls cost: one record per call with the
// prompt and completion tokens the API reported and the model, in a sidecar
// file next to the thread's debug log, and the totals per step, per thread
// and per workflow, priced by workflow.yaml's config.prices.
//
// # The record file
//
// logs/<bundle hash>/<thread>.usage.jsonl holds one JSON object per line,
// appended by the executor as each call returns (a Record):
//
//	{"ts":1764650000000,"thread":"01K…","workflow":"review","step":2,"role":"critic",
//	 "source":"role","model":"openai/gpt-4o-mini","promptTokens":812,"completionTokens":95}
//
// "step" places the call in the thread: the 1-based place of the role step
// the call worked on among the thread's role steps (__fork__ and __end__
// states not counted), so the step after the last role step is the end
// (the summarizer's calls). A supervisor call carries the step it judged.
// "unknown": true marks a call whose server reported no usage (its token
// counts are 0 and the totals say how many such calls they leave out).
//
// The file is never part of a node, so recording changes no hash. The
// executor appends it as it does the debug log (executor.DebugLog: a whole
// line at a time, under a file lock, a torn line cut off before the next),
// and a reader skips a torn last line (a crash mid-write) and any line it
// cannot parse. Cost is not stored: it is worked out when read, at the
// prices configured then.
package usage

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/storage"
)

// Sources of a model call: what in the engine made it.
const (
	SourceRole       = "role"       // an llm or react agent running a role
	SourceExtract    = "extract"    // the extractor (command agents, bundles' extract)
	SourceSupervisor = "supervisor" // the optional supervisor between steps
	SourceSummarizer = "summarizer" // the optional summarizer at the end
)

// FileSuffix ends a thread's usage file name, after the thread id.
const FileSuffix = ".usage.jsonl"

// Record is one model call, one line of a usage file (see the package doc).
type Record struct {
	// Time is when the call returned, in Unix milliseconds.
	Time     int64  `json:"ts"`
	Thread   string `json:"thread"`
	Workflow string `json:"workflow,omitempty"`
	// Step is the 1-based role step the call belongs to (see the package doc).
	Step int `json:"step"`
	// Role is the role being run, when the caller knows it.
	Role   string `json:"role,omitempty"`
	Source string `json:"source"`
	// Model is the "provider/model" reference the call was made with.
	Model            string `json:"model"`
	PromptTokens     int64  `json:"promptTokens"`
	CompletionTokens int64  `json:"completionTokens"`
	// Unknown: the server reported no usage for the call.
	Unknown bool `json:"unknown,omitempty"`
}

// Path is the usage file of a thread.
func Path(l storage.Layout, bundleHash, threadID string) string {
	return filepath.Join(l.LogsDir(bundleHash), threadID+FileSuffix)
}

// maxLine bounds one record line; records are a few hundred bytes, so a
// longer line is damage and is skipped.
const maxLine = 64 << 10

// Read returns the records of a usage file, oldest first. A missing file
// has none. A last line without its newline (a write cut short) and lines
// that are not records are skipped: usage is an account, not a checkpoint,
// and a damaged line must not hide the rest.
func Read(path string) ([]Record, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only
	return decode(f)
}

func decode(r io.Reader) ([]Record, error) {
	br := bufio.NewReader(r)
	var out []Record
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// An overlong line: skip to its end.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			if err != nil {
				return endOf(out, err)
			}
			continue
		}
		if err != nil {
			// What is left has no newline: a torn last line, ignored.
			return endOf(out, err)
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 || len(line) > maxLine {
			continue
		}
		var rec Record
		if json.Unmarshal(line, &rec) != nil || rec.Model == "" && rec.Source == "" {
			continue
		}
		out = append(out, rec)
	}
}

func endOf(out []Record, err error) ([]Record, error) {
	if errors.Is(err, io.EOF) {
		return out, nil
	}
	return out, err
}

// ReadThread returns the records of one thread.
func ReadThread(l storage.Layout, bundleHash, threadID string) ([]Record, error) {
	return Read(Path(l, bundleHash, threadID))
}

// Totals sums model calls. Its JSON is the shape every usage answer uses
// (thread show, the connector API, the fleet index):
//
//	{"calls":3,"promptTokens":2400,"completionTokens":310,"totalTokens":2710,
//	 "unknownCalls":0,"models":["openai/gpt-4o-mini"],"costUsd":0.000546,"unpricedCalls":0}
//
// costUsd is absent when no call's model has a price; unpricedCalls and
// unknownCalls say what the cost and the token counts leave out.
type Totals struct {
	Calls            int   `json:"calls"`
	PromptTokens     int64 `json:"promptTokens"`
	CompletionTokens int64 `json:"completionTokens"`
	TotalTokens      int64 `json:"totalTokens"`
	// UnknownCalls are calls whose server reported no usage.
	UnknownCalls int `json:"unknownCalls"`
	// Models are the models called, sorted.
	Models []string `json:"models"`
	// CostUSD is the cost at config.prices, nil when nothing was priced.
	CostUSD *float64 `json:"costUsd,omitempty"`
	// UnpricedCalls are calls whose model config.prices does not name.
	UnpricedCalls int `json:"unpricedCalls"`
}

// Add counts one call, priced by prices (nil: unpriced).
func (t *Totals) Add(r Record, prices registry.Prices) {
	t.Calls++
	t.PromptTokens += r.PromptTokens
	t.CompletionTokens += r.CompletionTokens
	t.TotalTokens = t.PromptTokens + t.CompletionTokens
	if r.Unknown {
		t.UnknownCalls++
	}
	if i, found := slices.BinarySearch(t.Models, r.Model); !found {
		t.Models = slices.Insert(t.Models, i, r.Model)
	}
	p, ok := prices.Lookup(r.Model)
	if !ok {
		t.UnpricedCalls++
		return
	}
	cost := p.Cost(r.PromptTokens, r.CompletionTokens)
	if t.CostUSD != nil {
		cost += *t.CostUSD
	}
	t.CostUSD = &cost
}

// Merge adds the calls of o.
func (t *Totals) Merge(o Totals) {
	t.Calls += o.Calls
	t.PromptTokens += o.PromptTokens
	t.CompletionTokens += o.CompletionTokens
	t.TotalTokens = t.PromptTokens + t.CompletionTokens
	t.UnknownCalls += o.UnknownCalls
	t.UnpricedCalls += o.UnpricedCalls
	for _, m := range o.Models {
		if i, found := slices.BinarySearch(t.Models, m); !found {
			t.Models = slices.Insert(t.Models, i, m)
		}
	}
	if o.CostUSD != nil {
		cost := *o.CostUSD
		if t.CostUSD != nil {
			cost += *t.CostUSD
		}
		t.CostUSD = &cost
	}
}

// Thread is the usage of one thread: the total, and the part of it each
// step made, keyed by Record.Step.
type Thread struct {
	Total Totals
	Steps map[int]*Totals
}

// Step returns the totals of step n (1-based), nil when it made no call.
func (t Thread) Step(n int) *Totals { return t.Steps[n] }

// Summarize sums a thread's records per step and in all.
func Summarize(recs []Record, prices registry.Prices) Thread {
	out := Thread{Total: Totals{Models: []string{}}, Steps: map[int]*Totals{}}
	for _, r := range recs {
		out.Total.Add(r, prices)
		s := out.Steps[r.Step]
		if s == nil {
			s = &Totals{}
			out.Steps[r.Step] = s
		}
		s.Add(r, prices)
	}
	return out
}

// ThreadTotals reads a thread's records and sums them: what a thread costs
// so far. A thread without a usage file made no model call (or ran before
// usage was recorded) and has zero totals.
func ThreadTotals(l storage.Layout, bundleHash, threadID string, prices registry.Prices) (Totals, error) {
	recs, err := ReadThread(l, bundleHash, threadID)
	if err != nil {
		return Totals{}, err
	}
	return Summarize(recs, prices).Total, nil
}

// LoadPrices reads config.prices from the storage root's workflow.yaml; nil
// when it sets none or there is no config.
func LoadPrices(l storage.Layout) (registry.Prices, error) {
	reg, err := registry.Load(l.RegistryFile())
	if err != nil {
		return nil, err
	}
	if c := reg.Config(); c != nil {
		return c.Prices, nil
	}
	return nil, nil
}

// Filter selects the calls a machine-wide total counts. Zero times leave
// that end of the range open; Until is exclusive.
type Filter struct {
	Since, Until time.Time
	// Workflow keeps only that workflow's calls ("": all).
	Workflow string
}

func (f Filter) keeps(r Record) bool {
	t := time.UnixMilli(r.Time)
	switch {
	case !f.Since.IsZero() && t.Before(f.Since):
		return false
	case !f.Until.IsZero() && !t.Before(f.Until):
		return false
	case f.Workflow != "" && r.Workflow != f.Workflow:
		return false
	}
	return true
}

// WorkflowTotals is the usage of one workflow's threads on this machine;
// its JSON is Totals' fields plus "workflow" and "threads".
type WorkflowTotals struct {
	Workflow string `json:"workflow"`
	// Threads counts the threads with a call in the range.
	Threads int `json:"threads"`
	Totals
}

// Report is the machine's usage over a time range: per workflow (sorted by
// name; calls of a thread whose workflow is unknown under "") and in all.
type Report struct {
	Workflows []WorkflowTotals `json:"workflows"`
	Total     Totals           `json:"total"`
	// Threads counts the threads with a call in the range.
	Threads int `json:"threads"`
}

// Machine sums the usage files of every thread under the storage root.
// A file last written before f.Since is not read.
func Machine(l storage.Layout, f Filter, prices registry.Prices) (Report, error) {
	files, err := filepath.Glob(filepath.Join(l.Root, "logs", "*", "*"+FileSuffix))
	if err != nil {
		return Report{}, err
	}
	byName := map[string]*WorkflowTotals{}
	rep := Report{Workflows: []WorkflowTotals{}, Total: Totals{Models: []string{}}}
	for _, path := range files {
		if !f.Since.IsZero() {
			if st, err := os.Stat(path); err == nil && st.ModTime().Before(f.Since) {
				continue
			}
		}
		recs, err := Read(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) { // removed meanwhile
				continue
			}
			return Report{}, err
		}
		counted := map[string]bool{}
		for _, r := range recs {
			if !f.keeps(r) {
				continue
			}
			w := byName[r.Workflow]
			if w == nil {
				w = &WorkflowTotals{Workflow: r.Workflow}
				byName[r.Workflow] = w
			}
			if !counted[r.Workflow] {
				counted[r.Workflow] = true
				w.Threads++
			}
			w.Add(r, prices)
			rep.Total.Add(r, prices)
		}
		if len(counted) > 0 {
			rep.Threads++
		}
	}
	for _, w := range byName {
		rep.Workflows = append(rep.Workflows, *w)
	}
	sort.Slice(rep.Workflows, func(i, j int) bool { return rep.Workflows[i].Workflow < rep.Workflows[j].Workflow })
	return rep, nil
}
