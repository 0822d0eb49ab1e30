package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// phase is one stretch of the run — the steady state, or one fault from
// its start until the cluster has settled — and what the load saw in it.
type phase struct {
	name  string
	start time.Time
	// fault is when the fault struck (the kill, the first SIGTERM).
	fault time.Time

	mu       sync.Mutex
	requests int
	failed   []failure
	// machines counts the machine list's answers other than 200.
	machines int
	// gap is each connector's longest time between two answers.
	gap map[string]time.Duration
	// resumed, lost and repeated are the live streams' resumptions and
	// events missing or shown twice once their thread had ended.
	resumed, lost, repeated, streams int
	// started are the threads started in this phase (for the audit).
	started []string
}

// failure is one request that did not get its expected answer.
type failure struct {
	what       string
	sent, done time.Time
	proxied    bool // to a connector, not the gateway's own API
}

// load drives the cluster through nginx: per connector a read every
// probeEvery (its answers give the connector's outages), the endpoints
// and machine lists every second (the dashboard's sidebar), a thread
// start every startEvery, and live streams that follow those threads and
// resume with Last-Event-ID when they break.
type load struct {
	front, dash string
	names       []string
	client      *http.Client
	probeEvery  time.Duration
	startEvery  time.Duration
	streams     int

	mu      sync.Mutex
	phases  []*phase
	threads []startedThread
	// lastAnswer is each connector's last answer to a probe.
	lastAnswer map[string]time.Time

	seq  atomic.Int64
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

type startedThread struct{ machine, id string }

func newLoad(front, dash string, names []string, probeEvery, startEvery time.Duration, streams int) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{front: front, dash: dash, names: names, probeEvery: probeEvery, startEvery: startEvery, streams: streams,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}, ctx: ctx, stop: cancel,
		lastAnswer: map[string]time.Time{}}
	l.begin("steady state (no fault)")
	return l
}

// begin starts a new phase; what the load sees from now on counts there.
func (l *load) begin(name string) *phase {
	p := &phase{name: name, start: time.Now(), gap: map[string]time.Duration{}}
	l.mu.Lock()
	l.phases = append(l.phases, p)
	l.mu.Unlock()
	return p
}

func (l *load) current() *phase {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.phases[len(l.phases)-1]
}

// run starts the load's goroutines; finish stops them.
func (l *load) run() {
	for _, name := range l.names {
		l.loop(l.probeEvery, func() { l.probe(name) })
	}
	l.loop(time.Second, func() { l.request("GET", "/api/gateway/endpoints", "", 200, false) })
	l.loop(time.Second, func() {
		if code := l.request("GET", "/api/gateway/machines", "", 200, false); code != 200 {
			p := l.current()
			p.mu.Lock()
			p.machines++
			p.mu.Unlock()
		}
	})
	l.loop(l.startEvery, l.startThread)
	for range l.streams {
		l.wg.Add(1)
		go func() { defer l.wg.Done(); l.follow() }()
	}
}

func (l *load) finish() {
	l.stop()
	l.wg.Wait()
}

// loop calls f, then waits every, until the load stops.
func (l *load) loop(every time.Duration, f func()) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for l.ctx.Err() == nil {
			f()
			select {
			case <-l.ctx.Done():
			case <-time.After(every):
			}
		}
	}()
}

// request sends one request through nginx and records it in the phase it
// was sent in; the status, 0 for none.
func (l *load) request(method, path, body string, want int, proxied bool) int {
	code, _ := l.send(method, path, body, want, proxied)
	return code
}

func (l *load) send(method, path, body string, want int, proxied bool) (int, []byte) {
	p := l.current()
	sent := time.Now()
	req, _ := http.NewRequestWithContext(context.WithoutCancel(l.ctx), method, "http://"+l.front+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+l.dash)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	ctx, cancel := context.WithTimeout(req.Context(), 30*time.Second)
	defer cancel()
	resp, err := l.client.Do(req.WithContext(ctx))
	var code int
	var b []byte
	what := ""
	if err != nil {
		what = err.Error()
	} else {
		code = resp.StatusCode
		b, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
			what = fmt.Sprintf("%d, body cut: %v", code, err)
		case code != want:
			what = fmt.Sprintf("%d %s", code, strings.TrimSpace(string(b)))
		}
	}
	p.mu.Lock()
	p.requests++
	if what != "" {
		p.failed = append(p.failed, failure{what: method + " " + path + ": " + what, sent: sent, done: time.Now(), proxied: proxied})
	}
	p.mu.Unlock()
	if what != "" {
		return code, nil
	}
	return code, b
}

// probe reads one connector's workflows and notes the time since its
// last answer: the longest such gap, less the probe's own interval, is
// how long the connector was away.
func (l *load) probe(name string) {
	code := l.request("GET", "/api/clients/"+name+"/workflows", "", 200, true)
	if code != 200 {
		return
	}
	now := time.Now()
	l.mu.Lock()
	last, ok := l.lastAnswer[name]
	l.lastAnswer[name] = now
	l.mu.Unlock()
	if !ok {
		return
	}
	p := l.current()
	p.mu.Lock()
	if gap := now.Sub(last) - l.probeEvery; gap > p.gap[name] {
		p.gap[name] = gap
	}
	p.mu.Unlock()
}

// startThread starts the steps workflow on the next connector.
func (l *load) startThread() {
	n := l.seq.Add(1)
	name := l.names[int(n)%len(l.names)]
	code, b := l.send("POST", "/api/clients/"+name+"/threads", fmt.Sprintf(`{"workflow":"steps","prompt":"opsbench %d"}`, n), 201, true)
	if code != 201 {
		return
	}
	var started struct{ ThreadID string }
	if json.Unmarshal(b, &started) != nil || started.ThreadID == "" {
		return
	}
	p := l.current()
	p.mu.Lock()
	p.started = append(p.started, started.ThreadID)
	p.mu.Unlock()
	l.mu.Lock()
	l.threads = append(l.threads, startedThread{name, started.ThreadID})
	l.mu.Unlock()
}

// follow follows the newest thread's live stream to its end, checks it
// against a stream of the finished thread, and takes the next.
func (l *load) follow() {
	followed := map[string]bool{}
	for l.ctx.Err() == nil {
		l.mu.Lock()
		var t startedThread
		for i := len(l.threads) - 1; i >= 0; i-- {
			if !followed[l.threads[i].id] {
				t = l.threads[i]
				break
			}
		}
		l.mu.Unlock()
		if t.id == "" {
			select {
			case <-l.ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		followed[t.id] = true
		path := "/api/clients/" + t.machine + "/threads/" + t.id + "/live"
		ids, ok := l.stream(path, true)
		if !ok || l.ctx.Err() != nil {
			continue
		}
		whole, ok := l.stream(path, false)
		if !ok {
			continue
		}
		seen := map[string]int{}
		for _, id := range ids {
			seen[id]++
		}
		p := l.current()
		p.mu.Lock()
		p.streams++
		for _, id := range whole {
			switch n := seen[id]; {
			case n == 0:
				p.lost++
			case n > 1:
				p.repeated += n - 1
			}
		}
		p.mu.Unlock()
	}
}

// stream reads a live stream to its "done" event as an EventSource does,
// opening it again with Last-Event-ID when it ends early (counted as a
// resumption, when live); the numbers of the records it got, and false
// when it failed.
func (l *load) stream(path string, live bool) ([]string, bool) {
	var ids []string
	last := ""
	for attempt := 0; attempt < 100 && l.ctx.Err() == nil; attempt++ {
		p := l.current()
		req, _ := http.NewRequestWithContext(l.ctx, "GET", "http://"+l.front+path, nil)
		req.Header.Set("Authorization", "Bearer "+l.dash)
		req.Header.Set("Accept", "text/event-stream")
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		sent := time.Now()
		resp, err := l.client.Do(req)
		if l.ctx.Err() != nil {
			return ids, false
		}
		p.mu.Lock()
		p.requests++
		if err != nil || resp.StatusCode != 200 {
			what := fmt.Sprint(err)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				what = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
			}
			p.failed = append(p.failed, failure{what: "GET " + path + ": " + what, sent: sent, done: time.Now(), proxied: true})
			p.mu.Unlock()
			return ids, false
		}
		p.mu.Unlock()
		done := false
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		event, id := "", ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
				last = id
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case line == "":
				if event == "record" {
					// An id is "<record number>:<debug-log offset>"; the
					// offset depends on when the record was sent, the
					// number names the record.
					n, _, _ := strings.Cut(id, ":")
					ids = append(ids, n)
				}
				done = done || event == "done"
				event, id = "", ""
			}
			if done {
				break
			}
		}
		resp.Body.Close()
		if done {
			return ids, true
		}
		if live {
			p := l.current()
			p.mu.Lock()
			p.resumed++
			p.mu.Unlock()
		}
	}
	return ids, false
}
