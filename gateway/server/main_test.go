package server

import (
	"os"
	"testing"

	"github.com/uncaged/workflow/shared/testkit/pgtest"
)

// TestMain stops the PostgreSQL server the store tests start (pgtest).
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
