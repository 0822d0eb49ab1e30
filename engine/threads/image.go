package threads

import (
	"slices"
	"strings"
)

// indexImage is an index as this process last wrote it, kept between
// rewrites: its entries, their ids in order, and each entry's text in
// the file, so that a rewrite renders only the entries that changed and
// copies the rest. Rendering and sorting an index of 10,000 threads anew
// at every group of steps costs more than writing it.
type indexImage struct {
	entries Index
	ids     []string          // sorted
	text    map[string][]byte // each entry as appendEntry writes it
	size    int               // of all the texts
}

func newImage(idx Index) *indexImage {
	m := &indexImage{entries: idx, ids: make([]string, 0, len(idx)), text: make(map[string][]byte, len(idx))}
	for id, e := range idx {
		m.ids = append(m.ids, id)
		m.text[id] = appendEntry(nil, id, e)
		m.size += len(m.text[id])
	}
	slices.Sort(m.ids)
	return m
}

// set makes id's entry e.
func (m *indexImage) set(id string, e Entry) {
	if _, ok := m.entries[id]; !ok {
		i, _ := slices.BinarySearch(m.ids, id)
		m.ids = slices.Insert(m.ids, i, id)
	}
	m.entries[id] = e
	m.size -= len(m.text[id])
	m.text[id] = appendEntry(m.text[id][:0], id, e)
	m.size += len(m.text[id])
}

// remove deletes id's entry, if there is one.
func (m *indexImage) remove(id string) {
	if _, ok := m.entries[id]; !ok {
		return
	}
	delete(m.entries, id)
	m.size -= len(m.text[id])
	delete(m.text, id)
	if i, found := slices.BinarySearchFunc(m.ids, id, strings.Compare); found {
		m.ids = slices.Delete(m.ids, i, i+1)
	}
}

// bytes is the file's contents, as marshalIndex writes them.
func (m *indexImage) bytes() []byte {
	buf := make([]byte, 0, m.size+len(m.ids)+3)
	buf = append(buf, '{')
	for i, id := range m.ids {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, m.text[id]...)
	}
	return closeIndex(buf, len(m.ids))
}
