package host

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/threads"
)

// maxBody bounds control requests; prompts can be long, not unbounded.
const maxBody = 8 << 20

func (h *Host) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, h.Status())
	})
	mux.HandleFunc("GET /v1/threads", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, h.List())
	})
	mux.HandleFunc("GET /v1/changes", h.serveChanges)
	mux.HandleFunc("POST /v1/threads", func(w http.ResponseWriter, r *http.Request) {
		var req RunRequest
		if !readJSON(w, r, &req) {
			return
		}
		out, err := h.RunOnce(req)
		if err != nil {
			writeError(w, err)
			return
		}
		// 200 for a run whose idempotency key had started the thread:
		// nothing was created now.
		status := http.StatusCreated
		if out.Replayed {
			status = http.StatusOK
		}
		writeJSON(w, status, ThreadRef{ThreadID: out.ThreadID})
	})
	mux.HandleFunc("POST /v1/threads/{id}/fork", func(w http.ResponseWriter, r *http.Request) {
		var req ForkRequest
		if !readJSON(w, r, &req) {
			return
		}
		id, ok := threadID(w, r)
		if !ok {
			return
		}
		newID, err := h.Fork(id, req)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, ThreadRef{ThreadID: newID})
	})
	mux.HandleFunc("POST /v1/threads/{id}/resume", func(w http.ResponseWriter, r *http.Request) {
		var req ResumeRequest
		if !readJSON(w, r, &req) {
			return
		}
		id, ok := threadID(w, r)
		if !ok {
			return
		}
		if err := h.Resume(id, req); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
	mux.HandleFunc("POST /v1/threads/{id}/remove", h.serveRemove)
	mux.HandleFunc("POST /v1/threads/{id}/answer", h.serveAnswer)
	mux.HandleFunc("POST /v1/stop", func(w http.ResponseWriter, r *http.Request) {
		var req StopRequest
		if !readJSON(w, r, &req) {
			return
		}
		ans, err := h.Stop(req.Force)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, ans)
	})
	mux.HandleFunc("POST /v1/threads/{id}/kill", func(w http.ResponseWriter, r *http.Request) {
		var req KillRequest // a body is optional: older clients send none
		if !readJSON(w, r, &req) {
			return
		}
		id, ok := threadID(w, r)
		if !ok {
			return
		}
		if err := h.Kill(id, req); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
	mux.HandleFunc("POST /v1/threads/{id}/pause", func(w http.ResponseWriter, r *http.Request) {
		id, ok := threadID(w, r)
		if !ok {
			return
		}
		if err := h.Pause(id); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
	return mux
}

func threadID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id, err := ids.ParseThreadID(r.PathValue("id"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{err.Error()})
		return "", false
	}
	return id, true
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeJSON(w, http.StatusRequestEntityTooLarge, apiError{"request body too large"})
		return false
	}
	if len(body) == 0 {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{"invalid JSON body: " + err.Error()})
		return false
	}
	return true
}

func writeError(w http.ResponseWriter, err error) {
	if code, status := keyErrorCode(err); code != "" {
		writeJSON(w, status, codedAPIError{Error: err.Error(), Code: code})
		return
	}
	status := http.StatusConflict
	if errors.Is(err, threads.ErrNotFound) {
		status = http.StatusNotFound
	}
	writeJSON(w, status, apiError{err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The status is sent; an encoding that fails now can only be a client
	// gone away, with nobody left to tell (as for fmt.Fprint* to w).
	_ = json.NewEncoder(w).Encode(v)
}
