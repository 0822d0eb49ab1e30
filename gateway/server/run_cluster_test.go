package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/auth"
)

func TestClusterDefaultsComeFromTheListenAddress(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(auth.GenerateKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	hostname, _ := os.Hostname()
	for listen, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080",
		"0.0.0.0:9000":   "http://" + net.JoinHostPort(hostname, "9000"),
		"[::]:9001":      "http://" + net.JoinHostPort(hostname, "9001"),
	} {
		addr, _ := net.ResolveTCPAddr("tcp", listen)
		cl, err := newCluster(addr, keyFile, "nats://127.0.0.1:4222", "", "", time.Second, time.Second, nil)
		if err != nil {
			t.Fatalf("%s: %v", listen, err)
		}
		_, port, _ := net.SplitHostPort(listen)
		if cl.Advertise() != want || cl.ReplicaID() != net.JoinHostPort(hostname, port) {
			t.Errorf("%s: advertise %q, replica %q", listen, cl.Advertise(), cl.ReplicaID())
		}
	}
	addr, _ := net.ResolveTCPAddr("tcp", "0.0.0.0:8080")
	cl, err := newCluster(addr, keyFile, "nats://127.0.0.1:4222", "http://gw-1.internal:8080", "gw-1", time.Second, time.Second, nil)
	if err != nil || cl.Advertise() != "http://gw-1.internal:8080" || cl.ReplicaID() != "gw-1" {
		t.Fatalf("explicit: %v %v", cl, err)
	}
}

func TestClusterRefusesBadSettings(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "key")
	os.WriteFile(keyFile, []byte(auth.GenerateKey()), 0o600)
	addr, _ := net.ResolveTCPAddr("tcp", "127.0.0.1:8080")
	for _, c := range []struct{ keyFile, advertise, want string }{
		{keyFile, "gw-1:8080", "advertise"},
		{keyFile, "https://gw-1:8080", "must be http"},
		{keyFile, "http://gw-1", "port"},
		{filepath.Join(t.TempDir(), "missing"), "", "key"},
	} {
		if _, err := newCluster(addr, c.keyFile, "nats://127.0.0.1:4222", c.advertise, "", time.Second, time.Second, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("advertise %q, key %s: err %v, want %q", c.advertise, c.keyFile, err, c.want)
		}
	}
}
