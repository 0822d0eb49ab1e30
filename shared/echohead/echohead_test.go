package echohead

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/shared/testkit"
)

// serve starts e on a real server: the body of a HEAD answer is dropped by
// net/http, which is what Install relies on.
func serve(t *testing.T, e *echo.Echo) string {
	t.Helper()
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv.URL
}

func do(t *testing.T, method, url string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func TestHeadAnswersAsGetWithoutBody(t *testing.T) {
	t.Parallel()
	e := echo.New()
	Install(e)
	e.GET("/healthz", func(c echo.Context) error {
		c.Response().Header().Set("X-Probe", "yes")
		return c.JSON(http.StatusOK, map[string]bool{"ok": true})
	})
	e.GET("/items/:id", func(c echo.Context) error {
		return c.JSON(http.StatusNotFound, map[string]string{"error": "no item " + c.Param("id")})
	})
	url := serve(t, e)
	for _, path := range []string{"/healthz", "/items/7"} {
		get, getBody := do(t, http.MethodGet, url+path, nil)
		head, headBody := do(t, http.MethodHead, url+path, nil)
		if head.StatusCode != get.StatusCode || headBody != "" || getBody == "" {
			t.Fatalf("%s: GET %d %q, HEAD %d %q", path, get.StatusCode, getBody, head.StatusCode, headBody)
		}
		for _, h := range []string{"Content-Type", "Content-Length", "X-Probe"} {
			if head.Header.Get(h) != get.Header.Get(h) {
				t.Errorf("%s: %s is %q for HEAD, %q for GET", path, h, head.Header.Get(h), get.Header.Get(h))
			}
		}
	}
}

func TestHeadRunsTheRoutesMiddleware(t *testing.T) {
	t.Parallel()
	e := echo.New()
	Install(e)
	requireKey := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if c.Request().Header.Get("X-Key") != "k" {
				return echo.NewHTTPError(http.StatusUnauthorized, "no key")
			}
			return next(c)
		}
	}
	g := e.Group("/private", requireKey)
	g.GET("/data", func(c echo.Context) error { return c.String(http.StatusOK, "secret") })
	e.GET("/route-level", func(c echo.Context) error { return c.String(http.StatusOK, "secret") }, requireKey)
	url := serve(t, e)
	for _, path := range []string{"/private/data", "/route-level"} {
		if resp, _ := do(t, http.MethodHead, url+path, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("HEAD %s without the key: %d, want 401", path, resp.StatusCode)
		}
		if resp, body := do(t, http.MethodHead, url+path, http.Header{"X-Key": {"k"}}); resp.StatusCode != http.StatusOK || body != "" {
			t.Errorf("HEAD %s with the key: %d %q", path, resp.StatusCode, body)
		}
	}
}

func TestExplicitHeadRouteKeepsItsHandler(t *testing.T) {
	t.Parallel()
	e := echo.New()
	Install(e)
	e.Any("/proxy/*", func(c echo.Context) error {
		c.Response().Header().Set("X-Method", c.Request().Method)
		return c.NoContent(http.StatusNoContent)
	})
	e.GET("/own", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	e.HEAD("/own", func(c echo.Context) error { return c.NoContent(http.StatusAccepted) })
	url := serve(t, e)
	if resp, _ := do(t, http.MethodHead, url+"/proxy/x", nil); resp.StatusCode != http.StatusNoContent || resp.Header.Get("X-Method") != http.MethodHead {
		t.Errorf("HEAD through Any: %d, method seen %q", resp.StatusCode, resp.Header.Get("X-Method"))
	}
	if resp, _ := do(t, http.MethodHead, url+"/own", nil); resp.StatusCode != http.StatusAccepted {
		t.Errorf("HEAD with its own route: %d, want 202", resp.StatusCode)
	}
}

func TestOtherRouteHooksStillRun(t *testing.T) {
	t.Parallel()
	e := echo.New()
	var seen []string
	e.OnAddRouteHandler = func(_ string, r echo.Route, _ echo.HandlerFunc, _ []echo.MiddlewareFunc) {
		seen = append(seen, r.Method+" "+r.Path)
	}
	Install(e)
	e.GET("/a", func(c echo.Context) error { return nil })
	if len(seen) != 2 || seen[0] != "GET /a" || seen[1] != "HEAD /a" {
		t.Fatalf("earlier hook saw %q, want GET /a then HEAD /a", seen)
	}
}

// A stream answers HEAD with its headers and ends, instead of holding the
// connection for as long as the stream would last.
func TestHeadOfAStreamEndsAtTheFirstFlush(t *testing.T) {
	t.Parallel()
	e := echo.New()
	Install(e)
	ended := make(chan struct{}, 2)
	e.GET("/events", func(c echo.Context) error {
		w := c.Response()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		if err := http.NewResponseController(w.Writer).Flush(); err != nil {
			return err
		}
		<-c.Request().Context().Done()
		ended <- struct{}{}
		return nil
	})
	url := serve(t, e)
	// One connection for both requests: the second waits behind the
	// first's handler unless HEAD ended it.
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	t.Cleanup(client.CloseIdleConnections)
	for range 2 {
		resp, err := client.Head(url + "/events")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("HEAD /events: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		testkit.WaitUntil(t, "the stream's handler ends after HEAD's headers", func() bool {
			select {
			case <-ended:
				return true
			default:
				return false
			}
		})
	}
}

// The handler writes its body as for GET; what reaches the wire is the
// headers alone. Read off a raw connection, since an HTTP client ignores
// whatever follows a HEAD answer's headers.
func TestHeadSendsNoBodyOnTheWire(t *testing.T) {
	t.Parallel()
	e := echo.New()
	Install(e)
	e.GET("/page", func(c echo.Context) error { return c.String(http.StatusOK, "a body that must not be sent") })
	url := serve(t, e)
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }() // read to its end already
	if _, err := io.WriteString(conn, "HEAD /page HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	head, rest, ok := strings.Cut(string(raw), "\r\n\r\n")
	if !ok || rest != "" || !strings.HasPrefix(head, "HTTP/1.1 200") || !strings.Contains(head, "Content-Length: 28") {
		t.Fatalf("HEAD /page on the wire:\n%s", raw)
	}
}
