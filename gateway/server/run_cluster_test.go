package server

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

func clusterConfig(natsURL, advertise, replicaID string, key []byte) Config {
	return Config{
		Options: Options{Heartbeat: time.Second, RequestTimeout: time.Second},
		NATS:    natsURL, Advertise: advertise, ReplicaID: replicaID, SigningKey: key,
	}
}

func TestClusterDefaultsComeFromTheListenAddress(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("k", 32))
	hostname, _ := os.Hostname()
	for listen, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080",
		"0.0.0.0:9000":   "http://" + net.JoinHostPort(hostname, "9000"),
		"[::]:9001":      "http://" + net.JoinHostPort(hostname, "9001"),
	} {
		addr, _ := net.ResolveTCPAddr("tcp", listen)
		cl, err := newCluster(addr, clusterConfig("nats://127.0.0.1:4222", "", "", key), nil)
		if err != nil {
			t.Fatalf("%s: %v", listen, err)
		}
		_, port, _ := net.SplitHostPort(listen)
		if cl.Advertise() != want || cl.ReplicaID() != net.JoinHostPort(hostname, port) {
			t.Errorf("%s: advertise %q, replica %q", listen, cl.Advertise(), cl.ReplicaID())
		}
	}
	addr, _ := net.ResolveTCPAddr("tcp", "0.0.0.0:8080")
	cl, err := newCluster(addr, clusterConfig("nats://127.0.0.1:4222", "http://gw-1.internal:8080", "gw-1", key), nil)
	if err != nil || cl.Advertise() != "http://gw-1.internal:8080" || cl.ReplicaID() != "gw-1" {
		t.Fatalf("explicit: %v %v", cl, err)
	}
}

func TestClusterRefusesBadSettings(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("k", 32))
	addr, _ := net.ResolveTCPAddr("tcp", "127.0.0.1:8080")
	for _, c := range []struct {
		key             []byte
		advertise, want string
	}{
		{key, "gw-1:8080", "advertise"},
		{key, "https://gw-1:8080", "must be http"},
		{key, "http://gw-1", "port"},
		{nil, "", "key"},
	} {
		if _, err := newCluster(addr, clusterConfig("nats://127.0.0.1:4222", c.advertise, "", c.key), nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("advertise %q, key %d bytes: err %v, want %q", c.advertise, len(c.key), err, c.want)
		}
	}
}
