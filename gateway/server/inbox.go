package server

import (
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/store"
)

// The inbox (issue 29, a person in the loop):
//
//	GET /api/gateway/inbox?assignee=&limit=&offset=
//	    {"threads":[InboxThread],"total":N}, oldest wait first
//
// lists the threads on every machine that wait for a person's answer, as
// the fleet's memory keeps them from the change streams: a machine that
// went offline still shows what it asks (online:false), and a thread
// that stops waiting leaves the inbox. Answering is the connector's
// (POST /api/clients/<machine>/api/threads/<id>/answer, proxied).

// InboxThread is one thread of GET /api/gateway/inbox.
type InboxThread struct {
	Machine string `json:"machine"`
	// Online says whether the machine is connected (to any replica) now:
	// an answer needs it.
	Online   bool   `json:"online"`
	ThreadID string `json:"threadId"`
	Workflow string `json:"workflow"`
	Role     string `json:"role"`
	// Question is the question, cut to store.QuestionMaxRunes runes; the
	// whole one is the connector's (GET .../threads/<id>/question).
	Question string `json:"question"`
	// Assignee is who is asked; "" when anyone may answer.
	Assignee string `json:"assignee"`
	// Since is when the thread began to wait, Deadline when the wait
	// times out (null when it never does).
	Since    string  `json:"since"`
	Deadline *string `json:"deadline"`
}

// inboxParams are the query parameters GET /api/gateway/inbox knows; key
// is the dashboard's credential for requests that cannot send headers.
var inboxParams = map[string]bool{"assignee": true, "limit": true, "offset": true, "key": true}

// parseInboxQuery checks GET /api/gateway/inbox's parameters; the error
// names the first bad one.
func parseInboxQuery(v map[string][]string) (store.InboxQuery, error) {
	var q store.InboxQuery
	get, err := queryParams(v, inboxParams, "assignee, limit, offset")
	if err != nil {
		return q, err
	}
	a := get("assignee")
	if len(a) > store.MaxAssigneeBytes || !utf8.ValidString(a) || strings.ContainsRune(a, 0) {
		return q, fmt.Errorf("assignee: not a name (at most %d bytes of text)", store.MaxAssigneeBytes)
	}
	q.Assignee = a
	q.Limit, q.Offset, err = pageParams(get)
	return q, err
}

// inbox is GET /api/gateway/inbox. A bad parameter is answered 400
// naming it; a store that does not answer, 503 with Retry-After.
func (fl *fleetMemory) inbox(c echo.Context) error {
	if fl == nil {
		return errNoHistory
	}
	q, err := parseInboxQuery(c.QueryParams())
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, err.Error())
	}
	page, err := fl.st.Inbox(c.Request().Context(), q)
	if err != nil {
		return fl.g.storeUnavailable("reading the inbox", err)
	}
	out := struct {
		Threads []InboxThread `json:"threads"`
		Total   int           `json:"total"`
	}{Threads: make([]InboxThread, 0, len(page.Threads)), Total: page.Total}
	online := fl.onlineOnce()
	for _, t := range page.Threads {
		j := InboxThread{Machine: t.Machine, Online: online(t.Machine), ThreadID: t.ID, Workflow: t.Workflow, Since: isoTime(t.UpdatedAt)}
		if w := t.Waiting; w != nil {
			j.Role, j.Question, j.Assignee, j.Since = w.Role, w.Question, w.Assignee, isoTime(w.Since)
			if w.Deadline != nil {
				j.Deadline = isoTimePtr(*w.Deadline)
			}
		}
		out.Threads = append(out.Threads, j)
	}
	return c.JSON(http.StatusOK, out)
}
