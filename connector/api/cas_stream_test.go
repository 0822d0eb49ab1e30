package api

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/node"
)

// The streamed escaping must be byte for byte what encoding/json writes for
// the whole string, whatever the chunk size splits: multi-byte characters,
// invalid UTF-8, HTML-sensitive characters, control characters and U+2028.
func TestWriteJSONStringBodyMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	alphabet := []string{"a", "é", "€", "𝄞", "<", ">", "&", "\"", "\\", "\n", "\t", "\x00", "\x1f", "\u2028", "\u2029", "\xff", "\xe2\x82", "\xed\xa0\x80", "\xf0\x9d",
		"\b", "\f", "\r", "\x01", "\x7f", "'", "\u00a0", "\ufeff", "\U0010ffff", "\xf4\x90\x80\x80", "\xc0\x80"}
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		var sb strings.Builder
		for range rng.IntN(64) {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		in := sb.String()
		want, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		chunk := 1 + rng.IntN(9)
		var got bytes.Buffer
		if err := writeJSONStringBody(&got, strings.NewReader(in), chunk); err != nil {
			t.Fatal(err)
		}
		if got.String() != string(want[1:len(want)-1]) {
			t.Fatalf("trial %d, chunk %d, input %q:\n got %s\nwant %s", trial, chunk, in, got.String(), want[1:len(want)-1])
		}
	}
}

func TestIncompleteTail(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want int
	}{
		{"", 0}, {"abc", 0}, {"a\xe2\x82", 2}, {"a\xe2", 1}, {"a\xe2\x82\xac", 0},
		{"\xf0\x9d\x84", 3}, {"\xf0\x9d\x84\x9e", 0}, {"a\xff", 0}, {"\x82\x82\x82", 0},
	} {
		if got := incompleteTail([]byte(c.in)); got != c.want {
			t.Errorf("incompleteTail(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// A blob over streamCASAbove is answered from its file: the same JSON as a
// small one, with far less allocated than its size. Read whole, an 8 MiB
// blob cost over 24 MiB of allocations (bytes, string, JSON buffer).
func TestGetCASStreamsLargeBlob(t *testing.T) {
	f := newFixture(t)
	payload := strings.Repeat("<0123456789€\"\n", (8<<20)/16)
	h, err := cas.Open(f.l.CASDir()).PutNode(node.NewContent(payload, nil))
	if err != nil {
		t.Fatal(err)
	}
	want, err := node.NewContent(payload, nil).Marshal()
	if err != nil {
		t.Fatal(err)
	}

	get := func(query string) []byte {
		t.Helper()
		resp, err := http.Get(f.srv.URL + "/api/cas/" + h + query)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		return b
	}
	for _, query := range []string{"", "?pretty"} {
		got := get(query)
		var exp bytes.Buffer
		enc := json.NewEncoder(&exp)
		if query != "" {
			enc.SetIndent("", "  ")
		}
		if err := enc.Encode(CASEntry{Hash: h, Content: string(want)}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, exp.Bytes()) {
			t.Fatalf("GET %s: body of %d bytes differs from encoding/json's %d", query, len(got), exp.Len())
		}
	}

	// Measured with the body discarded, so only the server's and the
	// client's working buffers count.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp, err := http.Get(f.srv.URL + "/api/cas/" + h)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 4<<20 {
		t.Errorf("a %d MiB blob (%d bytes sent) allocated %d MiB: not streamed", len(want)>>20, n, allocated>>20)
	}
}
