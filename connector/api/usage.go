package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/usage"
)

// UsageReport is GET /api/usage (and `thread usage --json`): the range
// asked for (RFC 3339, null for an open end), the workflow it was narrowed
// to (or null), and the machine's model usage over it per workflow and in
// all (usage.Report; every total has usage.Totals' shape).
type UsageReport struct {
	Since    *string `json:"since"`
	Until    *string `json:"until"`
	Workflow *string `json:"workflow"`
	usage.Report
}

// NewUsageReport wraps a report with the filter it was made with.
func NewUsageReport(f usage.Filter, rep usage.Report) UsageReport {
	out := UsageReport{Since: rfc3339(f.Since), Until: rfc3339(f.Until), Report: rep}
	if f.Workflow != "" {
		out.Workflow = &f.Workflow
	}
	return out
}

func rfc3339(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.Format(time.RFC3339)
	return &s
}

// prices reads config.prices; a workflow.yaml that cannot be read leaves
// usage unpriced (and is logged) rather than failing the read.
func (s *server) prices() registry.Prices {
	p, err := usage.LoadPrices(s.opts.Layout)
	if err != nil {
		s.log.Warn("model usage shown without cost: workflow.yaml unreadable", "err", err)
	}
	return p
}

// addUsage sets each step record's usage (role records in order, then the
// result record as the step after them) and returns the thread's total.
func (s *server) addUsage(rec threads.Record, records []any) (usage.Totals, error) {
	recs, err := usage.ReadThread(s.opts.Layout, rec.BundleHash, rec.ThreadID)
	if err != nil {
		return usage.Totals{}, err
	}
	spent := usage.Summarize(recs, s.prices())
	step := 0
	for i, r := range records {
		switch r := r.(type) {
		case RoleRecord:
			step++
			r.Usage = spent.Step(step)
			records[i] = r
		case ResultRecord:
			r.Usage = spent.Step(step + 1)
			records[i] = r
		}
	}
	return spent.Total, nil
}

// machineUsage is GET /api/usage?since=&until=&workflow=: the model usage
// of this machine's threads per workflow. since and until are RFC 3339
// times or Unix milliseconds; until is exclusive.
func (s *server) machineUsage(c echo.Context) error {
	var f usage.Filter
	var err error
	if f.Since, err = queryTime(c, "since"); err != nil {
		return err
	}
	if f.Until, err = queryTime(c, "until"); err != nil {
		return err
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return fail(http.StatusBadRequest, "since must be before until")
	}
	if name := c.QueryParam("workflow"); name != "" {
		if err := registry.ValidateName(name); err != nil {
			return fail(http.StatusBadRequest, "%s", err.Error())
		}
		f.Workflow = name
	}
	rep, err := usage.Machine(s.opts.Layout, f, s.prices())
	if err != nil {
		return s.internal(c, err)
	}
	return c.JSON(http.StatusOK, NewUsageReport(f, rep))
}

// queryTime reads an RFC 3339 time or Unix milliseconds; absent is zero.
func queryTime(c echo.Context, name string) (time.Time, error) {
	v := c.QueryParam(name)
	if v == "" {
		return time.Time{}, nil
	}
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms >= 0 {
		return time.UnixMilli(ms), nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	return time.Time{}, fail(http.StatusBadRequest, "%s must be an RFC 3339 time or Unix milliseconds: %q", name, v)
}
