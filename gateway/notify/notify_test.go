package notify_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/notify"
	"github.com/uncaged/workflow/gateway/store"
)

func TestSignAndVerify(t *testing.T) {
	secret, body := []byte("s3cret"), []byte(`{"a":1}`)
	sig := notify.Sign(secret, body)
	// The value GitHub's documentation computes the same way:
	// printf '{"a":1}' | openssl dgst -sha256 -hmac s3cret
	if !strings.HasPrefix(sig, "sha256=") || len(sig) != len("sha256=")+64 {
		t.Fatalf("signature %q", sig)
	}
	if !notify.Verify(secret, body, sig) {
		t.Fatal("own signature refused")
	}
	for _, bad := range []struct {
		secret, body []byte
		sig          string
	}{
		{[]byte("other"), body, sig},
		{secret, []byte(`{"a":2}`), sig},
		{secret, body, strings.TrimPrefix(sig, "sha256=")},
		{secret, body, "sha1=" + strings.TrimPrefix(sig, "sha256=")},
		{secret, body, ""},
	} {
		if notify.Verify(bad.secret, bad.body, bad.sig) {
			t.Errorf("verified %q over %s with %q", bad.sig, bad.body, bad.secret)
		}
	}
}

func TestParseTargets(t *testing.T) {
	got, err := notify.ParseTargets([]string{"https://hooks.slack.com/services/T0/B0/secret", "http://127.0.0.1:9000/hook?token=x"})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Label != "https://hooks.slack.com" || got[1].Label != "http://127.0.0.1:9000" || got[0].Key == got[1].Key ||
		strings.Contains(got[0].Key, "secret") {
		t.Fatalf("%+v", got)
	}
	again, _ := notify.ParseTargets([]string{"https://hooks.slack.com/services/T0/B0/secret"})
	if again[0].Key != got[0].Key {
		t.Fatal("the key of a URL changes between parses: replicas would not agree")
	}
	for _, bad := range [][]string{
		{"hooks.slack.com/services/x"},
		{"ftp://example.com/x"},
		{"https:///nohost"},
		{"mailto:someone@example.com"},
		{"https://example.com/x#frag"},
		{"https://example.com/secret-path", "https://example.com/secret-path"},
		{"http://[::1"},
	} {
		_, err := notify.ParseTargets(bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		if strings.Contains(err.Error(), "secret-path") || strings.Contains(err.Error(), "services/x") {
			t.Errorf("%q: the error quotes the URL: %v", bad, err)
		}
	}
}

func TestParseOn(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{nil, "waiting,failed,completed"},
		{[]string{"completed"}, "completed"},
		{[]string{"waiting,failed", "failed"}, "waiting,failed"},
		{[]string{" Completed , "}, "completed"},
	} {
		got, err := notify.ParseOn(c.in)
		if err != nil || strings.Join(got, ",") != c.want {
			t.Errorf("%q: %q %v, want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range [][]string{{"done"}, {"completed,running"}, {"waiting;failed"}} {
		if _, err := notify.ParseOn(bad); err == nil || !strings.Contains(err.Error(), "unknown status") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if s, err := notify.ReadSecret(write("ok", "  abc\n")); err != nil || string(s) != "abc" {
		t.Fatalf("%q %v", s, err)
	}
	for name, path := range map[string]string{
		"missing": filepath.Join(dir, "none"),
		"empty":   write("empty", ""),
		"blank":   write("blank", " \n\t\n"),
		"huge":    write("huge", strings.Repeat("x", notify.MaxSecret+1)),
		"dir":     dir,
	} {
		if s, err := notify.ReadSecret(path); err == nil {
			t.Errorf("%s: read %q", name, s)
		}
	}
}

func TestParsePublicURL(t *testing.T) {
	if u, err := notify.ParsePublicURL("https://gw.example.com/"); err != nil || u != "https://gw.example.com" {
		t.Fatalf("%q %v", u, err)
	}
	for _, bad := range []string{"gw.example.com", "https://gw.example.com/?x=1", "https://u:p@gw.example.com", "ws://gw", "https://gw/#/m"} {
		if _, err := notify.ParsePublicURL(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

var sample = store.Notification{ID: 42, Machine: "build box", Thread: "t-1", Workflow: "deploy", Status: "completed",
	Summary: "shipped <v2> & done\nall green", UpdatedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}

func TestJSONBody(t *testing.T) {
	b, err := notify.Body(notify.FormatJSON, "https://gw.example.com", sample)
	if err != nil {
		t.Fatal(err)
	}
	var p notify.Payload
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	want := notify.Payload{Delivery: 42, Event: "thread.completed", Machine: "build box", Thread: "t-1", Workflow: "deploy",
		Status: "completed", Summary: sample.Summary, UpdatedAt: sample.UpdatedAt, URL: "https://gw.example.com/#/m/build%20box/threads/t-1"}
	if p != want {
		t.Fatalf("payload %+v\nwant %+v", p, want)
	}
	again, _ := notify.Body(notify.FormatJSON, "https://gw.example.com", sample)
	if string(again) != string(b) {
		t.Fatal("the body differs between attempts: a receiver could not tell them the same")
	}
	if b, _ := notify.Body(notify.FormatJSON, "", sample); strings.Contains(string(b), `"url"`) {
		t.Fatalf("a link without a public URL: %s", b)
	}
}

func TestSlackBody(t *testing.T) {
	b, err := notify.Body(notify.FormatSlack, "https://gw.example.com", sample)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	text, ok := m["text"].(string)
	if !ok || len(m) != 1 {
		t.Fatalf("not a Slack body: %s", b)
	}
	for _, want := range []string{"*completed*", "<https://gw.example.com/#/m/build%20box/threads/t-1|t-1>", "`deploy`", "`build box`",
		"> shipped &lt;v2&gt; &amp; done\n> all green"} {
		if !strings.Contains(text, want) {
			t.Errorf("text %q lacks %q", text, want)
		}
	}
}

// A waiting thread's notification asks its question: in the JSON body's
// question, and quoted in Slack's text under the hand.
func TestWaitingBodyAsksTheQuestion(t *testing.T) {
	n := sample
	n.Status, n.Summary, n.Question = "waiting", "", "Ship <v2> to prod?\nSay yes or no."
	b, err := notify.Body(notify.FormatJSON, "", n)
	if err != nil {
		t.Fatal(err)
	}
	var p notify.Payload
	if err := json.Unmarshal(b, &p); err != nil || p.Event != "thread.waiting" || p.Question != n.Question || p.Summary != "" {
		t.Fatalf("payload %s (%v)", b, err)
	}
	b, err = notify.Body(notify.FormatSlack, "", n)
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Text string }
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{":raised_hand: *waiting*", "> Ship &lt;v2&gt; to prod?\n> Say yes or no."} {
		if !strings.Contains(m.Text, want) {
			t.Errorf("text %q lacks %q", m.Text, want)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]notify.Format{"": notify.FormatJSON, "json": notify.FormatJSON, "Slack": notify.FormatSlack} {
		if f, err := notify.ParseFormat(in); err != nil || f != want {
			t.Errorf("%q: %q %v", in, f, err)
		}
	}
	if _, err := notify.ParseFormat("teams"); err == nil {
		t.Error("teams accepted")
	}
}

// TestDefaultBackoffSpansTenMinutes checks the requirement whatever the
// jitter: at least five retries over at least ten minutes.
func TestDefaultBackoffSpansTenMinutes(t *testing.T) {
	if notify.MaxAttempts < 6 {
		t.Fatalf("%d attempts: fewer than 5 retries", notify.MaxAttempts)
	}
	for _, jitter := range []float64{0, 0.5, 0.999999} {
		var total time.Duration
		prev := time.Duration(0)
		for attempt := 1; attempt < notify.MaxAttempts; attempt++ {
			d := notify.DefaultBackoff(attempt, jitter)
			if d <= 0 || (jitter == 0 && d < prev) {
				t.Fatalf("jitter %v: wait %d is %v after %v", jitter, attempt, d, prev)
			}
			prev = d
			total += d
			if attempt == 5 && total < 10*time.Minute {
				t.Fatalf("jitter %v: five retries within %v", jitter, total)
			}
		}
	}
}

// receiver is a real HTTP receiver that verifies each body's signature,
// failing the first failures requests.
type receiver struct {
	t      *testing.T
	secret []byte
	srv    *httptest.Server

	mu       sync.Mutex
	failures int
	got      []notify.Payload
	attempts int
	headers  []http.Header
	bad      []string
	arrived  chan struct{}
}

func newReceiver(t *testing.T, secret []byte, failures int) *receiver {
	r := &receiver{t: t, secret: secret, failures: failures, arrived: make(chan struct{}, 100)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer func() { r.mu.Unlock(); r.arrived <- struct{}{} }()
		r.attempts++
		if !notify.Verify(r.secret, body, req.Header.Get(notify.SignatureHeader)) {
			r.bad = append(r.bad, string(body))
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if r.failures > 0 {
			r.failures--
			http.Error(w, "not now\nsecond line", http.StatusServiceUnavailable)
			return
		}
		var p notify.Payload
		if err := json.Unmarshal(body, &p); err != nil {
			r.bad = append(r.bad, string(body))
		}
		r.got = append(r.got, p)
		r.headers = append(r.headers, req.Header.Clone())
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) snapshot() ([]notify.Payload, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		r.t.Errorf("bodies refused: %q", r.bad)
	}
	return append([]notify.Payload(nil), r.got...), r.attempts
}

// waitFor waits until cond holds of the store's notifications.
func waitFor(t *testing.T, s store.Store, what string, cond func([]store.Notification) bool) []store.Notification {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // bounds a hang only
	for {
		page, err := s.ListNotifications(context.Background(), store.NotificationQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if cond(page.Notifications) {
			return page.Notifications
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: never; notifications %+v", what, page.Notifications)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func allFinished(ns []store.Notification) bool {
	for _, n := range ns {
		if n.State == store.NotifyPending {
			return false
		}
	}
	return len(ns) > 0
}

// fastBackoff retries at once, so tests wait for nothing but the sends.
func fastBackoff(int, float64) time.Duration { return time.Millisecond }

// run starts a sender over s until the test ends.
func run(t *testing.T, o notify.Options) *notify.Sender {
	snd := notify.New(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); snd.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return snd
}

// setup is a SQLite store with the receivers' settings, and count
// threads that completed.
func setup(t *testing.T, cfg notify.Config, statuses ...string) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), store.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.SetNotify(cfg.Settings()); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var threads []store.Thread
	for i, st := range statuses {
		threads = append(threads, store.Thread{ID: "t" + string(rune('a'+i)), Workflow: "wf", Status: st, UpdatedAt: now, Summary: "s"})
	}
	if _, err := s.SyncThreadsAt(context.Background(), "m1", now, threads); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSenderRetriesUntilTheReceiverTakesIt(t *testing.T) {
	secret := []byte("s3cret")
	r := newReceiver(t, secret, 2)
	targets, err := notify.ParseTargets([]string{r.srv.URL + "/hook?token=abc"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := notify.Config{Targets: targets, On: store.NotifyStatuses, Secret: secret, Format: notify.FormatJSON, PublicURL: "https://gw.example"}
	s := setup(t, cfg, "completed")
	run(t, notify.Options{Store: s, Config: cfg, Backoff: fastBackoff, Poll: 5 * time.Millisecond})
	ns := waitFor(t, s, "delivered", allFinished)
	if n := ns[0]; n.State != store.NotifyDelivered || n.Attempts != 3 || n.LastCode != http.StatusNoContent {
		t.Fatalf("%+v", n)
	}
	got, attempts := r.snapshot()
	if attempts != 3 || len(got) != 1 || got[0].Thread != "ta" || got[0].Event != "thread.completed" || got[0].URL != "https://gw.example/#/m/m1/threads/ta" {
		t.Fatalf("%d attempts, got %+v", attempts, got)
	}
	h := r.headers[0]
	if h.Get(notify.EventHeader) != "thread.completed" || h.Get(notify.DeliveryHeader) == "" || h.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", h)
	}
}

func TestSenderGivesUp(t *testing.T) {
	secret := []byte("s3cret")
	r := newReceiver(t, secret, 1000)
	targets, _ := notify.ParseTargets([]string{r.srv.URL})
	cfg := notify.Config{Targets: targets, On: store.NotifyStatuses, Secret: secret}
	s := setup(t, cfg, "failed")
	run(t, notify.Options{Store: s, Config: cfg, Backoff: fastBackoff, Poll: 5 * time.Millisecond, MaxAttempts: 4})
	ns := waitFor(t, s, "given up", allFinished)
	if n := ns[0]; n.State != store.NotifyFailed || n.Attempts != 4 || n.LastCode != 503 || n.LastError != "503: not now" {
		t.Fatalf("%+v", n)
	}
	if _, attempts := r.snapshot(); attempts != 4 {
		t.Fatalf("%d attempts", attempts)
	}
}

func TestSenderRefusesRedirectsAndUnknownReceivers(t *testing.T) {
	secret := []byte("s3cret")
	r := newReceiver(t, secret, 0)
	redirect := httptest.NewServer(http.RedirectHandler(r.srv.URL, http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	targets, _ := notify.ParseTargets([]string{redirect.URL + "/secret-path", "https://gone.example/x"})
	cfg := notify.Config{Targets: targets, On: store.NotifyStatuses, Secret: secret}
	s := setup(t, cfg, "waiting")
	// The second receiver is no longer configured when the sender runs.
	cfg.Targets = targets[:1]
	run(t, notify.Options{Store: s, Config: cfg, Backoff: fastBackoff, Poll: 5 * time.Millisecond, MaxAttempts: 2})
	ns := waitFor(t, s, "given up", func(ns []store.Notification) bool { return len(ns) == 2 && allFinished(ns) })
	for _, n := range ns {
		if n.State != store.NotifyFailed || strings.Contains(n.LastError, "secret-path") {
			t.Errorf("%+v", n)
		}
		if n.TargetLabel == "https://gone.example" && (n.LastError != "the receiver is no longer configured" || n.Attempts != 1) {
			t.Errorf("unknown receiver: %+v", n)
		}
		if n.TargetLabel != "https://gone.example" && n.LastCode != http.StatusTemporaryRedirect {
			t.Errorf("redirect: %+v", n)
		}
	}
	if got, attempts := r.snapshot(); attempts != 0 || len(got) != 0 {
		t.Fatalf("the redirect was followed: %d", attempts)
	}
}

func TestSenderWithoutAnswer(t *testing.T) {
	// A receiver that is not there: the error names no URL.
	ln := httptest.NewServer(http.NotFoundHandler())
	url := ln.URL + "/secret-path"
	ln.Close()
	targets, _ := notify.ParseTargets([]string{url})
	cfg := notify.Config{Targets: targets, On: store.NotifyStatuses, Secret: []byte("x")}
	s := setup(t, cfg, "completed")
	run(t, notify.Options{Store: s, Config: cfg, Backoff: fastBackoff, Poll: 5 * time.Millisecond, MaxAttempts: 1})
	ns := waitFor(t, s, "given up", allFinished)
	if n := ns[0]; n.State != store.NotifyFailed || n.LastCode != 0 || n.LastError == "" || strings.Contains(n.LastError, "secret-path") {
		t.Fatalf("%+v", n)
	}
}
