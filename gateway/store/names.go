package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// NameBinding records that a connector token has held a connector name.
// While it exists the shared secret may not use the name (connect,
// register, unregister), whatever the gateway's memory says: the record
// outlives restarts and reaches every replica.
//
// Only a revocation ends it: when a name's last unrevoked connector token
// is revoked, by any process and by any of RevokeToken,
// RevokeConnectorTokens and RevokeKind, the database deletes the binding
// in the same transaction (a trigger), and the revocation's
// ChangeRevocation tells the subscribers to read the bindings again.
type NameBinding struct {
	// Name is the connector name.
	Name string
	// TokenID is the token that first held it; empty for a token issued
	// before tokens had ids.
	TokenID string
	// BoundAt is when it was first held.
	BoundAt time.Time
}

// NameBindings is the part of Store that keeps NameBinding records.
type NameBindings interface {
	// BindName records that the connector token tokenID holds name and
	// reports whether the binding is new; an existing one is kept as it
	// is. A token that is revoked, or that the store has no record of,
	// binds nothing (ErrNotFound): a revocation committed first must not
	// be undone by a connection it raced with. An empty tokenID (a token
	// from before tokens had ids) binds unchecked.
	BindName(ctx context.Context, name, tokenID string) (created bool, err error)
	// NameBinding returns one binding (ErrNotFound when the name is free).
	NameBinding(ctx context.Context, name string) (NameBinding, error)
	// ListNameBindings returns every binding, by name.
	ListNameBindings(ctx context.Context) ([]NameBinding, error)
}

const nameBindingCols = "name, token_id, bound_at"

func scanNameBinding(row scanner) (NameBinding, error) {
	var b NameBinding
	err := row.Scan(&b.Name, &b.TokenID, timeDest{&b.BoundAt})
	return b, err
}

// BindName implements NameBindings.
func (s *sqlStore) BindName(ctx context.Context, name, tokenID string) (bool, error) {
	if err := checkMachineName(name); err != nil {
		return false, fmt.Errorf("store: bind name: %w", err)
	}
	created := false
	err := s.write(ctx, "bind name "+name, func(tx *sql.Tx) ([]Change, error) {
		if tokenID != "" {
			// PostgreSQL: lock the token's row, so a revocation waits for
			// this binding's commit and its trigger then sees (and
			// releases) it. SQLite has one writer at a time already.
			lock := ""
			if s.backend == BackendPostgres {
				lock = " FOR UPDATE"
			}
			var one int
			err := tx.QueryRowContext(ctx, s.q(`SELECT 1 FROM tokens WHERE id = $1 AND kind = 'connector' AND name = $2 AND revoked_at IS NULL`+lock), tokenID, name).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return nil, fmt.Errorf("token %s is revoked, unknown, or not a connector token for %s: %w", tokenID, name, ErrNotFound)
			}
			if err != nil {
				return nil, err
			}
		}
		res, err := tx.ExecContext(ctx, s.q(`INSERT INTO name_bindings (`+nameBindingCols+`) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING`),
			name, tokenID, s.tv(s.now()))
		if err != nil {
			return nil, err
		}
		n, err := res.RowsAffected()
		if err != nil || n == 0 {
			return nil, err
		}
		created = true
		return []Change{{Kind: ChangeBinding, IDs: []string{name}}}, nil
	})
	if err != nil {
		return false, err
	}
	return created, nil
}

// NameBinding implements NameBindings.
func (s *sqlStore) NameBinding(ctx context.Context, name string) (NameBinding, error) {
	b, err := scanNameBinding(s.r.QueryRowContext(ctx, s.q(`SELECT `+nameBindingCols+` FROM name_bindings WHERE name = $1`), name))
	if errors.Is(err, sql.ErrNoRows) {
		return NameBinding{}, fmt.Errorf("store: name binding %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return NameBinding{}, fmt.Errorf("store: name binding %s: %w", name, err)
	}
	return b, nil
}

// ListNameBindings implements NameBindings.
func (s *sqlStore) ListNameBindings(ctx context.Context) ([]NameBinding, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+nameBindingCols+` FROM name_bindings ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: list name bindings: %w", err)
	}
	defer closeQuietly(rows)
	var out []NameBinding
	for rows.Next() {
		b, err := scanNameBinding(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list name bindings: %w", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list name bindings: %w", err)
	}
	return out, nil
}
