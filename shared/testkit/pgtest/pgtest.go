// Package pgtest runs a real PostgreSQL server for tests: one per test
// binary, started the first time a test asks for a database, in a
// temporary directory on a free loopback port, and a fresh database for
// each test. A test binary that uses it calls Main from its TestMain so the
// server stops when the tests end.
//
// A test that needs to stop the server — to see what an outage of the
// database does — starts one of its own with NewServer, and stops and
// starts it with Server.Stop and Server.Start.
//
// It is for tests and benchmark harnesses only: a harness, which has no
// testing.T, uses Launch and the error-returning methods of Server.
//
// PostgreSQL's server binaries are found with pg_config --bindir, then in
// /usr/lib/postgresql/*/bin (Debian's layout, newest first), then on PATH.
// Without them a test is skipped, naming the package to install. initdb
// and postgres refuse to run as root, so under uid 0 they run as an
// unprivileged user (postgres if it exists, else nobody).
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// readyBound only turns a server that never becomes ready into a failure
// that says so, instead of the test binary's timeout; it measures nothing.
const readyBound = 60 * time.Second

// server is the one running PostgreSQL of this test binary.
type server struct {
	dir  string
	port int
	cmd  *exec.Cmd
	logs *lockedBuffer
	exit chan struct{} // closed when the postgres process has exited
}

var (
	once    sync.Once
	srv     *server
	srvErr  error
	skipMsg string
	dbSeq   atomic.Int64
)

// Main runs the tests, then stops the server if one was started, and
// returns the exit code: func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	if srv != nil {
		srv.stop()
	}
	return code
}

// URL returns the URL of a new, empty database on the shared server,
// starting the server on first use. The test is skipped if PostgreSQL is
// not installed, and fails if it is but will not start.
func URL(t testing.TB) string {
	t.Helper()
	once.Do(start)
	if skipMsg != "" {
		t.Skip(skipMsg)
	}
	if srvErr != nil {
		t.Fatalf("pgtest: %v", srvErr)
	}
	return srv.newDatabase(t)
}

// newDatabase creates a new, empty database on s, dropped when t ends,
// and returns its URL.
func (s *server) newDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("test_%d_%d", os.Getpid(), dbSeq.Add(1))
	url, err := s.create(name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	ctx := context.Background()
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, s.url("postgres"))
		if err != nil {
			t.Logf("pgtest: drop database %s: %v", name, err)
			return
		}
		defer func() { _ = c.Close(ctx) }() // an admin session of a test server: nothing to lose
		// FORCE ends sessions a test left open (a store it did not close).
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("pgtest: drop database %s: %v", name, err)
		}
	})
	return url
}

// create makes an empty database name and returns its URL.
func (s *server) create(name string) (string, error) {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = admin.Close(ctx) }() // an admin session of a test server: nothing to lose
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database: %w", err)
	}
	return s.url(name), nil
}

// Server is a PostgreSQL server of one test's own, which the test may
// stop and start again to see what an outage does; the server URL shares
// must never stop under the other tests.
type Server struct {
	s    *server
	bin  string
	data string
	cred *syscall.Credential
	mu   sync.Mutex
}

// NewServer starts a server for t alone, stopped and removed when t
// ends. Like URL, it skips the test when PostgreSQL is not installed.
func NewServer(t testing.TB) *Server {
	t.Helper()
	if _, ok := binDir(); !ok {
		t.Skip("PostgreSQL server binaries not found: install the postgresql package (apt-get install postgresql)")
	}
	ps, err := Launch()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(ps.Close)
	return ps
}

// Launch starts a server of the caller's own, in a temporary directory
// on a free loopback port; Close stops and removes it.
func Launch() (*Server, error) {
	bin, ok := binDir()
	if !ok {
		return nil, errors.New("PostgreSQL server binaries (initdb, postgres) not found: install the postgresql package (apt-get install postgresql)")
	}
	s, err := launch(bin)
	if err != nil {
		return nil, err
	}
	cred, _ := credential() // launch got it already
	return &Server{s: s, bin: bin, data: filepath.Join(s.dir, "data"), cred: cred}, nil
}

// Close stops the server and removes its directory.
func (p *Server) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.s.stop()
}

// URL returns the URL of a new, empty database on the server, dropped
// when t ends (if the server runs then).
func (p *Server) URL(t testing.TB) string {
	t.Helper()
	p.mu.Lock()
	s := p.s
	p.mu.Unlock()
	return s.newDatabase(t)
}

// Database creates a new, empty database name on the server, kept until
// the server is closed, and returns its URL.
func (p *Server) Database(name string) (string, error) {
	p.mu.Lock()
	s := p.s
	p.mu.Unlock()
	return s.create(name)
}

// Stop shuts the server down as an operator's fast shutdown does — its
// sessions end with "terminating connection due to administrator
// command", and new connections are refused — and waits until it has
// exited. Stopping a stopped server does nothing.
func (p *Server) Stop(t testing.TB) {
	t.Helper()
	p.Halt()
}

// Halt is Stop for a caller without a testing.TB.
func (p *Server) Halt() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.s.halt()
}

// Start starts a stopped server again, on the same port with the same
// databases, and waits until it accepts connections. Starting a running
// server does nothing.
func (p *Server) Start(t testing.TB) {
	t.Helper()
	if err := p.Restart(); err != nil {
		t.Fatalf("pgtest: starting the server again: %v", err)
	}
}

// Restart is Start for a caller without a testing.TB.
func (p *Server) Restart() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.s.exit:
	default:
		return nil // running
	}
	s, err := runOn(p.bin, p.s.dir, p.data, p.cred, p.s.port)
	if err != nil {
		return err
	}
	p.s = s
	return nil
}

// url is the connection URL of database name.
func (s *server) url(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, name)
}

// binDir finds the directory holding initdb and postgres.
func binDir() (string, bool) {
	has := func(dir string) bool {
		for _, b := range []string{"initdb", "postgres"} {
			if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.IsDir() {
				return false
			}
		}
		return true
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); has(dir) {
			return dir, true
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin") // the pattern is valid
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, dir := range dirs {
		if has(dir) {
			return dir, true
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if dir := filepath.Dir(p); has(dir) {
			return dir, true
		}
	}
	return "", false
}

// versionOf reads N from /usr/lib/postgresql/N/bin, so 16 sorts above 9.
func versionOf(dir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64) // not a number sorts last
	return v
}

// start initialises and starts the server, once per binary.
func start() {
	bin, ok := binDir()
	if !ok {
		skipMsg = "PostgreSQL server binaries (initdb, postgres) not found via pg_config, /usr/lib/postgresql/*/bin or PATH: install the postgresql package (apt-get install postgresql)"
		return
	}
	srv, srvErr = launch(bin)
}

// launch runs initdb and postgres from bin; it retries on another port if
// the free one it picked was taken meanwhile.
func launch(bin string) (*server, error) {
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s, err := launchIn(bin, dir)
	if err != nil {
		_ = os.RemoveAll(dir) // what failed is the error to report
	}
	return s, err
}

// launchIn initialises a cluster in dir and starts it.
func launchIn(bin, dir string) (*server, error) {
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	if cred != nil {
		// The unprivileged user must own the directory to create the
		// cluster and its socket in it.
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	var lastErr error
	for range 3 {
		s, err := run(bin, dir, data, cred)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// run starts postgres on a free port and waits until it accepts
// connections.
func run(bin, dir, data string, cred *syscall.Credential) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return runOn(bin, dir, data, cred, port)
}

// runOn starts postgres on port and waits until it accepts connections.
func runOn(bin, dir, data string, cred *syscall.Credential, port int) (*server, error) {
	s := &server{dir: dir, port: port, logs: &lockedBuffer{}, exit: make(chan struct{})}
	// Durability is of no use to a test server; skipping fsync makes it
	// quicker. The socket goes to the temporary directory, not /run.
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=300")
	// Pdeathsig stops the server if the test binary dies without Main's
	// cleanup (a timeout panic, a kill).
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	s.cmd.Stdout = s.logs
	s.cmd.Stderr = s.logs
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	go func() {
		_ = s.cmd.Wait() // the exit is what matters; its logs say why
		close(s.exit)
	}()
	if err := s.waitReady(); err != nil {
		s.halt() // the directory stays for the next attempt
		return nil, err
	}
	return s, nil
}

// waitReady polls until the server accepts a connection, or fails early
// if it exits.
func (s *server) waitReady() error {
	deadline := time.Now().Add(readyBound)
	pause := 5 * time.Millisecond
	for {
		select {
		case <-s.exit:
			return fmt.Errorf("postgres exited during startup:\n%s", s.logs.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := pgx.Connect(ctx, s.url("postgres"))
		if err == nil {
			err = c.Ping(ctx)
			_ = c.Close(ctx) // a probe connection
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready after %v: %v\n%s", readyBound, err, s.logs.String())
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// stop shuts the server down (fast shutdown: it ends sessions) and removes
// its directory.
func (s *server) stop() {
	s.halt()
	_ = os.RemoveAll(s.dir) // a leftover temporary directory is harmless
}

// halt shuts the server down and waits for it to exit (at once when it
// has).
func (s *server) halt() {
	if s.cmd.Process != nil {
		select {
		case <-s.exit:
			return
		default:
		}
		_ = s.cmd.Process.Signal(syscall.SIGINT) // it may have exited already
		<-s.exit
	}
}

// credential is the unprivileged user to run PostgreSQL as when we are
// root, or nil.
func credential() (*syscall.Credential, error) {
	if os.Getuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
	}
	return nil, errors.New("running as root, and neither user postgres nor nobody exists to run PostgreSQL as")
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, err
	}
	return port, nil
}

// lockedBuffer collects the server's output, written by exec's copying
// goroutine and read by a failing test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
