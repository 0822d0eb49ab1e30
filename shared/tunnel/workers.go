package tunnel

import (
	"net/http"
	"sync"
)

// handlerWorkers runs request handlers on goroutines that outlive one
// request.
//
// The HTTP/2 server starts a goroutine per request, and a new goroutine
// starts on the smallest stack. The connector's API (router, middleware,
// JSON) runs deep enough to outgrow it a few times per request, and every
// growth copies the stack, looking up each frame: in the connector's
// profile that was a good part of what HTTP/2 cost over HTTP/1, whose
// goroutine per connection keeps its grown stack from one request to the
// next. A worker here does the same. Handing a request over costs two
// goroutine switches, less than the copies it saves.
//
// Workers start as needed, so there are as many as requests were ever in
// flight at once (bounded by MaxConcurrentStreams); they end with the
// connection.
type handlerWorkers struct {
	h    http.Handler
	jobs chan *handlerJob
	quit chan struct{}
	pool sync.Pool
}

type handlerJob struct {
	w http.ResponseWriter
	r *http.Request
	// done carries nil, or what the handler panicked with.
	done chan any
}

// goexited stands for a handler that ended its goroutine (runtime.Goexit)
// instead of returning.
type goexited struct{}

func newHandlerWorkers(h http.Handler) *handlerWorkers {
	p := &handlerWorkers{h: h, jobs: make(chan *handlerJob), quit: make(chan struct{})}
	p.pool.New = func() any { return &handlerJob{done: make(chan any, 1)} }
	return p
}

// ServeHTTP runs the request on a worker and waits for it, so to the HTTP/2
// server it is the handler itself: it returns when the handler did, and
// panics (http.ErrAbortHandler included) come back here.
func (p *handlerWorkers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	j := p.pool.Get().(*handlerJob)
	j.w, j.r = w, r
	select {
	case p.jobs <- j:
	default:
		go p.work(j)
	}
	v := <-j.done
	j.w, j.r = nil, nil
	p.pool.Put(j)
	switch v.(type) {
	case nil:
	case goexited:
		panic(http.ErrAbortHandler)
	default:
		panic(v)
	}
}

func (p *handlerWorkers) work(j *handlerJob) {
	for {
		if !p.run(j) {
			return // the handler called runtime.Goexit; so does this worker
		}
		select {
		case j = <-p.jobs:
		case <-p.quit:
			return
		}
	}
}

// run serves one job; it reports false when the handler ended the goroutine.
func (p *handlerWorkers) run(j *handlerJob) (ok bool) {
	returned := false
	defer func() {
		if v := recover(); v != nil {
			j.done <- v
			ok = true
			return
		}
		if !returned {
			j.done <- goexited{}
		}
	}()
	p.h.ServeHTTP(j.w, j.r)
	returned = true
	j.done <- nil
	return true
}

// stop lets idle workers end; busy ones end after their request.
func (p *handlerWorkers) stop() { close(p.quit) }
