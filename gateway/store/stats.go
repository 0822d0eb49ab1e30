package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// dayMicros is a UTC day's length in microseconds, SQLite's unit of time.
const dayMicros = int64(24 * time.Hour / time.Microsecond)

// ThreadStats implements Store. It reads one aggregate (per group, day
// and status) over the range, which the updated_at index bounds, and one
// row per group for its median: the cost follows the range's threads and
// the number of groups, never the whole history.
func (s *sqlStore) ThreadStats(ctx context.Context, q StatsQuery) ([]GroupStats, error) {
	if q.By != StatsByMachine && q.By != StatsByWorkflow {
		return nil, fmt.Errorf("store: thread stats: group by %q: want %s or %s", q.By, StatsByMachine, StatsByWorkflow)
	}
	if q.Since.IsZero() || q.Until.IsZero() || !q.Since.Before(q.Until) {
		return nil, errors.New("store: thread stats: the range needs a since before its until")
	}
	if q.Until.Sub(q.Since) > MaxStatsRange {
		return nil, fmt.Errorf("store: thread stats: the range is longer than %d days", int(MaxStatsRange/(24*time.Hour)))
	}
	col := string(q.By) // one of two names checked above: safe to write into the statement
	day := fmt.Sprintf("(updated_at / %d)", dayMicros)
	if s.backend == BackendPostgres {
		day = "floor(extract(epoch FROM updated_at) / 86400)::bigint"
	}
	ended := "'" + strings.Join(EndedStatuses, "', '") + "'"
	var out []GroupStats
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, s.q(fmt.Sprintf(`SELECT %s, %s, status, count(*), CAST(sum(tokens) AS BIGINT), sum(cost)
FROM threads WHERE updated_at >= $1 AND updated_at < $2 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`, col, day)),
			s.tv(q.Since), s.tv(q.Until))
		if err != nil {
			return err
		}
		defer closeQuietly(rows)
		for rows.Next() {
			var key, status string
			var dayN int64
			var n int
			var tokens int64
			var cost float64
			if err := rows.Scan(&key, &dayN, &status, &n, &tokens, &cost); err != nil {
				return err
			}
			if len(out) == 0 || out[len(out)-1].Key != key {
				out = append(out, GroupStats{Key: key})
			}
			g := &out[len(out)-1]
			d := time.Unix(dayN*86400, 0).UTC()
			if len(g.Days) == 0 || !g.Days[len(g.Days)-1].Day.Equal(d) {
				g.Days = append(g.Days, DayCount{Day: d, ByStatus: map[string]int{}})
			}
			g.Days[len(g.Days)-1].ByStatus[status] += n
			g.Threads += n
			if slices.Contains(EndedStatuses, status) {
				g.Ended += n
			}
			if status == "completed" {
				g.Completed += n
			}
			g.Tokens += tokens
			g.Cost += cost
		}
		if err := rows.Err(); err != nil {
			return err
		}
		median := s.q(fmt.Sprintf(`SELECT duration_ns FROM threads WHERE %s = $1 AND updated_at >= $2 AND updated_at < $3 AND status IN (%s)
ORDER BY duration_ns LIMIT 1 OFFSET $4`, col, ended))
		for i := range out {
			g := &out[i]
			if g.Ended == 0 {
				continue
			}
			var ns int64
			if err := tx.QueryRowContext(ctx, median, g.Key, s.tv(q.Since), s.tv(q.Until), (g.Ended-1)/2).Scan(&ns); err != nil {
				return fmt.Errorf("median of %s: %w", g.Key, err)
			}
			g.MedianDuration = time.Duration(ns)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: thread stats by %s: %w", q.By, err)
	}
	return out, nil
}
