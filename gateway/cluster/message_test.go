package cluster

import (
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/presence"
)

var testKey = []byte(strings.Repeat("k", 32))

func validMessage(now time.Time) message {
	return message{
		Kind: kindSnapshot, Replica: "r1", Advertise: "http://10.0.0.1:8080", Sent: now.UnixMilli(),
		Endpoints: []presence.Endpoint{{Name: "laptop", Status: presence.Online, ConnectedAt: 1}},
	}
}

func TestMessageRoundTrip(t *testing.T) {
	t.Parallel()
	now := time.Now()
	data, mac, err := encode(testKey, validMessage(now))
	if err != nil {
		t.Fatal(err)
	}
	m, err := decode(testKey, data, mac, now)
	if err != nil {
		t.Fatal(err)
	}
	if m.Replica != "r1" || len(m.Endpoints) != 1 || m.Endpoints[0].Name != "laptop" {
		t.Fatalf("decoded %+v", m)
	}
}

// badMessage is a message decode must refuse, and the error it must give.
type badMessage struct {
	data []byte
	mac  string
	want string
}

func TestDecodeRefusesBadMessages(t *testing.T) {
	t.Parallel()
	now := time.Now()
	signed := func(want string, mutate func(*message)) badMessage {
		m := validMessage(now)
		mutate(&m)
		data, mac, err := encode(testKey, m)
		if err != nil {
			t.Fatal(err)
		}
		return badMessage{data, mac, want}
	}
	signedRaw := func(want, raw string) badMessage {
		return badMessage{[]byte(raw), sign(testKey, "presence", raw), want}
	}
	good := signed("", func(*message) {})
	cases := map[string]badMessage{
		"unsigned":           {good.data, "", "unsigned"},
		"forged mac":         {good.data, strings.Repeat("0", 64), "bad signature"},
		"other key":          {good.data, sign([]byte(strings.Repeat("x", 32)), "presence", string(good.data)), "bad signature"},
		"tampered":           {append([]byte(" "), good.data...), good.mac, "bad signature"},
		"not json":           signedRaw("malformed", "{nope"),
		"json array":         signedRaw("malformed", "[]"),
		"unknown kind":       signed("unknown message kind", func(m *message) { m.Kind = "takeover" }),
		"no replica":         signed("without a replica", func(m *message) { m.Replica = "" }),
		"stale":              signed("old", func(m *message) { m.Sent = now.Add(-time.Hour).UnixMilli() }),
		"from the future":    signed("old", func(m *message) { m.Sent = now.Add(time.Hour).UnixMilli() }),
		"no advertise":       signed("advertise", func(m *message) { m.Advertise = "" }),
		"https advertise":    signed("must be http", func(m *message) { m.Advertise = "https://a:1" }),
		"advertise no port":  signed("host and a port", func(m *message) { m.Advertise = "http://a" }),
		"advertise path":     signed("only http://host:port", func(m *message) { m.Advertise = "http://a:1/x" }),
		"advertise user":     signed("only http://host:port", func(m *message) { m.Advertise = "http://u:p@a:1" }),
		"bad name":           signed("invalid connector name", func(m *message) { m.Endpoints[0].Name = "../etc" }),
		"empty name":         signed("invalid connector name", func(m *message) { m.Endpoints[0].Name = "" }),
		"bad status":         signed("status", func(m *message) { m.Endpoints[0].Status = "maybe" }),
		"negative part":      signed("parts", func(m *message) { m.Part = -1 }),
		"update in parts":    signed("parts", func(m *message) { m.Kind, m.More = kindUpdate, true }),
		"empty registration": signed("sealed registration", func(m *message) { m.Kind = kindRegistration }),
		"sealed snapshot":    signed("sealed registration", func(m *message) { m.Sealed = "x" }),
		"bad instance":       signed("invalid instance", func(m *message) { m.Endpoints[0].Instance = "a b" }),
		"bad fingerprint":    signed("invalid instance", func(m *message) { m.Endpoints[0].Instance = "key:" + strings.Repeat("z", 32) }),
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := decode(testKey, c.data, c.mac, now)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
			if m.Replica != "" || m.Endpoints != nil {
				t.Fatalf("a refused message leaked content: %+v", m)
			}
		})
	}
}

// What replicas say of an instance is its fingerprint. One of an older
// version announces a bare instance id: this replica keeps it as the id's
// fingerprint, so the two compare as their connections would, and shows
// the id nowhere.
func TestAnnouncedInstancesAreFingerprints(t *testing.T) {
	t.Parallel()
	now := time.Now()
	proven, err := presence.InstanceOf("inst-a", strings.Repeat("a", 52))
	if err != nil {
		t.Fatal(err)
	}
	byID, _ := presence.InstanceOf("inst-a", "")
	for announced, want := range map[string]string{"": "", proven: proven, byID: byID, "inst-a": byID} {
		m := validMessage(now)
		m.Endpoints[0].Instance = announced
		data, mac, err := encode(testKey, m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decode(testKey, data, mac, now)
		if err != nil || got.Endpoints[0].Instance != want {
			t.Errorf("announced %q: kept %+v, %v; want %q", announced, got.Endpoints, err, want)
		}
	}
}

func TestLeaveNeedsNoAdvertise(t *testing.T) {
	t.Parallel()
	now := time.Now()
	data, mac, _ := encode(testKey, message{Kind: kindLeave, Replica: "r1", Sent: now.UnixMilli()})
	if _, err := decode(testKey, data, mac, now); err != nil {
		t.Fatal(err)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	ok := Options{NATS: "nats://127.0.0.1:4222", ReplicaID: "r1", Advertise: "http://127.0.0.1:8080", Key: testKey}
	for name, mutate := range map[string]func(*Options){
		"no nats":         func(o *Options) { o.NATS = "" },
		"no replica":      func(o *Options) { o.ReplicaID = "" },
		"short key":       func(o *Options) { o.Key = []byte("short") },
		"bad advertise":   func(o *Options) { o.Advertise = "127.0.0.1:8080" },
		"empty advertise": func(o *Options) { o.Advertise = "" },
	} {
		o := ok
		mutate(&o)
		if _, err := New(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(ok); err != nil {
		t.Fatal(err)
	}
}
