package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/uncaged/workflow/gateway/internal/spool"
	"github.com/uncaged/workflow/gateway/metrics"
	"github.com/uncaged/workflow/gateway/store"
)

// What the gateway writes to its store without a request waiting for it
// — audit entries, the fleet's threads as connectors report them, and
// machines' last-seen times — goes through one queue (gateway/internal/
// spool) and one writer, in the order it happened. While the store does
// not answer (a PostgreSQL outage) the writer retries the oldest record
// and the queue holds the rest: up to Options.SpoolMemory bytes in
// memory, then up to Options.SpoolDisk in a file in Options.SpoolDir,
// which a gateway restarted during the outage writes first. Past both
// bounds a record is dropped and counted. A record may be written twice
// (an answer lost, a file replayed): each audit entry carries a key the
// store keeps it once by, thread upserts and last-seen times are the same
// written twice.

// Defaults of Options' spool bounds.
const (
	DefaultSpoolMemory = spool.DefaultMaxMemory
	DefaultSpoolDisk   = spool.DefaultMaxDisk
)

// storeRecord is one record of the queue, as JSON (the spill file's).
type storeRecord struct {
	// Kind is metrics.StoreKindAudit, StoreKindThreads or StoreKindSeen.
	Kind string `json:"k"`
	// Audit is the entry of an audit record.
	Audit *store.AuditEntry `json:"a,omitempty"`
	// Machine and Threads are a batch of a connector's threads.
	Machine string         `json:"m,omitempty"`
	Threads []store.Thread `json:"t,omitempty"`
	// Names are the machines a seen record marks seen.
	Names []string `json:"n,omitempty"`
	// At is when the threads were heard or the machines seen.
	At time.Time `json:"at"`
}

// storeWrites is the queue to the store and its writer.
type storeWrites struct {
	g  *Gateway
	st store.Store
	q  *spool.Queue
}

// newStoreWrites opens the queue, taking a spill file left in
// Options.SpoolDir, whose records it writes first; nil without a store.
// New starts its writer once everything the writes reach is set.
func (g *Gateway) newStoreWrites() *storeWrites {
	st := g.opts.Store
	if st == nil {
		return nil
	}
	w := &storeWrites{g: g, st: st}
	q, err := spool.Open(spool.Options{
		Dir: g.opts.SpoolDir, MaxMemory: g.opts.SpoolMemory, MaxDisk: g.opts.SpoolDisk,
		Write: w.write, Unavailable: store.Unavailable, OnDrop: w.dropped, OnWritten: w.written,
		OnAway: g.outage.down, OnBack: g.outage.up,
	})
	if err != nil {
		g.opts.Logger.Warn("store queue: no spill file: past the memory bound, what waits for the store is dropped", "dir", g.opts.SpoolDir, "err", err.Error())
	}
	w.q = q
	if s := q.Stats(); s.DiskRecords > 0 {
		g.opts.Logger.Info("store queue: writing what a previous run could not", "records", s.DiskRecords, "bytes", s.DiskBytes, "dir", g.opts.SpoolDir)
	}
	g.metrics.CountStoreQueue(func() metrics.StoreQueue {
		s := q.Stats()
		return metrics.StoreQueue{MemoryRecords: s.MemoryRecords, MemoryBytes: s.MemoryBytes, DiskRecords: s.DiskRecords, DiskBytes: s.DiskBytes}
	})
	return w
}

// add queues r; false when it was dropped (counted and told already).
func (w *storeWrites) add(r storeRecord) bool {
	b, err := json.Marshal(r)
	if err != nil {
		// Strings, numbers, times and raw JSON the store took apart:
		// nothing here fails to marshal but invalid usage JSON, which the
		// fleet's decoder never lets through.
		w.g.bounds.untrusted.Error("store queue: a record could not be encoded", "kind", r.Kind, "err", err.Error())
		w.g.metrics.StoreDropped(r.Kind, metrics.StoreDropRefused)
		return false
	}
	return w.q.Add(b)
}

// audit queues an audit entry, with a key drawn now so that it is in the
// log once however often it is written.
func (w *storeWrites) audit(e store.AuditEntry) {
	if e.Key == "" {
		e.Key = newAuditKey()
	}
	w.add(storeRecord{Kind: metrics.StoreKindAudit, Audit: &e, At: e.Time})
}

// threads queues a batch of a connector's threads heard now. While the
// store answers it first waits for room in memory (ctx bounds the wait),
// so that a connector's resync is paced by the store rather than spilled
// to disk; false when the batch was dropped.
func (w *storeWrites) threads(ctx context.Context, machine string, batch []store.Thread) bool {
	w.q.WaitRoom(ctx)
	return w.add(storeRecord{Kind: metrics.StoreKindThreads, Machine: machine, Threads: batch, At: w.g.now()})
}

// seen queues machines seen now.
func (w *storeWrites) seen(names ...string) {
	if len(names) == 0 {
		return
	}
	w.add(storeRecord{Kind: metrics.StoreKindSeen, Names: names, At: w.g.now()})
}

// errBadRecord is a record the queue holds that is not one: never
// written, dropped after its attempts.
var errBadRecord = errors.New("not a record of the store's queue")

// write writes one record to the store.
func (w *storeWrites) write(ctx context.Context, b []byte) error {
	var r storeRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%w: %w", errBadRecord, err)
	}
	switch r.Kind {
	case metrics.StoreKindAudit:
		if r.Audit == nil {
			return errBadRecord
		}
		wctx, cancel := context.WithTimeout(ctx, storeTimeout)
		defer cancel()
		_, err := w.st.AppendAudit(wctx, *r.Audit)
		return err
	case metrics.StoreKindThreads:
		wctx, cancel := context.WithTimeout(ctx, fleetWriteTimeout)
		defer cancel()
		res, err := w.st.SyncThreadsAt(wctx, r.Machine, r.At, r.Threads)
		if err == nil {
			w.g.fleetBounded(r.Machine, res)
			w.g.threadHints.synced(r.Machine)
		}
		return err
	case metrics.StoreKindSeen:
		wctx, cancel := context.WithTimeout(ctx, storeTimeout)
		defer cancel()
		return w.st.TouchMachinesAt(wctx, r.Names, r.At)
	}
	return fmt.Errorf("%w: kind %q", errBadRecord, r.Kind)
}

// written counts a record written.
func (w *storeWrites) written(b []byte) {
	w.g.metrics.StoreWritten(recordKind(b))
	w.g.outage.progress()
}

// dropped counts a record lost and says so (rate-limited): for an audit
// entry what it said (audit.go), so that the log holds what the audit
// log could not; for the fleet's records whose they were.
func (w *storeWrites) dropped(b []byte, reason spool.DropReason, err error) {
	var r storeRecord
	if json.Unmarshal(b, &r) != nil {
		r.Kind = ""
	}
	w.g.metrics.StoreDropped(r.Kind, string(reason))
	if r.Kind == metrics.StoreKindAudit && r.Audit != nil {
		w.g.audit.drop(*r.Audit, auditDropReason(reason), err)
		return
	}
	attrs := []any{"kind", r.Kind, "reason", string(reason), "machine", r.Machine, "threads", len(r.Threads), "machines", len(r.Names)}
	if err != nil {
		attrs = append(attrs, "err", err.Error())
	}
	w.g.bounds.untrusted.Warn("store queue: record lost", attrs...)
}

// auditDropReason is the audit log's name for why an entry was lost.
func auditDropReason(r spool.DropReason) string {
	switch r {
	case spool.DropFull:
		return auditDropFull
	case spool.DropClosed:
		return auditDropClosed
	}
	return auditDropStore
}

// kindPrefix starts every record add encodes: the kind is storeRecord's
// first field.
const kindPrefix = `{"k":"`

// recordKind reads a record's kind without decoding the rest (a batch of
// threads is megabytes): "" for bytes that are not a record.
func recordKind(b []byte) string {
	rest, ok := bytes.CutPrefix(b, []byte(kindPrefix))
	if !ok {
		return ""
	}
	kind, _, ok := bytes.Cut(rest, []byte(`"`))
	if !ok {
		return ""
	}
	return string(kind)
}

// close stops taking records and writes what waits, until ctx ends or at
// once while the store does not answer; what is left in memory goes to
// the spill file for the next start. Nil-safe.
func (w *storeWrites) close(ctx context.Context) error {
	if w == nil {
		return nil
	}
	s := w.q.Stats()
	err := w.q.Close(ctx)
	if after := w.q.Stats(); after.DiskRecords > 0 {
		w.g.opts.Logger.Warn("store queue: kept for the next start what the store has not taken", "records", after.DiskRecords, "bytes", after.DiskBytes, "dir", w.g.opts.SpoolDir, "waiting_at_close", s.Pending())
	}
	return err
}

// stats is what the queue holds and has done; zero without a store.
func (w *storeWrites) stats() spool.Stats {
	if w == nil {
		return spool.Stats{}
	}
	return w.q.Stats()
}

// newAuditKey draws an audit entry's key.
func newAuditKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:])
}
