package threads

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/uncaged/workflow/engine/atomicfile"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/node"
)

// Repair is what rebuilding one damaged file did.
type Repair struct {
	// Path is the file that was rebuilt.
	Path string `json:"path"`
	// KeptAs is where the damaged original now is (KeptAsideName).
	KeptAs string `json:"keptAs"`
	// Intact counts the entries or lines carried over unchanged.
	Intact int `json:"intact"`
	// Recovered counts the entries or lines rebuilt from what was left of
	// them and the CAS.
	Recovered int `json:"recovered"`
	// Lost describes what could not be rebuilt; it is still in the file
	// kept aside, and garbage collection keeps every node that file names.
	Lost []string `json:"lost"`
}

// salvaged is what could be read of one damaged entry or line.
type salvaged struct {
	id, head, start string
	at              int64
	hasAt           bool
	line            int
}

// Fields of a damaged entry, found without trusting quotes or braces: the
// key (perhaps without one of its quotes), a colon, the value. A hash must
// be complete (13 characters); a number must be followed by something, or
// it may have been cut short. They compile on first use: salvage is rare,
// and compiling them costs every process that links this package ~1 ms of
// start-up.
var (
	headField  = lazyRegexp(`(?:^|[^A-Za-z])head"?\s*:\s*"?([0-9A-Za-z]{13})(?:[^0-9A-Za-z]|$)`)
	startField = lazyRegexp(`(?:^|[^A-Za-z])start"?\s*:\s*"?([0-9A-Za-z]{13})(?:[^0-9A-Za-z]|$)`)
	idField    = lazyRegexp(`(?:^|[^A-Za-z])threadId"?\s*:\s*"?([0-9A-Za-z_-]{1,64})(?:[^0-9A-Za-z_-]|$)`)
	indexKey   = lazyRegexp(`"?([0-9A-Za-z_-]{1,64})"?\s*:\s*\{`)
)

func numberField(key string) func() *regexp.Regexp {
	return lazyRegexp(`(?:^|[^A-Za-z])` + key + `"?\s*:\s*(-?[0-9]{1,16})[\s,}]`)
}

var (
	updatedAtField   = numberField("updatedAt")
	completedAtField = numberField("completedAt")
)

// lazyRegexp compiles expr the first time it is needed.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// salvageFields reads what it can of one entry's text.
func salvageFields(text []byte, atField func() *regexp.Regexp) salvaged {
	var s salvaged
	if m := headField().FindSubmatch(text); m != nil {
		s.head = string(m[1])
	}
	if m := startField().FindSubmatch(text); m != nil {
		s.start = string(m[1])
	}
	if m := atField().FindSubmatch(text); m != nil {
		if v, err := strconv.ParseInt(string(m[1]), 10, 64); err == nil {
			s.at, s.hasAt = v, true
		}
	}
	return s
}

// salvageIndex finds every entry a damaged threads.json still shows: an id
// key followed by an object, read up to the next object or the end.
func salvageIndex(b []byte) []salvaged {
	var out []salvaged
	locs := indexKey().FindAllSubmatchIndex(b, -1)
	for i, loc := range locs {
		end := len(b)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		s := salvageFields(b[loc[1]:end], updatedAtField)
		s.id = string(b[loc[2]:loc[3]])
		s.line = 1 + bytes.Count(b[:loc[0]], []byte{'\n'})
		out = append(out, s)
	}
	return out
}

// salvageHistoryLine finds the entries in a damaged history line. A line
// cut short by a crash may have had the next append glued to it, so every
// '{' starts a candidate.
func salvageHistoryLine(line []byte, lineNo int) []salvaged {
	var out []salvaged
	for len(line) > 0 {
		next := bytes.IndexByte(line[1:], '{')
		part := line
		if next >= 0 {
			part, line = line[:next+1], line[next+1:]
		} else {
			line = nil
		}
		if len(bytes.TrimSpace(part)) == 0 {
			continue
		}
		s := salvageFields(part, completedAtField)
		if m := idField().FindSubmatch(part); m != nil {
			s.id = string(m[1])
		}
		s.line = lineNo
		if s.id != "" || s.head != "" || s.start != "" {
			out = append(out, s)
		}
	}
	return out
}

// complete fills in what the text lost from the CAS: a state node names its
// thread's start and carries its time, and a start node is its own start.
// It reports whether the result can be trusted: the head is a node in the
// CAS, or every field was read whole from the text.
func (s *salvaged) complete(store *cas.Store, fallbackAt int64) (bool, string) {
	whole := s.id != "" && s.head != "" && s.start != "" && s.hasAt
	if CheckRef(s.id) != nil {
		return false, fmt.Sprintf("line %d: no thread id could be read", s.line)
	}
	if s.head == "" {
		return false, fmt.Sprintf("line %d: thread %s: its head could not be read", s.line, s.id)
	}
	head, err := ids.ParseHash(s.head)
	if err != nil {
		return false, fmt.Sprintf("line %d: thread %s: head %q is no hash", s.line, s.id, s.head)
	}
	s.head = head
	n, err := store.GetNode(head)
	switch st := n.(type) {
	case node.State:
		// The chain is the authority on where it starts.
		s.start = st.Payload.Start
		if !s.hasAt {
			s.at, s.hasAt = st.Payload.Timestamp, true
		}
		return true, ""
	case node.Start:
		s.start = head
		if !s.hasAt {
			s.at, s.hasAt = fallbackAt, true
		}
		return true, ""
	}
	if whole {
		return true, ""
	}
	if err != nil && !errors.Is(err, cas.ErrNotFound) {
		return false, fmt.Sprintf("line %d: thread %s: head %s cannot be read: %v", s.line, s.id, head, err)
	}
	return false, fmt.Sprintf("line %d: thread %s: head %s is not in the CAS and the rest of the entry is lost", s.line, s.id, head)
}

// setAside keeps the damaged file's bytes under KeptAsideName before it is
// replaced: a hard link where the filesystem has them, else a copy.
func setAside(path string, b []byte, now time.Time) (string, error) {
	kept := KeptAsideName(path, now)
	for i := 2; ; i++ {
		if _, err := os.Lstat(kept); errors.Is(err, fs.ErrNotExist) {
			break
		}
		kept = fmt.Sprintf("%s.%d", KeptAsideName(path, now), i)
	}
	if err := os.Link(path, kept); err == nil {
		return kept, nil
	}
	if err := atomicfile.Write(kept, b, 0o644); err != nil {
		return "", fmt.Errorf("keep damaged %s aside: %w", path, err)
	}
	return kept, nil
}

func modTimeMs(path string) int64 {
	if st, err := os.Stat(path); err == nil {
		return st.ModTime().UnixMilli()
	}
	return 0
}

// RepairIndex rebuilds a damaged threads.json: intact entries are kept,
// damaged ones rebuilt from what is left of them and the CAS (a head state
// names its start and carries its time), and the damaged file is kept aside
// (KeptAsideName) rather than deleted. It holds the index lock, so no
// writer's update is lost. An index that is not damaged is left alone and
// the result is nil.
func RepairIndex(bundleDir string, store *cas.Store, now time.Time) (*Repair, error) {
	path := IndexFile(bundleDir)
	var rep *Repair
	err := atomicfile.Update(path, func() error {
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		intact, fl := parseIndex(b)
		if fl == nil {
			return nil
		}
		rep = &Repair{Path: path, Intact: len(intact), Lost: []string{}}
		fallbackAt := modTimeMs(path)
		idx := make(Index, len(intact))
		for id, e := range intact {
			idx[id] = e
		}
		for _, s := range salvageIndex(b) {
			if _, ok := intact[s.id]; ok {
				continue
			}
			ok, why := s.complete(store, fallbackAt)
			if !ok {
				rep.Lost = append(rep.Lost, why)
				continue
			}
			if _, dup := idx[s.id]; !dup {
				rep.Recovered++
			}
			idx[s.id] = Entry{Head: s.head, Start: s.start, UpdatedAt: s.at}
		}
		out, err := marshalIndex(idx)
		if err != nil {
			return err
		}
		if rep.KeptAs, err = setAside(path, b, now); err != nil {
			return err
		}
		return atomicfile.Write(path, out, 0o644)
	})
	return rep, err
}

// RepairHistory rebuilds the damaged lines of every history file of a
// bundle, one Repair per file it rebuilt: intact and blank lines stay as
// they are, a damaged line is rebuilt when what is left of it and the CAS
// say which thread, head and start it was, and dropped otherwise; the
// damaged file is kept aside. It holds the lock appenders take.
func RepairHistory(bundleDir string, store *cas.Store, now time.Time) ([]*Repair, error) {
	files, d := historyFiles(bundleDir)
	if d != nil {
		return nil, d
	}
	if len(files) == 0 {
		return nil, nil
	}
	var reps []*Repair
	err := atomicfile.Update(HistoryDir(bundleDir), func() error {
		for _, path := range files {
			rep, err := repairHistoryFile(path, store, now)
			if err != nil {
				return err
			}
			if rep != nil {
				reps = append(reps, rep)
			}
		}
		return nil
	})
	return reps, err
}

func repairHistoryFile(path string, store *cas.Store, now time.Time) (*Repair, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	rep := &Repair{Path: path, Lost: []string{}}
	damaged := false
	fallbackAt := modTimeMs(path)
	lineNo := 0
	for rest := b; len(rest) > 0; {
		lineNo++
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		_, reason, ok := parseHistoryLine(line)
		if ok || reason == "" {
			if ok {
				rep.Intact++
			}
			out.Write(line)
			out.WriteByte('\n')
			continue
		}
		damaged = true
		found := salvageHistoryLine(line, lineNo)
		if len(found) == 0 {
			rep.Lost = append(rep.Lost, fmt.Sprintf("line %d: nothing of a history entry could be read", lineNo))
		}
		for _, s := range found {
			ok, why := s.complete(store, fallbackAt)
			if !ok {
				rep.Lost = append(rep.Lost, why)
				continue
			}
			enc, err := json.Marshal(HistoryEntry{ThreadID: s.id, Head: s.head, Start: s.start, CompletedAt: s.at})
			if err != nil {
				return nil, err
			}
			out.Write(enc)
			out.WriteByte('\n')
			rep.Recovered++
		}
	}
	if !damaged {
		return nil, nil
	}
	if rep.KeptAs, err = setAside(path, b, now); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(path, out.Bytes(), 0o644); err != nil {
		return nil, err
	}
	return rep, nil
}
