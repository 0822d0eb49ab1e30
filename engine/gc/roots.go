package gc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// ErrRefused is matched (errors.Is) by a collection that stopped before its
// sweep because an index or history file could not be read completely; the
// error also matches threads.ErrDamaged and names every damaged place.
var ErrRefused = errors.New("garbage collection refused to sweep; nothing was deleted")

// Roots returns the head and start of every thread, in bundle order. A
// thread's hashes appear once per index row that names them. Every hash in
// a damaged file a repair has kept aside (threads.KeptAside) that no thread
// names already follows them: whatever such a file named may still be
// wanted.
//
// A threads.json or history line that cannot be read completely is an
// error matching ErrRefused and threads.ErrDamaged: read as empty it would
// let a sweep delete every node of the threads it names.
func Roots(l storage.Layout) ([]string, error) {
	bundles, err := threads.BundleHashes(l)
	if err != nil {
		return nil, fmt.Errorf("failed to read bundles directory: %w", err)
	}
	var roots, aside []string
	var damaged []error
	for _, h := range bundles {
		dir := l.BundleDir(h)
		idx, d, err := threads.ReadIndexTolerant(dir)
		if err != nil {
			return nil, err
		}
		if d != nil {
			damaged = append(damaged, d)
		}
		ids := make([]string, 0, len(idx))
		for id := range idx {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			roots = append(roots, idx[id].Head, idx[id].Start)
		}
		err = threads.EachHistoryTolerant(dir, func(e threads.HistoryEntry) error {
			roots = append(roots, e.Head, e.Start)
			return nil
		}, func(d *threads.DamageError) { damaged = append(damaged, d) })
		if err != nil {
			return nil, err
		}
		keptFiles, err := threads.KeptAside(dir)
		if err != nil {
			return nil, fmt.Errorf("failed to list damaged files kept aside in %s: %w", dir, err)
		}
		for _, p := range keptFiles {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, fmt.Errorf("failed to read damaged file kept aside %s: %w", p, err)
			}
			aside = append(aside, HashLikeTokens(b)...)
		}
	}
	if len(damaged) > 0 {
		return nil, fmt.Errorf("%w:\n%w", ErrRefused, errors.Join(damaged...))
	}
	// What a repair recovered is named twice; count it once.
	seen := make(map[string]bool, len(roots)+len(aside))
	for _, r := range roots {
		seen[r] = true
	}
	for _, r := range aside {
		if !seen[r] {
			seen[r] = true
			roots = append(roots, r)
		}
	}
	return roots, nil
}

// HashLikeTokens returns every run of exactly 13 letters and digits in b:
// what could be a hash in a file too damaged to parse. Keeping a few
// strings that are no hash costs nothing (they name no blob); missing one
// that is would cost a node.
func HashLikeTokens(b []byte) []string {
	var out []string
	isAlnum := func(c byte) bool {
		return c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
	}
	for i := 0; i < len(b); {
		if !isAlnum(b[i]) {
			i++
			continue
		}
		j := i
		for j < len(b) && isAlnum(b[j]) {
			j++
		}
		if j-i == 13 {
			out = append(out, string(bytes.ToUpper(b[i:j])))
		}
		i = j
	}
	return out
}
