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

// ThreadStats implements Store. It reads two queries over the range,
// which the updated_at index bounds: an aggregate per group, day and
// status, and each group's median duration. The cost follows the range's
// threads, never the whole history.
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
		// Each group's median in one pass: its ended threads numbered by
		// duration, the middle one kept (the lower of an even count).
		rows, err = tx.QueryContext(ctx, s.q(fmt.Sprintf(`SELECT grp, duration_ns FROM (
SELECT %s AS grp, duration_ns, row_number() OVER (PARTITION BY %s ORDER BY duration_ns) AS n, count(*) OVER (PARTITION BY %s) AS ended
FROM threads WHERE updated_at >= $1 AND updated_at < $2 AND status IN (%s)) AS ranked WHERE n = (ended + 1) / 2`, col, col, col, ended)),
			s.tv(q.Since), s.tv(q.Until))
		if err != nil {
			return err
		}
		defer closeQuietly(rows)
		medians := map[string]time.Duration{}
		for rows.Next() {
			var key string
			var ns int64
			if err := rows.Scan(&key, &ns); err != nil {
				return err
			}
			medians[key] = time.Duration(ns)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for i := range out {
			out[i].MedianDuration = medians[out[i].Key]
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: thread stats by %s: %w", q.By, err)
	}
	return out, nil
}
