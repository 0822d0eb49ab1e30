package api

import (
	"errors"
	"net/http"
	"sort"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/gc"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/ids"
)

// GCGraceWhileRunning spares unreachable blobs younger than this from
// POST /api/cas/gc while an engine host runs on the root: a running step
// stores its content a moment before it links it into the chain.
const GCGraceWhileRunning = 10 * time.Minute

// CASList is GET /api/cas: one page of stored hashes, sorted, and how many
// there are.
type CASList struct {
	Hashes []string `json:"hashes"`
	Total  int      `json:"total"`
}

// CASEntry is GET /api/cas/:hash: the stored bytes (a serialized node).
type CASEntry struct {
	Hash    string `json:"hash"`
	Content string `json:"content"`
}

func (s *server) listCAS(c echo.Context) error {
	page, err := parsePage(c)
	if err != nil {
		return err
	}
	hashes, err := s.store.List()
	if err != nil {
		return s.internal(c, err)
	}
	sort.Strings(hashes)
	out := CASList{Hashes: Window(hashes, page.offset, page.limit), Total: len(hashes)}
	if out.Hashes == nil {
		out.Hashes = []string{}
	}
	return c.JSON(http.StatusOK, out)
}

// hashParam validates :hash (400 with the reason when it is not one).
func hashParam(c echo.Context) (string, error) {
	h, err := ids.ParseHash(c.Param("hash"))
	if err != nil {
		return "", fail(http.StatusBadRequest, "%s", err.Error())
	}
	return h, nil
}

func (s *server) getCAS(c echo.Context) error {
	h, err := hashParam(c)
	if err != nil {
		return err
	}
	b, err := s.store.Get(h)
	switch {
	case errors.Is(err, cas.ErrNotFound):
		return fail(http.StatusNotFound, "not found")
	case err != nil:
		return s.internal(c, err)
	}
	return c.JSON(http.StatusOK, CASEntry{Hash: h, Content: string(b)})
}

func (s *server) putCAS(c echo.Context) error {
	obj, err := readObject(c, false)
	if err != nil {
		return err
	}
	content, ok := obj["content"].(string)
	if !ok {
		return fail(http.StatusBadRequest, "content field required")
	}
	h, err := s.store.Put(content)
	if err != nil {
		return s.internal(c, err)
	}
	return c.JSON(http.StatusCreated, map[string]string{"hash": h})
}

func (s *server) deleteCAS(c echo.Context) error {
	h, err := hashParam(c)
	if err != nil {
		return err
	}
	ok, err := s.store.Exists(h)
	if err != nil {
		return s.internal(c, err)
	}
	if !ok {
		return fail(http.StatusNotFound, "not found")
	}
	if err := s.store.Delete(h); err != nil {
		return s.internal(c, err)
	}
	return c.JSON(http.StatusOK, okBody)
}

// gcCAS runs one collection (one at a time; a client that goes away stops
// it before it deletes more).
func (s *server) gcCAS(c echo.Context) error {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	opts := gc.Options{}
	if host.Running(s.opts.Layout) {
		opts.Grace = GCGraceWhileRunning
	}
	res, err := gc.Collect(c.Request().Context(), s.opts.Layout, s.store, opts)
	if err != nil {
		return s.internal(c, err)
	}
	if res.DeletedHashes == nil {
		res.DeletedHashes = []string{}
	}
	return c.JSON(http.StatusOK, res)
}
