package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// Config says which database to open.
type Config struct {
	// DataDir holds the SQLite file, gateway.db, when DatabaseURL is empty.
	// It is created if missing.
	DataDir string
	// DatabaseURL, when set, selects PostgreSQL: a postgres:// URL or a
	// keyword/value string, as pgx accepts.
	DatabaseURL string
	// BusyTimeout is how long a SQLite statement waits for a lock held by
	// another connection before failing; 10 s if zero.
	BusyTimeout time.Duration
	// MaxConns bounds the PostgreSQL connection pool (not counting the one
	// LISTEN connection); pgx's default if zero.
	MaxConns int32
	// MaxTotal bounds the count of matches a search makes (ThreadPage.Total):
	// counting every match of a broad query over a million threads costs
	// more than finding the page, so past it the total only says "at
	// least". DefaultMaxTotal if zero.
	MaxTotal int
	// MaxThreadsPerMachine and MaxBytesPerMachine are a machine's share
	// of the store: past either, SyncThreads forgets the machine's oldest
	// threads (bounds.go). DefaultMaxThreadsPerMachine and
	// DefaultMaxBytesPerMachine if zero.
	MaxThreadsPerMachine int
	MaxBytesPerMachine   int64
	// Now is the clock for times the store fills in (revocations, machines
	// seen, audit entries without a time); time.Now if nil. Tests set it.
	Now func() time.Time
}

// SQLiteFile is the name of the SQLite database inside Config.DataDir.
const SQLiteFile = "gateway.db"

// Open opens (creating if need be) the database cfg names and migrates its
// schema to the newest version this binary knows. It fails if the database
// is at a newer version, or cannot be reached.
func Open(ctx context.Context, cfg Config) (Store, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxTotal <= 0 {
		cfg.MaxTotal = DefaultMaxTotal
	}
	if cfg.MaxThreadsPerMachine <= 0 {
		cfg.MaxThreadsPerMachine = DefaultMaxThreadsPerMachine
	}
	if cfg.MaxBytesPerMachine <= 0 {
		cfg.MaxBytesPerMachine = DefaultMaxBytesPerMachine
	}
	if cfg.DatabaseURL != "" {
		return openPostgres(ctx, cfg)
	}
	if cfg.DataDir == "" {
		return nil, errors.New("store: no data directory and no database URL")
	}
	return openSQLite(ctx, cfg)
}

//go:embed migrations
var migrations embed.FS

// migrate brings db's schema to the newest embedded version for dialect,
// after refusing a schema newer than that.
func migrate(ctx context.Context, db *sql.DB, dialect goose.Dialect, dir string) error {
	fsys, err := fs.Sub(migrations, "migrations/"+dir)
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	opts := []goose.ProviderOption{goose.WithDisableGlobalRegistry(true)}
	if dialect == goose.DialectPostgres {
		// Several gateways starting at once against one database must not
		// migrate it concurrently: an advisory lock makes them take turns.
		// goose's default probes the lock every 5 s; a gateway starting
		// next to another would wait that long for a migration of a
		// fraction of a second. Every second, for up to 5 minutes.
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
		if err != nil {
			return fmt.Errorf("store: migration lock: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(dialect, db, fsys, opts...)
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("store: read schema version: %w", err)
	}
	if known := newestVersion(p); current > known {
		return fmt.Errorf("store: the database schema is at version %d, newer than version %d, the newest this gateway knows: upgrade the gateway (an older one could damage data the newer schema holds)", current, known)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("store: migrate schema from version %d: %w", current, err)
	}
	return nil
}

// newestVersion is the highest migration version p holds.
func newestVersion(p *goose.Provider) int64 {
	var v int64
	for _, s := range p.ListSources() {
		v = max(v, s.Version)
	}
	return v
}

// schemaVersion reads the version goose recorded.
func schemaVersion(ctx context.Context, db *sql.DB, dialect goose.Dialect, dir string) (int64, error) {
	fsys, err := fs.Sub(migrations, "migrations/"+dir)
	if err != nil {
		return 0, fmt.Errorf("store: migrations: %w", err)
	}
	p, err := goose.NewProvider(dialect, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return 0, fmt.Errorf("store: migrations: %w", err)
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: read schema version: %w", err)
	}
	return v, nil
}
