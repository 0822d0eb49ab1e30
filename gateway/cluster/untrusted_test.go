package cluster

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uncaged/workflow/gateway/internal/natstest"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/shared/logging"
	"github.com/uncaged/workflow/shared/testkit"
)

// Whoever can publish on NATS — with no key — can send a replica any
// number of messages it must ignore. Each kind, sent many times, costs a
// few log lines, and every one is counted.
func TestIgnoredMessagesLogBoundedLinesAndAreCounted(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).ClientURL()
	var logs testkit.Buffer
	const burst = 5
	limited := logging.NewLimited(slog.NewJSONHandler(&logs, nil), logging.LimitOptions{Burst: burst, Interval: time.Hour})
	c1, err := New(Options{NATS: url, ReplicaID: "r1", Advertise: "http://127.0.0.1:11", Key: testKey, Interval: time.Hour,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)), UntrustedLogger: limited.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c1.Start(newFakeLocal()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c1.Close)
	nc := natsClient(t, url)

	signed := func(subject string, m message) *nats.Msg {
		data, mac, _ := encode(c1.key, m)
		msg := nats.NewMsg(subject)
		msg.Data = data
		msg.Header.Set(macHeader, mac)
		return msg
	}
	fresh := func(kind string) message {
		return message{Kind: kind, Replica: "r9", Advertise: "http://127.0.0.1:9", Sent: time.Now().UnixMilli()}
	}
	genuine := signed(subjectPresence, fresh(kindUpdate))
	if err := nc.PublishMsg(genuine); err != nil { // the one time it counts
		t.Fatal(err)
	}
	const n = 300
	for _, tc := range []struct {
		what, key string
		msg       func(i int) *nats.Msg
	}{
		{"unsigned", "cluster message ignored", func(int) *nats.Msg {
			m := nats.NewMsg(subjectPresence)
			m.Data = []byte(`{"kind":"snapshot","replica":"evil"}`)
			return m
		}},
		{"forged", "cluster message ignored", func(int) *nats.Msg {
			data, _ := json.Marshal(fresh(kindSnapshot))
			m := nats.NewMsg(subjectPresence)
			m.Data = data
			m.Header.Set(macHeader, sign([]byte(strings.Repeat("x", 32)), "presence", string(data)))
			return m
		}},
		{"garbage", "cluster message ignored", func(i int) *nats.Msg {
			m := nats.NewMsg(subjectPresence)
			m.Data = []byte(strings.Repeat("\xff", i))
			m.Header.Set(macHeader, "00")
			return m
		}},
		{"a hello on the presence subject", "cluster message ignored: wrong kind", func(int) *nats.Msg {
			return signed(subjectPresence, fresh(kindHello))
		}},
		{"replayed", "cluster message ignored: replayed", func(int) *nats.Msg { return genuine }},
		{"unsigned call for snapshots", "call for snapshots ignored", func(int) *nats.Msg { return nats.NewMsg(subjectSnapshot) }},
		{"a snapshot on the call subject", "call for snapshots ignored: wrong kind", func(int) *nats.Msg {
			return signed(subjectSnapshot, fresh(kindSnapshot))
		}},
	} {
		for i := range n {
			if err := nc.PublishMsg(tc.msg(i)); err != nil {
				t.Fatalf("%s: %v", tc.what, err)
			}
		}
	}
	// A genuine message after them, on the same connection, arrives after
	// them.
	marker := fresh(kindUpdate)
	marker.Endpoints = []presence.Endpoint{online("marker", 100)}
	if err := nc.PublishMsg(signed(subjectPresence, marker)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the marker", func() bool { return routeOf(c1, "marker").Online })
	// The snapshot subject has its own subscription: its last call is in
	// when its count is.
	want := map[string]uint64{
		"cluster message ignored":                3 * n,
		"cluster message ignored: wrong kind":    n,
		"cluster message ignored: replayed":      n,
		"call for snapshots ignored":             n,
		"call for snapshots ignored: wrong kind": n,
	}
	counts := map[string]logging.LimitCount{}
	testkit.WaitUntil(t, "every call for snapshots counted", func() bool {
		for _, c := range limited.Counts() {
			counts[c.Key] = c
		}
		return counts["call for snapshots ignored: wrong kind"].Events == n
	})
	lines := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m struct{ Msg string }
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines[m.Msg]++
	}
	for key, events := range want {
		if c := counts[key]; c.Events != events || c.Suppressed != events-burst {
			t.Errorf("%q: counted %+v, want %d events", key, c, events)
		}
		if lines[key] > burst {
			t.Errorf("%q: %d lines, burst %d", key, lines[key], burst)
		}
	}
}
