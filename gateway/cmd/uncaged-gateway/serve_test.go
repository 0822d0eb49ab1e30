package main

import (
	"strings"
	"testing"
)

// A read limit below the tunnel's largest message would drop every busy
// tunnel; serve refuses it before listening.
func TestServeRefusesAReadLimitBelowTheTunnelMessage(t *testing.T) {
	cmd := serveCmd()
	cmd.SetArgs([]string{"--listen", "127.0.0.1:0", "--ws-read-limit", "65536"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "--ws-read-limit must be at least") {
		t.Fatalf("err = %v", err)
	}
}
