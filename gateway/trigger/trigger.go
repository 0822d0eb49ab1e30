// Package trigger is what a gateway trigger does when it fires, apart
// from where it is kept (gateway/store) and who serves it
// (gateway/server): the webhook's signature and delivery id, the prompt
// rendered from the webhook's JSON body, and the times a schedule fires.
//
// A webhook is accepted only with an HMAC-SHA256 of its exact body under
// the trigger's secret, in GitHub's header (X-Hub-Signature-256, so a
// GitHub webhook works unchanged) or in X-Uncaged-Signature, both written
// "sha256=<hex>". Its delivery id (X-GitHub-Delivery or
// X-Uncaged-Delivery) makes a repeated delivery start one run.
//
// A schedule is a standard five-field cron expression (or a descriptor
// such as @daily), parsed by github.com/robfig/cron/v3, read in an IANA
// time zone (UTC when none is given), so "0 2 * * *" in Europe/Berlin is
// 02:00 there in summer and in winter.
package trigger

import (
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"

	"github.com/robfig/cron/v3"

	"github.com/uncaged/workflow/gateway/store"
)

// Headers a webhook sender sets.
const (
	// GitHubSignatureHeader is GitHub's signature header.
	GitHubSignatureHeader = "X-Hub-Signature-256"
	// SignatureHeader is this project's own, the same format.
	SignatureHeader = "X-Uncaged-Signature"
	// GitHubDeliveryHeader is the id GitHub gives each delivery (a redelivery keeps it).
	GitHubDeliveryHeader = "X-GitHub-Delivery"
	// DeliveryHeader is this project's own delivery id header.
	DeliveryHeader = "X-Uncaged-Delivery"
)

// Bounds on what a sender and a trigger may give.
const (
	// MaxDeliveryID bounds a delivery id.
	MaxDeliveryID = 200
	// MaxPrompt bounds a rendered prompt, as the store does.
	MaxPrompt = 256 << 10
	// MaxTemplate bounds a prompt template, as the store does.
	MaxTemplate = 64 << 10
)

// Errors of Verify, told apart with errors.Is (the metric's reason).
var (
	ErrNoSignature  = errors.New("no signature: sign the body with HMAC-SHA256 under the trigger's secret, in " + GitHubSignatureHeader + " or " + SignatureHeader + " as sha256=<hex>")
	ErrBadSignature = errors.New("the signature does not match the body under the trigger's secret")
)

// NewSecret is a webhook secret: 32 random bytes, hex.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics when it cannot read)
	return hex.EncodeToString(b)
}

// Sign is the header value signing body under secret: what a sender
// computes, and what Verify compares with.
func Sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify checks the request's signature of body under secret. Either
// header may carry it; when both are sent both must match. The
// comparison takes the same time whatever the signature.
func Verify(secret string, h http.Header, body []byte) error {
	if secret == "" {
		return ErrBadSignature // a webhook without a secret accepts nothing
	}
	want := []byte(Sign(secret, body))
	seen := false
	for _, name := range []string{GitHubSignatureHeader, SignatureHeader} {
		for _, got := range h.Values(name) {
			seen = true
			if !hmac.Equal([]byte(strings.TrimSpace(got)), want) {
				return ErrBadSignature
			}
		}
	}
	if !seen {
		return ErrNoSignature
	}
	return nil
}

// Bounds of how long a webhook's replaced secret stays accepted
// (RotateTriggerSecret's previousUntil).
const (
	// DefaultKeepPrevious leaves a day to give the sender the new secret.
	DefaultKeepPrevious = 24 * time.Hour
	// MaxKeepPrevious bounds it: two secrets that both work are a secret
	// nobody rotated.
	MaxKeepPrevious = 30 * 24 * time.Hour
)

// PreviousUntil is until when a rotated-out secret stays accepted when it
// is kept for keep from now: nil for 0 (not at all), an error outside 0 to
// MaxKeepPrevious.
func PreviousUntil(keep time.Duration, now time.Time) (*time.Time, error) {
	if keep < 0 || keep > MaxKeepPrevious {
		return nil, fmt.Errorf("%s is not from 0s to %s", keep, MaxKeepPrevious)
	}
	if keep == 0 {
		return nil, nil
	}
	until := now.Add(keep)
	return &until, nil
}

// VerifyDelivery checks a delivery to webhook t: signed with its secret,
// or, until t.PreviousUntil, with the secret that one replaced, so that
// deliveries keep working while the sender is given the new one.
func VerifyDelivery(t store.Trigger, now time.Time, h http.Header, body []byte) error {
	err := Verify(t.Secret, h, body)
	if errors.Is(err, ErrBadSignature) && PreviousAccepted(t, now) && Verify(t.PreviousSecret, h, body) == nil {
		return nil
	}
	return err
}

// PreviousAccepted says whether webhook t's rotated-out secret is still
// accepted at now.
func PreviousAccepted(t store.Trigger, now time.Time) bool {
	return t.PreviousSecret != "" && t.PreviousUntil != nil && now.Before(*t.PreviousUntil)
}

// DeliveryID is the request's delivery id ("" when it has none), or an
// error when the one it has is not printable ASCII of at most
// MaxDeliveryID bytes, or when the two headers disagree.
func DeliveryID(h http.Header) (string, error) {
	id := ""
	for _, name := range []string{GitHubDeliveryHeader, DeliveryHeader} {
		v := h.Get(name)
		if v == "" {
			continue
		}
		if len(v) > MaxDeliveryID {
			return "", fmt.Errorf("%s is longer than %d bytes", name, MaxDeliveryID)
		}
		for i := 0; i < len(v); i++ {
			if v[i] < 0x21 || v[i] > 0x7e {
				return "", fmt.Errorf("%s must be printable ASCII without spaces", name)
			}
		}
		if id != "" && id != v {
			return "", fmt.Errorf("%s and %s name different deliveries", GitHubDeliveryHeader, DeliveryHeader)
		}
		id = v
	}
	return id, nil
}

// ParseTemplate checks a prompt template: Go's text/template over the
// webhook's JSON body ({{.issue.title}}). "" is valid: the prompt is
// then the whole body.
func ParseTemplate(text string) (*template.Template, error) {
	if len(text) > MaxTemplate {
		return nil, fmt.Errorf("the prompt template is longer than %d bytes", MaxTemplate)
	}
	if !utf8.ValidString(text) {
		return nil, errors.New("the prompt template is not UTF-8")
	}
	t, err := template.New("prompt").Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("the prompt template: %w", err)
	}
	return t, nil
}

// Render is the prompt for a webhook's body: the template executed over
// the body read as JSON, or the body itself when the template is "". A
// key the body lacks is an error naming it, not "<no value>" in a
// prompt, and so is a body that is not JSON when a template needs it.
func Render(tmpl string, body []byte) (string, error) {
	if !utf8.Valid(body) {
		return "", errors.New("the body is not UTF-8")
	}
	if tmpl == "" {
		if len(body) > MaxPrompt {
			return "", fmt.Errorf("the body, the prompt, is longer than %d bytes", MaxPrompt)
		}
		return string(body), nil
	}
	t, err := ParseTemplate(tmpl)
	if err != nil {
		return "", err
	}
	var data any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber() // an issue number prints as 42, not 4.2e+01
	if err := d.Decode(&data); err != nil {
		return "", fmt.Errorf("the body is not JSON, which the prompt template reads: %w", err)
	}
	if d.More() {
		return "", errors.New("the body holds more than one JSON value")
	}
	var out limitedBuffer
	if err := t.Execute(&out, nullsAsEmpty(data)); err != nil {
		return "", fmt.Errorf("rendering the prompt: %w", err)
	}
	return out.String(), nil
}

// nullsAsEmpty replaces every JSON null in v with "": text/template
// prints a nil as "<no value>", and GitHub sends null for what is unset
// (an issue without a description), which a prompt should read as nothing;
// {{if .issue.body}} is false for both.
func nullsAsEmpty(v any) any {
	switch x := v.(type) {
	case nil:
		return ""
	case map[string]any:
		for k, e := range x {
			x[k] = nullsAsEmpty(e)
		}
	case []any:
		for i, e := range x {
			x[i] = nullsAsEmpty(e)
		}
	}
	return v
}

// limitedBuffer refuses to grow past MaxPrompt, so a template ranging
// over a large body cannot build an unbounded prompt.
type limitedBuffer struct{ bytes.Buffer }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > MaxPrompt {
		return 0, fmt.Errorf("the prompt is longer than %d bytes", MaxPrompt)
	}
	return b.Buffer.Write(p)
}

// Schedule is a parsed cron expression in its time zone.
type Schedule struct {
	cron cron.Schedule
	loc  *time.Location
}

// parser reads standard five-field expressions and descriptors (@daily,
// @every 5m). A CRON_TZ= or TZ= prefix is refused by ParseSchedule: the
// time zone is the trigger's own field, one place to read it.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule reads expr in the time zone tz (an IANA name; "" is UTC).
func ParseSchedule(expr, tz string) (Schedule, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return Schedule{}, errors.New("the schedule is empty: give a cron expression such as \"0 2 * * *\"")
	}
	if strings.HasPrefix(expr, "CRON_TZ=") || strings.HasPrefix(expr, "TZ=") {
		return Schedule{}, errors.New("give the time zone with --timezone, not in the schedule")
	}
	loc, err := LoadLocation(tz)
	if err != nil {
		return Schedule{}, err
	}
	s, err := parser.Parse(expr)
	if err != nil {
		return Schedule{}, fmt.Errorf("the schedule %q: %w", expr, err)
	}
	return Schedule{cron: s, loc: loc}, nil
}

// LoadLocation is the time zone named tz ("" is UTC), or an error that
// says it is unknown.
func LoadLocation(tz string) (*time.Location, error) {
	if tz == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q (an IANA name such as Europe/Berlin)", tz)
	}
	return loc, nil
}

// Next is the first time the schedule fires after t (the zero time when
// it never does, such as 30 February).
func (s Schedule) Next(t time.Time) time.Time {
	n := s.cron.Next(t.In(s.loc))
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// maxLookBack bounds how far back Latest looks for a missed time: a
// gateway away for longer runs the schedule's latest time within it.
const maxLookBack = 400 * 24 * time.Hour

// Latest is the last time the schedule fired after from and at or
// before now (ok false when it did not): what a gateway that was away,
// or whose clock just passed a time, has to run.
func (s Schedule) Latest(from, now time.Time) (t time.Time, ok bool) {
	if earliest := now.Add(-maxLookBack); from.Before(earliest) {
		from = earliest
	}
	for n := s.Next(from); !n.IsZero() && !n.After(now); n = s.Next(n) {
		t, ok = n, true
	}
	return t, ok
}

// Spec is what a person asks for when they create a trigger, from the
// CLI or the API: exactly one of Webhook and Schedule.
type Spec struct {
	Machine, Workflow string
	Webhook           bool
	Schedule          string // a cron expression
	TimeZone          string // for Schedule; "" is UTC
	Prompt            string // a template (see Render); "" is the whole body
	Note              string
	Missed            store.MissedPolicy // for Schedule; "" is run-once
	Expire            time.Duration      // 0 is store.DefaultRunExpiry
	CreatedBy         string
}

// New is the trigger spec asks for, checked as the store will and with
// its schedule and template parsed, with a new id and, for a webhook, a
// new secret. Nothing is stored.
func New(spec Spec, now time.Time) (store.Trigger, error) {
	t := store.Trigger{ID: store.NewTriggerID(), Machine: spec.Machine, Workflow: spec.Workflow, Prompt: spec.Prompt,
		Note: spec.Note, Expire: cmp.Or(spec.Expire, store.DefaultRunExpiry), CreatedAt: now.UTC(), CreatedBy: spec.CreatedBy}
	switch {
	case spec.Webhook && spec.Schedule != "":
		return store.Trigger{}, errors.New("a trigger is a webhook or a schedule, not both")
	case spec.Webhook:
		if spec.TimeZone != "" || spec.Missed != "" {
			return store.Trigger{}, errors.New("a time zone and a missed-run policy are for schedules, not webhooks")
		}
		t.Kind, t.Secret = store.TriggerWebhook, NewSecret()
	case spec.Schedule != "":
		if _, err := ParseSchedule(spec.Schedule, spec.TimeZone); err != nil {
			return store.Trigger{}, err
		}
		t.Kind, t.Schedule, t.TimeZone, t.Missed = store.TriggerSchedule, strings.TrimSpace(spec.Schedule), spec.TimeZone, spec.Missed
		if t.Missed == "" {
			t.Missed = store.MissedRunOnce
		}
	default:
		return store.Trigger{}, errors.New("say when the trigger fires: a webhook, or a schedule (a cron expression)")
	}
	if _, err := ParseTemplate(spec.Prompt); err != nil {
		return store.Trigger{}, err
	}
	if t.Kind == store.TriggerSchedule {
		if _, err := SchedulePrompt(t, now); err != nil {
			return store.Trigger{}, fmt.Errorf("%w (a schedule's template reads .trigger, .machine, .workflow and .scheduledFor)", err)
		}
	}
	if err := t.Check(); err != nil {
		return store.Trigger{}, err
	}
	return t, nil
}

// SchedulePrompt is the prompt of a schedule's run at `at`: the
// trigger's template over {"trigger", "machine", "workflow",
// "scheduledFor"}, or that object as JSON when the template is "".
func SchedulePrompt(t store.Trigger, at time.Time) (string, error) {
	body, err := json.Marshal(map[string]string{"trigger": t.ID, "machine": t.Machine, "workflow": t.Workflow,
		"scheduledFor": at.UTC().Format(time.RFC3339)})
	if err != nil {
		return "", err
	}
	return Render(t.Prompt, body)
}

// ScheduleDeliveryID is the delivery id of a schedule's run at `at`: the
// same on every replica, so the store records the run once however many
// fire it.
func ScheduleDeliveryID(at time.Time) string { return "schedule:" + at.UTC().Format(time.RFC3339) }
