package executor

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Tags of the debug log lines the executor writes (8 Crockford characters,
// as the original's log tags).
const (
	TagStarted  = "T9HQ2KHM"
	TagStep     = "N7BW4YHQ"
	TagFinished = "R2XK8MDA"
	TagError    = "Q3MN8YKW"
	TagKilled   = "V8JX4NP2"
)

// DebugLog appends {tag, content, timestamp} lines to a thread's
// .info.jsonl. It is safe for concurrent use.
type DebugLog struct {
	path string
	now  func() time.Time
	mu   sync.Mutex
}

// NewDebugLog writes to path, creating its directory on first write.
func NewDebugLog(path string, now func() time.Time) *DebugLog {
	return &DebugLog{path: path, now: now}
}

// logLine is the original's record shape.
type logLine struct {
	Tag       string `json:"tag"`
	Content   string `json:"content"`
	Timestamp int64  `json:"timestamp"`
}

// Write appends one line. Errors are dropped: a debug log must never stop
// a thread.
func (l *DebugLog) Write(tag, content string) {
	b, err := json.Marshal(logLine{Tag: tag, Content: content, Timestamp: l.now().UnixMilli()})
	if err != nil {
		return
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if os.IsNotExist(err) {
		if os.MkdirAll(filepath.Dir(l.path), 0o755) == nil {
			f, err = os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		}
	}
	if err != nil {
		return
	}
	f.Write(b)
	f.Close()
}
