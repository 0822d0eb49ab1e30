package cli

import (
	"fmt"
	"time"
)

// statusLine redraws one line on stderr while long work runs, at most ten
// times a second, and only on a terminal so pipes and logs stay clean.
type statusLine struct {
	a     *app
	on    bool
	last  time.Time
	drawn bool
}

func (a *app) statusLine() *statusLine {
	return &statusLine{a: a, on: a.stderrIsTerminal()}
}

func (s *statusLine) show(format string, args ...any) {
	if !s.on || time.Since(s.last) < 100*time.Millisecond {
		return
	}
	s.last = time.Now()
	s.drawn = true
	fmt.Fprintf(s.a.env.Stderr, "\r\x1b[K"+format, args...)
}

func (s *statusLine) done() {
	if s.drawn {
		fmt.Fprint(s.a.env.Stderr, "\r\x1b[K")
	}
}
