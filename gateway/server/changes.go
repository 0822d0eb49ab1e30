package server

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/cluster"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/fleet"
)

// GET /api/gateway/changes tells the dashboard when what its views show
// may have changed, so that a view reloads when told instead of polling
// (the dashboard polls only while this stream is not up). It is a stream
// of server-sent events, each a hint that carries no data of its own:
//
//	event: hello     data: {"topics":["machines","threads","triggers"]}
//	                 first: the topics this gateway pushes (the others are
//	                 polled); "threads" and "triggers" need a store.
//	event: machines  data: {}                    a connector came or went (here or, in a
//	                                             cluster, on another replica)
//	event: threads   data: {"machine":"laptop"}  what the fleet's memory holds of that
//	                                             machine's threads changed (the inbox too)
//	event: triggers  data: {"trigger":"trg_…"}   a trigger or its runs changed (no trigger:
//	                                             any, after missed changes)
//
// and a comment every changesPing. A hint after a quiet spell is sent at
// once; what comes within changesCoalesce of a batch waits for the next,
// the same hint once however often it came, and the threads of more than
// maxThreadHints machines as one hint naming none: a busy fleet costs each
// view two reloads a second at most, and each stream a few events.
// Changes made through any replica reach every replica's streams through
// the store's notifications (threads, gathered by the replica that synced
// them: threadHints) and the cluster's presence (machines).

const (
	// changesPing keeps proxies from closing an idle stream.
	changesPing = 15 * time.Second
	// changesCoalesce is the least time between two batches of hints on
	// one stream.
	changesCoalesce = 500 * time.Millisecond
	// maxThreadHints is how many machines' threads one batch names; past
	// it, one hint for any machine's stands for them.
	maxThreadHints = 16
	// threadHintsEvery is how often a replica announces the machines
	// whose threads it synced meanwhile.
	threadHintsEvery = 250 * time.Millisecond
)

// Change-stream topics (the events' names).
const (
	topicMachines = "machines"
	topicThreads  = "threads"
	topicTriggers = "triggers"
)

// changeSignal tells the change streams of this replica that its
// connectors came or went (presence.Registry.OnChange), as
// cluster.Cluster.Changed tells of the other replicas': the channel
// changed returns is closed at the next notify.
type changeSignal struct {
	mu sync.Mutex
	c  chan struct{}
}

// changed is closed the next time notify is called: a waiter takes it,
// looks, and waits on it.
func (s *changeSignal) changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		s.c = make(chan struct{})
	}
	return s.c
}

// notify wakes every waiter; it never blocks.
func (s *changeSignal) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil {
		close(s.c)
		s.c = nil
	}
}

// threadHints gathers the machines whose threads the fleet's memory wrote
// to the store, and announces them to every replica (store.ChangeThreads)
// threadHintsEvery after the first: one notification for a burst of syncs
// of any number of machines, none while nothing is written.
type threadHints struct {
	g     *Gateway
	mu    sync.Mutex
	names map[string]struct{}
}

// synced records that machine's threads were written.
func (h *threadHints) synced(machine string) {
	if h.g.opts.Store == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.names == nil {
		h.names = map[string]struct{}{}
		time.AfterFunc(threadHintsEvery, h.announce)
	}
	h.names[machine] = struct{}{}
}

// announce tells the store's subscribers of the machines gathered.
func (h *threadHints) announce() {
	h.mu.Lock()
	names := h.names
	h.names = nil
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	ids := slices.Sorted(maps.Keys(names))
	if err := h.g.opts.Store.Announce(ctx, store.Change{Kind: store.ChangeThreads, IDs: ids}); err != nil {
		// The dashboard still shows them at its next reload; nothing is lost.
		h.g.opts.Logger.Debug("the fleet's thread changes could not be announced", "machines", len(ids), "err", err.Error())
	}
}

// hookHints makes presence changes wake the change streams.
func (g *Gateway) hookHints() {
	prev := g.presence.OnChange
	g.presence.OnChange = func(name, status string) {
		if prev != nil {
			prev(name, status)
		}
		g.machineHints.notify()
	}
}

// changeHint is one hint waiting to be sent on a stream.
type changeHint struct{ topic, key string }

// changeStream is one client's GET /api/gateway/changes.
type changeStream struct {
	res     *echo.Response
	pending map[changeHint]struct{}
	last    time.Time // when the last batch was sent
}

// changes is GET /api/gateway/changes.
func (g *Gateway) changes(c echo.Context) error {
	ctx := c.Request().Context()
	topics := []string{topicMachines}
	var stored <-chan store.Change
	if g.opts.Store != nil {
		if ch, err := g.opts.Store.Subscribe(ctx); err == nil {
			stored = ch
			topics = append(topics, topicThreads, topicTriggers)
		}
	}
	local := g.machineHints.changed()
	var remote <-chan struct{}
	var table string
	if cl := g.opts.Cluster; cl != nil {
		remote, table = cl.Changed(), g.clusterTable()
	}
	ending, done := g.streams.Own()
	defer done()

	res := c.Response()
	h := res.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set(echo.HeaderCacheControl, "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx would hold the events back
	res.WriteHeader(http.StatusOK)
	st := &changeStream{res: res, pending: map[changeHint]struct{}{}}
	hello, _ := json.Marshal(map[string][]string{"topics": topics})
	if st.write(fleet.AppendEvent(nil, fleet.Event{Name: "hello", Data: hello})) != nil {
		return nil
	}
	ping := time.NewTicker(changesPing)
	defer ping.Stop()
	flush := time.NewTimer(time.Hour)
	flush.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ending:
			return nil // the gateway stops: every event sent was whole
		case <-ping.C:
			if st.write([]byte(fleet.Ping)) != nil {
				return nil
			}
			continue
		case <-local:
			local = g.machineHints.changed()
			st.add(topicMachines, "")
		case <-remote:
			remote = g.opts.Cluster.Changed()
			// The others' table is announced again and again; only what a
			// person sees (who is where, online or not) makes a hint.
			if now := g.clusterTable(); now != table {
				table = now
				st.add(topicMachines, "")
			}
		case ch, ok := <-stored:
			if !ok {
				return nil // the store closed: the client reconnects, and polls meanwhile
			}
			st.addStored(ch)
		case <-flush.C:
		}
		if wait := st.send(time.Now()); wait < 0 {
			return nil
		} else if wait > 0 {
			flush.Reset(wait)
		}
	}
}

// add queues a hint.
func (st *changeStream) add(topic, key string) {
	st.pending[changeHint{topic, key}] = struct{}{}
}

// addStored queues the hints a store change makes.
func (st *changeStream) addStored(ch store.Change) {
	switch ch.Kind {
	case store.ChangeThreads:
		for _, m := range ch.IDs {
			st.add(topicThreads, m)
		}
	case store.ChangeTrigger, store.ChangeRunState:
		for _, id := range ch.IDs {
			st.add(topicTriggers, id)
		}
	case store.ChangeRun:
		st.add(topicTriggers, "") // its ids are machines
	case store.ChangeReload:
		// Changes were missed: every view that may show one reloads.
		st.add(topicThreads, "")
		st.add(topicTriggers, "")
		st.add(topicMachines, "")
	}
}

// send writes the pending hints as one batch if the last was long enough
// ago, and returns how long until it may otherwise (0: nothing waits; -1:
// the client is gone).
func (st *changeStream) send(now time.Time) time.Duration {
	if len(st.pending) == 0 {
		return 0
	}
	if since := now.Sub(st.last); !st.last.IsZero() && since < changesCoalesce {
		return changesCoalesce - since
	}
	hints := slices.SortedFunc(maps.Keys(st.pending), compareHints)
	clear(st.pending)
	machines := 0
	for _, h := range hints {
		if h.topic == topicThreads {
			machines++
		}
	}
	if machines > maxThreadHints {
		hints = slices.DeleteFunc(hints, func(h changeHint) bool { return h.topic == topicThreads && h.key != "" })
		if !slices.Contains(hints, changeHint{topicThreads, ""}) {
			hints = append(hints, changeHint{topicThreads, ""})
		}
	}
	var batch []byte
	for _, h := range hints {
		data := []byte("{}")
		switch {
		case h.topic == topicThreads && h.key != "":
			data, _ = json.Marshal(map[string]string{"machine": h.key})
		case h.topic == topicTriggers && h.key != "":
			data, _ = json.Marshal(map[string]string{"trigger": h.key})
		}
		batch = fleet.AppendEvent(batch, fleet.Event{Name: h.topic, Data: data})
	}
	if st.write(batch) != nil {
		return -1
	}
	st.last = now
	return 0
}

// write sends b (whole events, or a comment) to the client at once.
func (st *changeStream) write(b []byte) error {
	if _, err := st.res.Write(b); err != nil {
		return err
	}
	return http.NewResponseController(st.res).Flush()
}

func compareHints(a, b changeHint) int {
	if c := strings.Compare(a.topic, b.topic); c != 0 {
		return c
	}
	return strings.Compare(a.key, b.key)
}

// clusterTable is what a person sees of the other replicas' connectors:
// who is where and whether online.
func (g *Gateway) clusterTable() string {
	var b strings.Builder
	eps := g.opts.Cluster.Endpoints(nil)
	slices.SortFunc(eps, func(x, y cluster.Endpoint) int { return strings.Compare(x.Name, y.Name) })
	for _, e := range eps {
		fmt.Fprintf(&b, "%s\x00%s\x00%s\n", e.Name, e.Replica, e.Status)
	}
	return b.String()
}
