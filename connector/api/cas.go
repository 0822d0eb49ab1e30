package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"time"
	"unicode/utf8"

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
	f, err := s.store.OpenBlob(h)
	switch {
	case errors.Is(err, cas.ErrNotFound):
		return fail(http.StatusNotFound, "not found")
	case err != nil:
		return s.internal(c, err)
	}
	defer func() { _ = f.Close() }() // opened read-only
	info, err := f.Stat()
	if err != nil {
		return s.internal(c, err)
	}
	if info.Size() > streamCASAbove {
		return streamCASEntry(c, h, f)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return s.internal(c, err)
	}
	return c.JSON(http.StatusOK, CASEntry{Hash: h, Content: string(b)})
}

// streamCASAbove is the blob size past which GET /api/cas/:hash streams the
// blob from its file. Read whole, a blob was held about four times over (the
// bytes, the string, the growing JSON buffer) and the connector's heap
// target doubled on top: a 100 MB blob left it holding most of a gigabyte.
const streamCASAbove = 1 << 20

// streamChunk is how much of a streamed blob is escaped at a time.
const streamChunk = 64 << 10

// streamCASEntry writes the same JSON c.JSON writes for CASEntry{hash, the
// file's contents}, pretty-printed alike, without holding the contents:
// the file is escaped chunk by chunk as it is sent. A read error after the
// status went out can only cut the response short, which the client sees
// as a truncated body.
func streamCASEntry(c echo.Context, hash string, f io.Reader) error {
	hashJSON, err := json.Marshal(hash)
	if err != nil {
		return err
	}
	open, sep, end := `{"hash":`, `,"content":"`, "\"}\n"
	if _, pretty := c.QueryParams()["pretty"]; pretty || c.Echo().Debug {
		open, sep, end = "{\n  \"hash\": ", ",\n  \"content\": \"", "\"\n}\n"
	}
	res := c.Response()
	res.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	res.WriteHeader(http.StatusOK)
	if _, err := io.WriteString(res, open+string(hashJSON)+sep); err != nil {
		return nil // the client is gone; nothing more can be said to it
	}
	if err := writeJSONStringBody(res, f, streamChunk); err != nil {
		// The status is out: cutting the body short is all that is left.
		panic(http.ErrAbortHandler)
	}
	_, _ = io.WriteString(res, end) // a failure here is the client going away
	return nil
}

// writeJSONStringBody writes what encoding/json writes between the quotes
// of a JSON string holding r's bytes (HTML-safe escaping, invalid UTF-8 as
// U+FFFD), chunk bytes at a time. A chunk that ends inside a UTF-8 sequence
// keeps its tail for the next, so that a character split across two reads
// is escaped as one. It escapes into one buffer of its own: encoding/json's
// encoder takes a fresh buffer from a pool per call, which the race
// detector's pool often drops, so per chunk it allocated the chunk again.
func writeJSONStringBody(w io.Writer, r io.Reader, chunk int) error {
	buf := make([]byte, chunk+utf8.UTFMax)
	// Escaped, a byte takes at most 6 (\u00XX).
	out := make([]byte, 0, 6*(chunk+utf8.UTFMax))
	held := 0
	for {
		n, rerr := io.ReadFull(r, buf[held:held+chunk])
		n += held
		held = 0
		if rerr == nil {
			held = incompleteTail(buf[:n])
		}
		if n-held > 0 {
			out = appendJSONStringBody(out[:0], buf[:n-held])
			if _, err := w.Write(out); err != nil {
				return err
			}
		}
		copy(buf, buf[n-held:n])
		switch {
		case rerr == io.EOF || rerr == io.ErrUnexpectedEOF:
			return nil
		case rerr != nil:
			return rerr
		}
	}
}

// appendJSONStringBody appends s escaped as encoding/json escapes a string
// (HTML-safe), without the quotes; TestWriteJSONStringBodyMatchesEncodingJSON
// holds the two to the same bytes.
func appendJSONStringBody(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&':
				dst = append(dst, b)
			case b == '"' || b == '\\':
				dst = append(dst, '\\', b)
			case b == '\b':
				dst = append(dst, '\\', 'b')
			case b == '\f':
				dst = append(dst, '\\', 'f')
			case b == '\n':
				dst = append(dst, '\\', 'n')
			case b == '\r':
				dst = append(dst, '\\', 'r')
			case b == '\t':
				dst = append(dst, '\\', 't')
			default: // other control characters, and <, > and & (HTML-safe)
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
			}
			i++
			continue
		}
		c, size := utf8.DecodeRune(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xf])
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return dst
}

// incompleteTail is how many bytes at the end of b begin a UTF-8 sequence
// that b does not finish (0 to 3).
func incompleteTail(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return 0
			}
			return len(b) - i
		}
	}
	return 0
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
	// Never a blob a thread reaches: the same judgement as a collection.
	opts := gc.Options{}
	if host.Running(s.opts.Layout) {
		opts.Grace = GCGraceWhileRunning
	}
	deleted, err := gc.RemoveBlob(c.Request().Context(), s.opts.Layout, s.store, h, opts)
	switch {
	case errors.Is(err, gc.ErrNeeded), errors.Is(err, gc.ErrRefused):
		return fail(http.StatusConflict, "%s", err.Error())
	case err != nil:
		return s.internal(c, err)
	case !deleted:
		return fail(http.StatusConflict, "cas entry %s was not removed: it was stored less than %s ago while an engine host runs, and a running step may be about to link it; try again later", h, GCGraceWhileRunning)
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
	if errors.Is(err, gc.ErrRefused) {
		// Damage refused the sweep before it deleted anything: a state of
		// the root to repair (doctor), not a fault of the server.
		return fail(http.StatusConflict, "%s", err.Error())
	}
	if err != nil {
		return s.internal(c, err)
	}
	if res.DeletedHashes == nil {
		res.DeletedHashes = []string{}
	}
	return c.JSON(http.StatusOK, res)
}
