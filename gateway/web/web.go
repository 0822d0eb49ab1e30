// Package web serves the dashboard: the React app built into dist/ by
// `npm run build` (see README.md) and embedded into the gateway binary.
//
// Handler answers GET and HEAD. Files under dist/ are served as they are;
// any other path that is not under /api/ gets index.html, so hash-less
// deep links still open the app (the app itself routes on the URL hash).
// Hashed assets (assets/*) are cached for a year, immutable; index.html
// and other unhashed files must be revalidated (no-cache).
package web

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed all:dist
var dist embed.FS

// files is dist/ as the root of the site.
var files = func() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err)
	}
	return sub
}()

const (
	immutable = "public, max-age=31536000, immutable"
	noCache   = "no-cache"
)

// Handler serves the embedded dashboard.
func Handler() http.Handler {
	return http.HandlerFunc(serve)
}

func serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := path.Clean("/" + r.URL.Path)
	if p == "/api" || strings.HasPrefix(p, "/api/") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		// A failed write means the client left; there is no one to tell.
		_, _ = w.Write([]byte(`{"error":"not found"}` + "\n"))
		return
	}
	name := strings.TrimPrefix(p, "/")
	if name == "" {
		name = "index.html"
	}
	data, err := fs.ReadFile(files, name)
	if err != nil {
		if strings.HasPrefix(name, "assets/") {
			// A missing hashed asset is a real 404 (an old page asking for a
			// bundle of a previous build), not the app.
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		name = "index.html"
		if data, err = fs.ReadFile(files, name); err != nil {
			http.Error(w, "dashboard not built", http.StatusNotFound)
			return
		}
	}
	h := w.Header()
	if strings.HasPrefix(name, "assets/") {
		h.Set("Cache-Control", immutable)
	} else {
		h.Set("Cache-Control", noCache)
	}
	h.Set("X-Content-Type-Options", "nosniff")
	if name == "index.html" {
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Referrer-Policy", "same-origin")
	}
	// ServeContent sets Content-Type from the extension and handles HEAD
	// and ranges; the zero modtime skips Last-Modified (the embed FS has none).
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(data))
}
