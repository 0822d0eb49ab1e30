// Package notify sends the gateway's webhooks about threads: when a
// thread on any machine starts waiting, fails or completes, each
// configured receiver gets an HTTP POST, signed with HMAC-SHA256 over the
// body (X-Uncaged-Signature: sha256=<hex>, verified as GitHub's webhooks
// are), as JSON or in the form Slack's incoming webhooks take.
//
// The store decides which notifications to send, in the transaction that
// stores a thread's new status, and keeps each one until it is delivered
// or given up on (gateway/store's Notifications). A Sender claims the due
// ones — a lease in the shared database, so one replica of a cluster
// sends each — posts them, and records the outcome; a failed attempt is
// tried again with exponential backoff and jitter, MaxAttempts times in
// all, over more than half an hour. A gateway restarted picks up what is
// pending. A sender that dies between the receiver's answer and its
// record sends that notification again once its lease lapses: receivers
// that must not act twice keep the X-Uncaged-Delivery id.
package notify

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/uncaged/workflow/gateway/store"
)

// Headers of every request.
const (
	// SignatureHeader carries "sha256=" and the hex HMAC-SHA256 of the
	// body under the shared secret.
	SignatureHeader = "X-Uncaged-Signature"
	// EventHeader names the event: thread.waiting, thread.failed,
	// thread.completed.
	EventHeader = "X-Uncaged-Event"
	// DeliveryHeader is the notification's id, the same on every attempt.
	DeliveryHeader = "X-Uncaged-Delivery"
)

// Format is the body's form.
type Format string

const (
	// FormatJSON is the gateway's own body (Payload).
	FormatJSON Format = "json"
	// FormatSlack is {"text": ...}, as Slack's (and Mattermost's,
	// Discord's /slack) incoming webhooks take.
	FormatSlack Format = "slack"
)

// ParseFormat reads --notify-format.
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(strings.TrimSpace(s))); f {
	case "", FormatJSON:
		return FormatJSON, nil
	case FormatSlack:
		return f, nil
	}
	return "", fmt.Errorf("unknown format %q (json or slack)", s)
}

// Target is one receiver.
type Target struct {
	// URL is where it is posted; it may hold a secret (an incoming
	// webhook's path, a token in the query): never log it, log Label.
	URL string
	// Label is its scheme and host, what may be shown and logged.
	Label string
	// Key names it in the store: a hash of the URL, so the URL is never
	// stored and the same URL has the same key on every replica.
	Key string
}

// ParseTargets reads the --notify-url values: absolute http or https URLs
// with a host, each once. The error names the receiver by its label only.
func ParseTargets(raw []string) ([]Target, error) {
	var out []Target
	seen := map[string]bool{}
	for i, s := range raw {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("receiver %d: not a URL", i+1) // url's error quotes the URL
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.Opaque != "" {
			return nil, fmt.Errorf("receiver %d (%s): not an http:// or https:// URL with a host", i+1, Redact(u))
		}
		if u.Fragment != "" {
			return nil, fmt.Errorf("receiver %d (%s): a URL with a #fragment, which is never sent", i+1, Redact(u))
		}
		full := u.String()
		if seen[full] {
			return nil, fmt.Errorf("receiver %d (%s): given twice", i+1, Redact(u))
		}
		seen[full] = true
		sum := sha256.Sum256([]byte(full))
		out = append(out, Target{URL: full, Label: Redact(u), Key: "sha256:" + hex.EncodeToString(sum[:16])})
	}
	return out, nil
}

// Redact is what may be logged of a URL: its scheme and host. Paths and
// queries of webhook URLs are secrets.
func Redact(u *url.URL) string {
	if u == nil || u.Host == "" {
		return "(no host)"
	}
	return u.Scheme + "://" + u.Host
}

// ParseOn reads the --notify-on values, each a comma-separated list of
// statuses (store.NotifyStatuses); none is all of them.
func ParseOn(raw []string) ([]string, error) {
	var out []string
	for _, v := range raw {
		for w := range strings.SplitSeq(v, ",") {
			w = strings.ToLower(strings.TrimSpace(w))
			if w == "" {
				continue
			}
			if !slices.Contains(store.NotifyStatuses, w) {
				return nil, fmt.Errorf("unknown status %q (one of %s)", w, strings.Join(store.NotifyStatuses, ", "))
			}
			if !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
	}
	if len(out) == 0 {
		return slices.Clone(store.NotifyStatuses), nil
	}
	return out, nil
}

// MaxSecret bounds the secret file: a key, not a document.
const MaxSecret = 4096

// ReadSecret reads the signing secret from a file: its content less
// surrounding white space (the newline editors add), which must leave
// something.
func ReadSecret(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only
	b, err := io.ReadAll(io.LimitReader(f, MaxSecret+1))
	switch {
	case err != nil:
		return nil, err
	case len(b) > MaxSecret:
		return nil, fmt.Errorf("%s is longer than %d bytes: not a secret", path, MaxSecret)
	}
	secret := bytes.TrimSpace(b)
	if len(secret) == 0 {
		return nil, fmt.Errorf("%s is empty", path)
	}
	return secret, nil
}

// Config is what the gateway notifies of and how.
type Config struct {
	// Targets are the receivers; none, and nothing is sent.
	Targets []Target
	// On are the statuses notified of (store.NotifyStatuses).
	On []string
	// Secret signs every body; nil sends no signature.
	Secret []byte
	// Format is the body's form.
	Format Format
	// PublicURL is where users reach the gateway's dashboard: the body's
	// link is PublicURL/#/m/<machine>/threads/<id>; empty, and there is
	// no link.
	PublicURL string
}

// Settings are the store's side of the configuration.
func (c Config) Settings() store.NotifySettings {
	var n store.NotifySettings
	for _, t := range c.Targets {
		n.Targets = append(n.Targets, store.NotifyTarget{Key: t.Key, Label: t.Label, On: slices.Clone(c.On)})
	}
	return n
}

// ParsePublicURL reads --public-url: an absolute http or https URL,
// without query or fragment; the trailing slash is dropped.
func ParsePublicURL(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%q is not an http:// or https:// URL with a host and no query, fragment or user", s)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// Payload is the JSON body (FormatJSON).
type Payload struct {
	// Delivery is the notification's id, as in DeliveryHeader.
	Delivery int64 `json:"delivery"`
	// Event is thread.<status>.
	Event string `json:"event"`
	// Machine, Thread, Workflow and Status are the thread's.
	Machine  string `json:"machine"`
	Thread   string `json:"thread"`
	Workflow string `json:"workflow"`
	Status   string `json:"status"`
	// Question is what a waiting thread asks, Summary what a finished one
	// says; either may be empty.
	Question string `json:"question,omitempty"`
	Summary  string `json:"summary,omitempty"`
	// UpdatedAt is the thread's time of the change.
	UpdatedAt time.Time `json:"updatedAt"`
	// URL opens the thread in the dashboard; empty without a public URL.
	URL string `json:"url,omitempty"`
}

// Event is the event name of a status.
func Event(status string) string { return "thread." + status }

// Link is a thread's address in the dashboard, "" without a public URL.
func Link(publicURL, machine, thread string) string {
	if publicURL == "" {
		return ""
	}
	return publicURL + "/#/m/" + url.PathEscape(machine) + "/threads/" + url.PathEscape(thread)
}

// Body is n's request body in format: the same bytes on every attempt.
func Body(format Format, publicURL string, n store.Notification) ([]byte, error) {
	p := Payload{Delivery: n.ID, Event: Event(n.Status), Machine: n.Machine, Thread: n.Thread, Workflow: n.Workflow,
		Status: n.Status, Question: n.Question, Summary: n.Summary, UpdatedAt: n.UpdatedAt.UTC(),
		URL: Link(publicURL, n.Machine, n.Thread)}
	if format == FormatSlack {
		return json.Marshal(struct {
			Text string `json:"text"`
		}{slackText(p)})
	}
	return json.Marshal(p)
}

// slackText is a one-glance message in Slack's mrkdwn.
func slackText(p Payload) string {
	var b strings.Builder
	thread := "`" + slackEscape(p.Thread) + "`"
	if p.URL != "" {
		thread = "<" + p.URL + "|" + slackEscape(p.Thread) + ">"
	}
	fmt.Fprintf(&b, "%s *%s*: thread %s of workflow `%s` on `%s`", slackIcon[p.Status], slackEscape(p.Status), thread,
		slackEscape(p.Workflow), slackEscape(p.Machine))
	for _, s := range []string{p.Question, p.Summary} {
		if s != "" {
			b.WriteString("\n> " + strings.ReplaceAll(slackEscape(s), "\n", "\n> "))
		}
	}
	return b.String()
}

var slackIcon = map[string]string{"waiting": ":raised_hand:", "failed": ":x:", "completed": ":white_check_mark:"}

// slackEscape escapes what Slack reads as markup: &, < and >.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// Sign is the SignatureHeader value of body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify says whether header is body's signature under secret, in
// constant time: what a receiver does.
func Verify(secret, body []byte, header string) bool {
	return hmac.Equal([]byte(Sign(secret, body)), []byte(header))
}

// MaxAttempts is how many times a notification is sent before it is
// given up on: the first and seven retries.
const MaxAttempts = 8

// Backoff is the wait before attempt+1 after attempt (1-based) failed;
// jitter is a number in [0, 1) drawn for the wait.
type Backoff func(attempt int, jitter float64) time.Duration

// DefaultBackoff doubles from 30 s (30 s, 1, 2, 4, 8, 16, 32 min), each
// wait between three quarters and five quarters of that, so receivers
// that came back together are not all called at once. The first five
// retries span at least 11½ minutes, all seven at least 47.
func DefaultBackoff(attempt int, jitter float64) time.Duration {
	base := 30 * time.Second << min(max(attempt-1, 0), 10)
	return time.Duration(float64(base) * (0.75 + jitter/2))
}

// errorText is what is kept of a failed attempt: its status and a line of
// the answer.
func errorText(code int, answer []byte) string {
	s := strconv.Itoa(code)
	if line, _, _ := bytes.Cut(bytes.TrimSpace(answer), []byte("\n")); len(line) > 0 {
		s += ": " + string(line)
	}
	return s
}
