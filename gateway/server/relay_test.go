package server

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The connector gets the client's request on its own path, with the
// client's headers but not the gateway's credentials, this hop's
// connection headers or forwarding headers the client made up.
func TestRelayRewritesTheRequestForTheConnector(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	got := make(chan *http.Request, 1)
	f.connector("m1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Clone(r.Context())
		w.WriteHeader(http.StatusNoContent)
	}))
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/api/clients/m1/threads/abc?limit=5&key=secret-in-url&secret=x", nil)
	req.Header.Set("Authorization", "Bearer "+f.dash)
	req.Header.Set("Cookie", "uncaged_token=whatever")
	req.Header.Set("X-Custom", "kept")
	req.Header.Add("X-Custom", "both values")
	req.Header.Set("Connection", "keep-alive, X-Hop")
	req.Header.Set("X-Hop", "dropped: named by Connection")
	req.Header.Set("Keep-Alive", "timeout=5")
	req.Header.Set("Te", "trailers, deflate")
	req.Header.Set("X-Forwarded-For", "6.6.6.6")
	req.Header.Set("X-Forwarded-Host", "evil.example")
	req.Header.Set("Forwarded", "for=6.6.6.6")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("status %d", res.StatusCode)
	}
	r := <-got
	if r.URL.Path != "/api/threads/abc" || r.URL.RawQuery != "limit=5" {
		t.Errorf("connector got %s?%s, want /api/threads/abc?limit=5", r.URL.Path, r.URL.RawQuery)
	}
	for _, k := range []string{"Authorization", "Cookie", "X-Hop", "Keep-Alive", "Forwarded", "Connection"} {
		if v, ok := r.Header[k]; ok {
			t.Errorf("connector got %s: %q", k, v)
		}
	}
	if v := r.Header.Values("X-Custom"); len(v) != 2 || v[0] != "kept" || v[1] != "both values" {
		t.Errorf("X-Custom = %q", v)
	}
	if v := r.Header.Get("Te"); v != "trailers" {
		t.Errorf("Te = %q, want trailers", v)
	}
	if v := r.Header.Get("X-Forwarded-For"); v != "127.0.0.1" {
		t.Errorf("X-Forwarded-For = %q, want the client's address only", v)
	}
	if v := r.Header.Get("X-Forwarded-Host"); v != strings.TrimPrefix(f.srv.URL, "http://") {
		t.Errorf("X-Forwarded-Host = %q", v)
	}
	if v := r.Header.Get("X-Forwarded-Proto"); v != "http" {
		t.Errorf("X-Forwarded-Proto = %q", v)
	}
	if v := r.Header.Get("User-Agent"); v != "Go-http-client/1.1" {
		t.Errorf("User-Agent = %q, want the client's", v)
	}
}

// The answer keeps the connector's status, headers and trailers, even
// when the connector's HTTP/2 server gave a short answer a length.
func TestRelayPassesTheAnswerAndItsTrailers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	f.connector("m1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Checksum")
		w.Header().Set("X-Answer", "yes")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "body")
		w.Header().Set("X-Checksum", "c0ffee")
		w.Header().Set(http.TrailerPrefix+"X-Late", "undeclared")
	}))
	res, body := f.do(http.MethodPost, "/api/clients/m1/threads", f.dash, strings.NewReader("{}"))
	if res.StatusCode != http.StatusCreated || body != "body" {
		t.Fatalf("%d %q", res.StatusCode, body)
	}
	if res.Header.Get("X-Answer") != "yes" {
		t.Errorf("X-Answer lost: %v", res.Header)
	}
	if got := res.Trailer.Get("X-Checksum"); got != "c0ffee" {
		t.Errorf("trailer X-Checksum = %q, trailers %v", got, res.Trailer)
	}
	if got := res.Trailer.Get("X-Late"); got != "undeclared" {
		t.Errorf("undeclared trailer X-Late = %q, trailers %v", got, res.Trailer)
	}
}

// A body that breaks midway must not reach the client as a whole answer:
// the client's response is cut off.
func TestRelayAbortsAnAnswerThatBreaks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	f.connector("m1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// No length: the client's answer is chunked, and ending it cleanly
		// would pass off the first 100 bytes as the whole body.
		_, _ = io.WriteString(w, strings.Repeat("x", 100))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connector's stream is reset
	}))
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/api/clients/m1/cas/x", nil)
	req.Header.Set("Authorization", "Bearer "+f.dash)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return // cut off before the headers left the gateway's buffer
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read %d bytes of a broken answer, then %v; want it cut short", len(b), err)
	}
}

// An event stream arrives event by event, not when the connector's
// buffer fills.
func TestRelayFlushesEventStreams(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	next := make(chan struct{})
	f.connector("m1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Content-Length", "1000") // a known length does not hold events back
		for i := range 3 {
			_, _ = io.WriteString(w, "data: "+string(rune('a'+i))+"\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
		}
	}))
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/api/clients/m1/threads/t/events", nil)
	req.Header.Set("Authorization", "Bearer "+f.dash)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	for i := range 3 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if want := "data: " + string(rune('a'+i)) + "\n"; line != want {
			t.Fatalf("event %d: %q, want %q", i, line, want)
		}
		_, _ = br.ReadString('\n') // the blank line
		next <- struct{}{}         // the next event is sent only after this one arrived
	}
}
