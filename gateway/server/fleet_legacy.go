package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/fleet"
)

// The fleet's memory of original clients. An original `connect` answers
// whole bodies over its JSON frames and has no change stream, so its
// threads are read the way its own dashboard reads them: the thread list
// (GET /api/threads: threadId, workflow, status, and, as startedAt, the
// thread's last activity), and each thread that is new or changed since
// the last reading in detail (GET /api/threads/:id: the prompt, the
// steps, the result), every legacyPollEvery while it is online. What
// changed goes to the store as a stream's threads do, so that the fleet's
// list and search, and the machine's page while it is offline, show them.

// Tuning of the reading of original clients' threads.
const (
	// legacyPollEvery is how often an original client's thread list is
	// read while the last reading succeeded.
	legacyPollEvery = 15 * time.Second
	// legacyRetryMin and legacyRetryMax bound the wait after a reading
	// failed (its client token not registered yet, a timeout, ...).
	legacyRetryMin = time.Second
	legacyRetryMax = legacyPollEvery
)

// legacyThread is one thread of an original client's thread list.
type legacyThread struct {
	ThreadID string `json:"threadId"`
	Workflow string `json:"workflow"` // null: unknown

	// StartedAt is, in the original, the thread's last activity.
	StartedAt string `json:"startedAt"`
	Status    string `json:"status"`
}

// legacyRecord is one record of an original client's thread detail, the
// fields of the three kinds (thread-start, role, workflow-result) as one.
type legacyRecord struct {
	Type       string  `json:"type"`
	Prompt     *string `json:"prompt"`
	ReturnCode *int    `json:"returnCode"`
	Content    string  `json:"content"`
	Timestamp  *int64  `json:"timestamp"`
}

// legacyStatus is the fleet's word for an original client's status: its
// "active" (alive, between steps or paused) is paused; the others are the
// same words.
func legacyStatus(s string) string {
	if s == "active" {
		return "paused"
	}
	return s
}

// poll reads name's threads over conn (an original client) until the
// connection or ctx ends.
func (fl *fleetMemory) poll(ctx context.Context, name string, conn presence.Conn) {
	fl.mu.Lock()
	every := fl.legacyEvery
	fl.mu.Unlock()
	stored := map[string]legacyThread{} // as last stored, by thread id
	wait := legacyRetryMin
	logged := "" // the last failure logged: the same one again is not
	for {
		err := fl.pollOnce(ctx, name, conn, stored)
		switch {
		case ctx.Err() != nil, closed(conn.Done()):
			return
		case err != nil:
			if err.Error() != logged {
				logged = err.Error()
				fl.log.Warn("fleet: reading an original client's threads", "connector", name, "err", err, "retry_in", wait.String())
			}
		default:
			wait, logged = legacyRetryMin, ""
		}
		next := every
		if err != nil {
			next, wait = wait, min(wait*2, every)
		}
		select {
		case <-ctx.Done():
			return
		case <-conn.Done():
			return
		case <-time.After(next):
		}
	}
}

// pollOnce reads the thread list once and queues for the store every
// thread that is new or changed since stored, which it then records.
func (fl *fleetMemory) pollOnce(ctx context.Context, name string, conn presence.Conn, stored map[string]legacyThread) error {
	var list struct {
		Threads []legacyThread `json:"threads"`
	}
	if err := legacyGet(ctx, conn, "/api/threads", &list); err != nil {
		return err
	}
	var batch []store.Thread
	var queued []legacyThread
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if !fl.g.writes.threads(ctx, name, batch) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return errStoreQueueFull
		}
		for _, t := range queued {
			stored[t.ThreadID] = t
		}
		batch, queued = nil, nil
		return nil
	}
	var firstErr error
	for _, t := range list.Threads {
		if t.ThreadID == "" || stored[t.ThreadID] == t {
			continue
		}
		th, err := fl.legacyDetail(ctx, conn, t)
		if err != nil {
			// Tried again at the next reading; the others go on.
			if firstErr == nil {
				firstErr = fmt.Errorf("thread %s: %w", t.ThreadID, err)
			}
			continue
		}
		batch, queued = append(batch, th), append(queued, t)
		if len(batch) >= fleetBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	return firstErr
}

// legacyDetail makes the store's thread of t from the client's detail of
// it.
func (fl *fleetMemory) legacyDetail(ctx context.Context, conn presence.Conn, t legacyThread) (store.Thread, error) {
	var d struct {
		Records []legacyRecord `json:"records"`
	}
	if err := legacyGet(ctx, conn, "/api/threads/"+url.PathEscape(t.ThreadID), &d); err != nil {
		return store.Thread{}, err
	}
	out := store.Thread{ID: t.ThreadID, Workflow: t.Workflow, Status: legacyStatus(t.Status)}
	var last int64
	for _, r := range d.Records {
		if r.Timestamp != nil {
			last = max(last, *r.Timestamp)
		}
		switch r.Type {
		case "thread-start":
			if r.Prompt != nil {
				out.Prompt = fleet.TruncatePrompt(*r.Prompt)
			}
		case "role":
			out.Steps++
		case "workflow-result":
			out.ReturnCode, out.Summary = r.ReturnCode, r.Content
		}
	}
	// The list's startedAt is the thread's last activity; without it, its
	// last record's time; without that, now.
	switch at, err := time.Parse(time.RFC3339Nano, t.StartedAt); {
	case err == nil:
		out.UpdatedAt = at
	case last > 0:
		out.UpdatedAt = time.UnixMilli(last)
	default:
		out.UpdatedAt = fl.g.now()
	}
	return out, nil
}

// legacyGet answers a GET of path on an original client, decoded from
// JSON into out.
func legacyGet(ctx context.Context, conn presence.Conn, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://connector"+path, nil)
	if err != nil {
		return err
	}
	resp, err := conn.RoundTrip(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", path, resp.StatusCode)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}
