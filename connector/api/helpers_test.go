package api

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/jsrt"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/workflow"
	"github.com/uncaged/workflow/shared/testkit"
)

// fixture is the API over a temporary storage root, with a real engine host
// (host.Open + Serve in this process) running jsrt bundles from testdata.
type fixture struct {
	t     testing.TB
	l     storage.Layout
	opts  Options
	e     *echo.Echo
	srv   *httptest.Server
	eng   *HostEngine
	exits chan string // ids of live handlers that returned

	hostMu   sync.Mutex
	stopHost func()
}

// newFixture serves an API on a fresh root with no host yet; startHost
// starts one.
func newFixture(t testing.TB, mutate ...func(*Options)) *fixture {
	t.Helper()
	f := &fixture{t: t, l: storage.Layout{Root: t.TempDir()}, exits: make(chan string, 64)}
	f.eng = NewHostEngine(f.l, nil)
	f.opts = Options{Layout: f.l, Engine: f.eng, liveExit: func(id string) {
		select {
		case f.exits <- id:
		default:
		}
	}}
	for _, m := range mutate {
		m(&f.opts)
	}
	f.e = New(f.opts)
	f.srv = httptest.NewServer(f.e)
	t.Cleanup(f.srv.Close)
	t.Cleanup(f.shutdownHost)
	return f
}

// loader loads bundles by hash from the root, as production does.
func loader(l storage.Layout) func(string) (workflow.Workflow, error) {
	var mu sync.Mutex
	cache := map[string]*jsrt.Bundle{}
	return func(hash string) (workflow.Workflow, error) {
		mu.Lock()
		defer mu.Unlock()
		if b, ok := cache[hash]; ok {
			return b, nil
		}
		src, err := os.ReadFile(l.BundleFile(hash))
		if err != nil {
			return nil, err
		}
		b, err := jsrt.Load(src, filepath.Base(l.BundleFile(hash)), jsrt.Options{})
		if err != nil {
			return nil, err
		}
		cache[hash] = b
		return b, nil
	}
}

// register adds e2e/testdata/<file> (the bundles the end-to-end tests
// use) as workflow name, with its descriptor
// sidecar, as `workflow add` does, and returns the bundle hash.
func (f *fixture) register(name, file string) string {
	f.t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "e2e", "testdata", file))
	if err != nil {
		f.t.Fatal(err)
	}
	b, err := jsrt.Load(src, file, jsrt.Options{})
	if err != nil {
		f.t.Fatal(err)
	}
	desc, err := b.Descriptor().MarshalYAML()
	if err != nil {
		f.t.Fatal(err)
	}
	hash := ids.HashBytes(src)
	if err := registry.StoreFile(f.l.BundleFile(hash), "bundle", src); err != nil {
		f.t.Fatal(err)
	}
	if err := registry.StoreFile(f.l.DescriptorFile(hash), "descriptor", desc); err != nil {
		f.t.Fatal(err)
	}
	err = registry.Update(f.l.RegistryFile(), func(r *registry.Registry) error {
		r.Register(name, hash, time.Now().UnixMilli())
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return hash
}

// startHost runs an engine host for the root in this process until
// stopHost (or the end of the test).
// priceModel configures a default model p/m, priced at $1 per million
// prompt tokens and $2 per million completion tokens.
func (f *fixture) priceModel() {
	f.t.Helper()
	err := registry.Update(f.l.RegistryFile(), func(r *registry.Registry) error {
		return r.SetConfig(registry.Config{MaxDepth: 3, Providers: map[string]registry.Provider{"p": {BaseURL: "http://127.0.0.1:1", APIKey: "k"}},
			Models: map[string]string{"default": "p/m"}, Prices: registry.Prices{"p/m": {Prompt: 1, Completion: 2}}})
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) startHost() {
	f.t.Helper()
	f.startHostLoading(loader(f.l))
}

// startHostLoading is startHost with the host loading workflows by load.
func (f *fixture) startHostLoading(load func(string) (workflow.Workflow, error)) {
	f.t.Helper()
	h, err := host.Open(host.Options{Layout: f.l, Load: load})
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx) }()
	f.hostMu.Lock()
	f.stopHost = func() {
		cancel()
		if err := <-done; err != nil {
			f.t.Errorf("engine host: %v", err)
		}
	}
	f.hostMu.Unlock()
	testkit.WaitUntil(f.t, "the engine host to answer", func() bool {
		c, err := host.Dial(f.l)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}

// shutdownHost stops the host; its unfinished threads stay interrupted.
func (f *fixture) shutdownHost() {
	f.hostMu.Lock()
	stop := f.stopHost
	f.stopHost = nil
	f.hostMu.Unlock()
	if stop != nil {
		stop()
	}
}

// call sends a request through the handler directly.
func (f *fixture) call(method, path, body string, hdr ...string) *httptest.ResponseRecorder {
	f.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	f.e.ServeHTTP(rec, req)
	return rec
}

// want checks a response's status and decodes its JSON body into out.
func (f *fixture) want(method, path, body string, code int, out any) {
	f.t.Helper()
	rec := f.call(method, path, body)
	if rec.Code != code {
		f.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, rec.Code, code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		f.t.Fatalf("%s %s: Content-Type %q, want JSON", method, path, ct)
	}
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			f.t.Fatalf("%s %s: %v in %s", method, path, err, rec.Body)
		}
	}
}

// wantError checks a JSON error response; msg, when set, must be contained
// in the error.
func (f *fixture) wantError(method, path, body string, code int, msg string) {
	f.t.Helper()
	var e errorBody
	f.want(method, path, body, code, &e)
	if e.Error == "" || !strings.Contains(e.Error, msg) {
		f.t.Fatalf("%s %s: error %q, want it to contain %q", method, path, e.Error, msg)
	}
}

// run starts a thread through the API.
func (f *fixture) run(workflowName, prompt string) string {
	f.t.Helper()
	body, _ := json.Marshal(map[string]string{"workflow": workflowName, "prompt": prompt})
	var ref struct{ ThreadID string }
	f.want(http.MethodPost, "/api/threads", string(body), http.StatusCreated, &ref)
	if ref.ThreadID == "" {
		f.t.Fatal("no threadId")
	}
	return ref.ThreadID
}

// detail is GET /api/threads/:id with its records decoded loosely.
type detail struct {
	ThreadID string           `json:"threadId"`
	Records  []map[string]any `json:"records"`
}

func (d detail) status() string { return d.Records[0]["status"].(string) }

// roles lists the role records' roles.
func (d detail) roles() []string {
	var out []string
	for _, r := range d.Records {
		if r["type"] == RecordRole {
			out = append(out, r["role"].(string))
		}
	}
	return out
}

func (d detail) result() map[string]any {
	last := d.Records[len(d.Records)-1]
	if last["type"] != RecordWorkflowResult {
		return nil
	}
	return last
}

func (f *fixture) detail(id string) detail {
	f.t.Helper()
	var d detail
	f.want(http.MethodGet, "/api/threads/"+id, "", http.StatusOK, &d)
	return d
}

func (f *fixture) waitStatus(id string, statuses ...string) detail {
	f.t.Helper()
	var d detail
	testkit.WaitUntil(f.t, "thread "+id+" to be "+strings.Join(statuses, "|"), func() bool {
		d = f.detail(id)
		for _, s := range statuses {
			if d.status() == s {
				return true
			}
		}
		return false
	})
	return d
}

// sseEvent is one server-sent event.
type sseEvent struct {
	ID, Name, Data string
}

// sseReader reads events, skipping comments.
type sseReader struct {
	sc       *bufio.Scanner
	comments int
}

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	return &sseReader{sc: sc}
}

func (r *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	seen := false
	for r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case line == "":
			if seen {
				return ev, nil
			}
		case strings.HasPrefix(line, ":"):
			r.comments++
		default:
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimPrefix(v, " ")
			seen = true
			switch k {
			case "id":
				ev.ID = v
			case "event":
				ev.Name = v
			case "data":
				ev.Data += v
			}
		}
	}
	if err := r.sc.Err(); err != nil {
		return ev, err
	}
	return ev, io.EOF
}

// openLive connects to the live route over real HTTP.
func (f *fixture) openLive(ctx context.Context, id string, hdr ...string) *http.Response {
	f.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+"/api/threads/"+id+"/live", nil)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp
}

// snapshot fingerprints every file under the root except the engine
// host's own lock, socket and log.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch rel {
		case "engine.lock", "engine.sock", filepath.Join("logs", "engine.log"):
			return nil
		}
		if d.IsDir() {
			out[rel+"/"] = "dir"
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
