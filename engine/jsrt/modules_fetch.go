package jsrt

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/dop251/goja"

	"github.com/uncaged/workflow/engine/membudget"
)

// httpClient is the run's client. Each run has its own transport so that
// closing the run closes its idle connections and leaves no goroutines.
func (e *jsEnv) httpClient() *http.Client {
	if e.http == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		e.http = &http.Client{Transport: t}
	}
	return e.http
}

type fetchResult struct {
	status     int
	statusText string
	headers    [][2]string
	body       []byte
	url        string
	redirected bool
}

// fetchHost binds fetch.js to net/http: __host.fetch(url, method,
// headers, body, redirect, callback) starts a request and returns its id,
// __host.abort(id) cancels it.
func (e *jsEnv) fetchHost() *goja.Object {
	return e.obj(
		"fetch", e.fetchStart,
		"abort", func(call goja.FunctionCall) goja.Value {
			if cancel, ok := e.fetch[call.Argument(0).ToInteger()]; ok {
				cancel()
			}
			return goja.Undefined()
		},
		"utf8", func(call goja.FunctionCall) goja.Value {
			b, _ := bytesOf(call.Argument(0))
			e.gate(atMost(decodedSize(b, "utf8")))
			return e.vm.ToValue(decodeUTF8(b))
		},
	)
}

func (e *jsEnv) fetchStart(call goja.FunctionCall) goja.Value {
	if e.validating {
		e.throwError("fetch is not available while a bundle is validated; call it inside run")
	}
	rawURL := call.Argument(0).String()
	method := call.Argument(1).String()
	var headers [][2]string
	if obj, ok := call.Argument(2).(*goja.Object); ok {
		e.vm.ForOf(obj, func(pair goja.Value) bool {
			p := pair.ToObject(e.vm)
			headers = append(headers, [2]string{p.Get("0").String(), p.Get("1").String()})
			return true
		})
	}
	raw, hasBody := bytesOf(call.Argument(3))
	e.gate(exactly(int64(len(raw))))
	body := append([]byte(nil), raw...)
	redirect := call.Argument(4).String()
	cb, ok := goja.AssertFunction(call.Argument(5))
	if !ok {
		e.throwTypeError("fetch callback must be a function")
	}

	id := e.nextID()
	ctx, cancel := context.WithCancel(e.loop.ctx)
	e.fetch[id] = cancel
	client := e.httpClient()
	acct := e.loop.acct
	e.loop.goWork(func(context.Context) func() error {
		res, err := doFetch(ctx, client, acct, rawURL, method, headers, body, hasBody, redirect)
		return func() error {
			delete(e.fetch, id)
			cancel()
			if errors.Is(err, membudget.ErrExceeded) {
				return e.loop.call(cb, goja.Undefined(), e.refusal(err))
			}
			if err != nil {
				return e.loop.call(cb, goja.Undefined(), e.newError("Error", err.Error()))
			}
			hs := make([]any, len(res.headers))
			for i, h := range res.headers {
				hs[i] = e.vm.NewArray(h[0], h[1])
			}
			obj := e.obj(
				"status", res.status,
				"statusText", res.statusText,
				"headers", e.vm.NewArray(hs...),
				"body", e.vm.NewArrayBuffer(res.body),
				"url", res.url,
				"redirected", res.redirected,
			)
			return e.loop.call(cb, goja.Undefined(), goja.Null(), obj)
		}
	})
	return e.vm.ToValue(id)
}

// doFetch makes the request and reads the response whole, within what
// acct lets it reserve: a body larger than that, announced or not, fails
// the request with the refusal.
func doFetch(ctx context.Context, client *http.Client, acct *membudget.Account, rawURL, method string, headers [][2]string, body []byte, hasBody bool, redirect string) (*fetchResult, error) {
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, rd)
	if err != nil {
		return nil, err
	}
	for _, h := range headers {
		req.Header.Add(h[0], h[1])
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "uncaged-workflow")
	}
	c := *client
	redirected := false
	c.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		switch redirect {
		case "manual":
			return http.ErrUseLastResponse
		case "error":
			return errors.New("unexpected redirect")
		}
		if len(via) >= 20 {
			return errors.New("too many redirects")
		}
		redirected = true
		return nil
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := readAll(acct, resp.Body, resp.ContentLength)
	if err != nil {
		return nil, err
	}
	res := &fetchResult{
		status:     resp.StatusCode,
		statusText: strings.TrimSpace(strings.TrimPrefix(resp.Status, strconv.Itoa(resp.StatusCode))),
		body:       data,
		url:        resp.Request.URL.String(),
		redirected: redirected,
	}
	for k, vs := range resp.Header {
		res.headers = append(res.headers, [2]string{strings.ToLower(k), strings.Join(vs, ", ")})
	}
	return res, nil
}
