package legacy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/coder/websocket"
)

// Serve is the original client's side of the protocol, in Go: it answers
// the request frames arriving on ws with h, each in its own goroutine (so
// answers may go out of order), until ws closes or ctx ends. As the
// original, it ignores binary messages and frames that do not parse,
// buffers every response body whole as text, and answers a handler panic
// with 502 {"error":"local fetch failed",...}. It exists for tests and
// benchmarks of the gateway's compatibility path.
func Serve(ctx context.Context, ws *websocket.Conn, h http.Handler) error {
	for {
		typ, data, err := ws.Read(ctx)
		if err != nil {
			return err
		}
		if typ != websocket.MessageText {
			continue
		}
		req, err := ParseRequest(data)
		if err != nil {
			continue
		}
		go func() {
			out, _ := json.Marshal(answer(ctx, h, req))
			// A failed write closes the socket, which ends the Read loop.
			_ = ws.Write(ctx, websocket.MessageText, out)
		}()
	}
}

// wireResponse is a response frame as the original client encodes it.
type wireResponse struct {
	ID      string            `json:"id"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

func answer(ctx context.Context, h http.Handler, f RequestFrame) (resp wireResponse) {
	resp.ID = f.ID
	defer func() {
		if v := recover(); v != nil {
			detail, _ := json.Marshal(fmt.Sprint(v))
			resp.Status = http.StatusBadGateway
			resp.Headers = map[string]string{"content-type": "application/json"}
			resp.Body = `{"error":"local fetch failed","detail":` + string(detail) + `}`
		}
	}()
	var body *strings.Reader
	if f.Body != nil {
		body = strings.NewReader(*f.Body)
	} else {
		body = strings.NewReader("")
	}
	req, err := http.NewRequestWithContext(ctx, f.Method, "http://localhost"+f.Path, body)
	if err != nil {
		panic(err)
	}
	for k, v := range f.Headers {
		req.Header.Set(k, v)
	}
	rec := &recorder{header: http.Header{}}
	h.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	resp.Status = rec.status
	resp.Headers = make(map[string]string, len(rec.header))
	for k, v := range rec.header {
		resp.Headers[strings.ToLower(k)] = strings.Join(v, ", ")
	}
	resp.Body = rec.body.String()
	return resp
}

// recorder buffers a handler's whole response, as the original's
// `await resp.text()`.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

// Flush does nothing: the original sends nothing before the body is whole.
func (r *recorder) Flush() {}
