// Package natstest runs an embedded NATS server for tests of cluster mode.
// It is for tests only: importing it links the whole nats-server, which
// no binary of this module needs, so only _test.go files (and the load
// harness) should import it.
package natstest

import (
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// readyTimeout bounds the wait for the server to accept connections; it
// is a startup bound, not a measurement.
const readyTimeout = 10 * time.Second

// Start runs a NATS server on a random loopback port until the test ends.
// Its ClientURL is what replicas connect to; Shutdown cuts them off.
func Start(t testing.TB) *natsserver.Server {
	t.Helper()
	return StartOn(t, natsserver.RANDOM_PORT)
}

// StartOn is Start on a given port: a server that comes back where
// another was.
func StartOn(t testing.TB, port int) *natsserver.Server {
	t.Helper()
	s, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(readyTimeout) {
		t.Fatal("embedded NATS server not ready")
	}
	return s
}
