package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/engine/questions"
	"github.com/uncaged/workflow/shared/fleet"
	"github.com/uncaged/workflow/shared/tunnel"
)

func TestAnsweringAWaitingThreadThroughTheAPI(t *testing.T) {
	f := newFixture(t)
	f.register("approval", "approval.esm.js")
	f.startHost()
	id := f.run("approval", "ship it")
	f.waitStatus(id, "waiting")

	var q QuestionView
	f.want(http.MethodGet, "/api/threads/"+id+"/question", "", http.StatusOK, &q)
	if q.Role != "approve" || q.Question != "Ship this plan?" || q.Assignee != "reviewers" || q.Workflow != "approval" ||
		q.Answered || q.Deadline == nil || q.QuestionHash == "" || !strings.Contains(string(q.Schema), `"approved"`) {
		t.Fatalf("question %+v", q)
	}
	asked, _ := time.Parse(time.RFC3339, q.AskedAt)
	deadline, _ := time.Parse(time.RFC3339, *q.Deadline)
	if d := deadline.Sub(asked); d != time.Hour {
		t.Fatalf("deadline %s after the question, want 1h", d)
	}

	// The fleet's change stream carries the question.
	w := f.fleetWaiting(id)
	if w == nil || w.Role != "approve" || w.Question != "Ship this plan?" || w.Assignee != "reviewers" || w.Deadline == nil {
		t.Fatalf("fleet waiting %+v", w)
	}

	// Bodies that are not an answer, and answers that do not fit the
	// form: 400, and the thread keeps waiting.
	for _, bad := range []struct {
		body string
		path string // the first field at fault, "-" when the error is the body's
	}{
		{`not json`, "-"},
		{`{"answer":{"status":"approved"},"extra":1}`, "-"},
		{`{"answer":{"status":"approved"}} {}`, "-"},
		{`{"answer":{"status":"approved"},"questionHash":"nothash"}`, "-"},
		{`{}`, ""},
		{`{"answer":null}`, ""},
		{`{"answer":5}`, ""},
		{`{"answer":[]}`, ""},
		{`{"answer":{}}`, ""},
		{`{"answer":{"status":"maybe"}}`, "/status"},
		{`{"answer":{"status":"approved","note":7}}`, "/note"},
	} {
		rec := f.call(http.MethodPost, "/api/threads/"+id+"/answer", bad.body)
		if rec.Code != http.StatusBadRequest {
			t.Fatalf("%s: status %d, want 400: %s", bad.body, rec.Code, rec.Body)
		}
		var refused AnswerRefused
		if err := json.Unmarshal(rec.Body.Bytes(), &refused); err != nil || refused.Error == "" {
			t.Fatalf("%s: body %s", bad.body, rec.Body)
		}
		if bad.path != "-" && (len(refused.Fields) == 0 || refused.Fields[0].Path != bad.path) {
			t.Fatalf("%s: fields %+v, want the first at %q", bad.body, refused.Fields, bad.path)
		}
		if s := f.detail(id).status(); s != "waiting" {
			t.Fatalf("after %s the thread is %s", bad.body, s)
		}
	}
	f.wantError(http.MethodPost, "/api/threads/"+id+"/answer", `{"answer":{"status":"approved"},"questionHash":"0000000000000"}`, http.StatusConflict, "not 0000000000000")

	// A request made to the API directly names whoever runs the
	// connector, whatever X-Uncaged-User it sends: only the tunnel's end
	// may say who a gateway user is.
	rec := f.call(http.MethodPost, "/api/threads/"+id+"/answer", `{"answer":{"status":"approved","note":"go"},"questionHash":"`+q.QuestionHash+`"}`, tunnel.UserHeader, "mallory")
	if rec.Code != http.StatusOK {
		t.Fatalf("answer: %d %s", rec.Code, rec.Body)
	}
	var got struct{ ThreadID, AnsweredBy, AnsweredAt string }
	_ = json.Unmarshal(rec.Body.Bytes(), &got)
	if got.ThreadID != id || got.AnsweredBy != questions.LocalAnswerer() || got.AnsweredAt == "" {
		t.Fatalf("answered %+v, want by %s", got, questions.LocalAnswerer())
	}
	f.wantError(http.MethodPost, "/api/threads/"+id+"/answer", `{"answer":{"status":"rejected"}}`, http.StatusConflict, "already answered by "+questions.LocalAnswerer())

	d := f.waitStatus(id, "completed")
	if r := strings.Join(d.roles(), ","); r != "planner,approve,ship" {
		t.Fatalf("roles %s", r)
	}
	f.want(http.MethodGet, "/api/threads/"+id+"/question", "", http.StatusOK, &q)
	if !q.Answered || q.AnsweredBy != questions.LocalAnswerer() || string(q.Answer) != `{"status":"approved","note":"go"}` {
		t.Fatalf("answered question %+v (answer %s)", q, q.Answer)
	}
	f.register("linear", "linear.esm.js")
	plain := f.run("linear", "x")
	f.waitStatus(plain, "completed")
	f.wantError(http.MethodGet, "/api/threads/"+plain+"/question", "", http.StatusNotFound, "waits for no answer")
	f.wantError(http.MethodPost, "/api/threads/"+plain+"/answer", `{"answer":{"status":"approved"}}`, http.StatusNotFound, "not waiting")
}

// fleetWaiting reads the fleet's change stream up to synced and returns
// what thread id waits for there.
func (f *fixture) fleetWaiting(id string) *fleet.Waiting {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+fleet.EventsPath, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	r := newSSEReader(resp.Body)
	var out *fleet.Waiting
	for {
		ev, err := r.next()
		if err != nil {
			f.t.Fatal(err)
		}
		if ev.Name == fleet.EventSynced {
			return out
		}
		var th fleet.Thread
		if ev.Name == fleet.EventThread && json.Unmarshal([]byte(ev.Data), &th) == nil && th.ID == id {
			if th.Status != "waiting" {
				f.t.Fatalf("fleet status %s", th.Status)
			}
			out = th.Waiting
		}
	}
}

func TestWhoAnswersIsTheTunnelsWordOnly(t *testing.T) {
	local := questions.LocalAnswerer()
	for _, tc := range []struct {
		name     string
		tunneled bool
		user     string
		header   string
		want     string
	}{
		{"direct", false, "", "", local},
		{"direct with a forged header", false, "", "mallory", local},
		{"direct with a forged header in another case", false, "", "MALLORY", local},
		{"through the tunnel", true, "ana", "", "ana via gateway"},
		{"through the tunnel, spaces folded", true, "  ana \n  (laptop)\t", "", "ana (laptop) via gateway"},
		{"through a gateway that names nobody", true, "", "", "a dashboard user via gateway"},
		{"through a gateway that names nobody, header ignored", true, "", "mallory", "a dashboard user via gateway"},
	} {
		req := httptest.NewRequest(http.MethodPost, "/", nil)
		if tc.header != "" {
			req.Header.Set(strings.ToLower(tunnel.UserHeader), tc.header)
		}
		if tc.tunneled {
			req = req.WithContext(tunnel.WithUser(req.Context(), tc.user))
		}
		c := echo.New().NewContext(req, httptest.NewRecorder())
		if got := answerer(c); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
