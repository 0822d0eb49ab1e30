package web

import (
	"io/fs"
	"net/http/httptest"
	"strings"
	"testing"
)

func get(t *testing.T, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	Handler().ServeHTTP(w, httptest.NewRequest(method, target, nil))
	return w
}

func firstAsset(t *testing.T, ext string) string {
	t.Helper()
	entries, err := fs.ReadDir(files, "assets")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ext) {
			return "/assets/" + e.Name()
		}
	}
	t.Fatalf("no %s asset in dist", ext)
	return ""
}

func TestIndexAndFallback(t *testing.T) {
	for _, p := range []string{"/", "/index.html", "/m/laptop/threads", "/some/deep/link"} {
		w := get(t, "GET", p)
		if w.Code != 200 || !strings.Contains(w.Body.String(), `<div id="root">`) {
			t.Fatalf("%s: %d %q", p, w.Code, w.Body.String())
		}
		if cc := w.Header().Get("Cache-Control"); cc != "no-cache" {
			t.Fatalf("%s: Cache-Control %q", p, cc)
		}
		if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Fatalf("%s: Content-Type %q", p, ct)
		}
	}
}

func TestHashedAssetsAreImmutable(t *testing.T) {
	for _, ext := range []string{".js", ".css"} {
		a := firstAsset(t, ext)
		w := get(t, "GET", a)
		if w.Code != 200 || !strings.Contains(w.Header().Get("Cache-Control"), "immutable") {
			t.Fatalf("%s: %d %v", a, w.Code, w.Header())
		}
		if ext == ".js" && !strings.Contains(w.Header().Get("Content-Type"), "javascript") {
			t.Fatalf("%s: Content-Type %q", a, w.Header().Get("Content-Type"))
		}
	}
	if w := get(t, "GET", "/assets/missing-abc123.js"); w.Code != 404 {
		t.Fatalf("missing asset: %d", w.Code)
	}
}

func TestAPIPathsAreNotTheApp(t *testing.T) {
	for _, p := range []string{"/api", "/api/nope", "/api/clients/x/threads"} {
		w := get(t, "GET", p)
		if w.Code != 404 || strings.Contains(w.Body.String(), "<html") {
			t.Fatalf("%s: %d %s", p, w.Code, w.Body.String())
		}
	}
	if w := get(t, "POST", "/"); w.Code != 405 {
		t.Fatalf("POST /: %d", w.Code)
	}
	if w := get(t, "HEAD", "/"); w.Code != 200 || w.Body.Len() != 0 {
		t.Fatalf("HEAD /: %d %d bytes", w.Code, w.Body.Len())
	}
}
