package threads

import "github.com/uncaged/workflow/engine/storage"

// Line is one thread as an index entry or a history line names it, with
// where it was read.
type Line struct {
	Record
	// Path is the threads.json or history file the line is in.
	Path string
	// LineNo is the 1-based line of a history line; 0 for an index entry.
	LineNo int
}

// BundleVisitor receives what ScanBundle reads.
type BundleVisitor struct {
	// Line gets every intact index entry (in no particular order), then
	// every intact history line, oldest file first. An error stops the
	// scan and is returned.
	Line func(Line) error
	// Damaged gets every place that cannot be read completely.
	Damaged func(*DamageError)
	// File, when set, gets the bytes of every index and history file as
	// they were read.
	File func(path string, b []byte)
}

// ScanBundle reads one bundle's threads.json and history: the one reader
// behind every listing, garbage collection and doctor, so that what one
// of them sees exists, every other sees too, and what one reports as
// damaged, every other refuses or reports.
func ScanBundle(l storage.Layout, bundleHash string, v BundleVisitor) error {
	dir := l.BundleDir(bundleHash)
	idx, b, d := readIndexTolerant(dir)
	if d != nil {
		v.Damaged(d)
	}
	path := IndexFile(dir)
	if b != nil && v.File != nil {
		v.File(path, b)
	}
	for id, e := range idx {
		rec := Record{ThreadID: id, BundleHash: bundleHash, Head: e.Head, Start: e.Start, Source: SourceActive, UpdatedAt: e.UpdatedAt, Path: path}
		if err := v.Line(Line{Record: rec, Path: path}); err != nil {
			return err
		}
	}
	return eachHistory(dir, func(e HistoryEntry, path string, line int) error {
		rec := Record{ThreadID: e.ThreadID, BundleHash: bundleHash, Head: e.Head, Start: e.Start, Source: SourceHistory, UpdatedAt: e.CompletedAt, Path: path, Line: line}
		return v.Line(Line{Record: rec, Path: path, LineNo: line})
	}, func(d *DamageError) error {
		v.Damaged(d)
		return nil
	}, v.File)
}
