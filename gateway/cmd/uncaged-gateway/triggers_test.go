package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/gateway/trigger"
)

// runTrigger runs `trigger args...` against dir's store.
func runTrigger(t *testing.T, dir string, args ...string) (string, string, error) {
	t.Helper()
	cmd := triggerCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append(append([]string{}, args...), "--data-dir", dir))
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

// A webhook made with --json prints its id, full URL and secret, which
// verifies a body signed as GitHub signs it; list shows it without the
// secret; pause, resume and rm change it and are audited; a schedule
// prints its next time.
func TestTriggerCreateListPauseRemove(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, _, err := runTrigger(t, dir, "create", "--machine", "build-box", "--workflow", "plan-code-review", "--webhook",
		"--prompt", "Fix {{.issue.title}}", "--note", "labelled issues", "--public-url", "https://gw.example.com", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var made triggerOutJSON
	if err := json.Unmarshal([]byte(out), &made); err != nil {
		t.Fatalf("create --json: %v\n%s", err, out)
	}
	if made.URL != "https://gw.example.com/hooks/"+made.ID || len(made.Secret) != 64 || made.Kind != "webhook" || made.Expire != "24h0m0s" {
		t.Fatalf("created %+v", made)
	}
	h := http.Header{}
	body := []byte(`{"issue":{"title":"x"}}`)
	h.Set(trigger.GitHubSignatureHeader, trigger.Sign(made.Secret, body))
	st, err := store.Open(context.Background(), store.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := st.GetTrigger(context.Background(), made.ID)
	_ = st.Close()
	if err != nil || trigger.Verify(stored.Secret, h, body) != nil {
		t.Fatalf("the stored trigger does not verify the printed secret's signature: %v", err)
	}

	out, _, err = runTrigger(t, dir, "create", "--machine", "laptop", "--workflow", "deps", "--schedule", "0 2 * * *", "--timezone", "Europe/Berlin", "--missed", "skip")
	if err != nil || !strings.Contains(out, "schedule: 0 2 * * * (Europe/Berlin), next at ") {
		t.Fatalf("schedule: %v\n%s", err, out)
	}
	out, _, err = runTrigger(t, dir, "list")
	if err != nil || !strings.Contains(out, made.ID) || !strings.Contains(out, "0 2 * * * Europe/Berlin") || strings.Contains(out, made.Secret) {
		t.Fatalf("list: %v\n%s", err, out)
	}
	out, _, err = runTrigger(t, dir, "list", "--json")
	var listed []triggerOutJSON
	if err != nil || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 2 || listed[0].Secret != "" || strings.Contains(out, made.Secret) {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	// A new secret, printed once: both verify for the day after, only the
	// new one once that is over; the old one can also end at once, and is
	// never kept for longer than MaxKeepPrevious.
	out, _, err = runTrigger(t, dir, "rotate-secret", made.ID, "--json")
	var rotated struct {
		ID, Secret    string
		PreviousUntil *time.Time
	}
	if err != nil || json.Unmarshal([]byte(out), &rotated) != nil || rotated.ID != made.ID || len(rotated.Secret) != 64 || rotated.Secret == made.Secret || rotated.PreviousUntil == nil {
		t.Fatalf("rotate-secret: %v\n%s", err, out)
	}
	st, err = store.Open(context.Background(), store.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	stored, err = st.GetTrigger(context.Background(), made.ID)
	_ = st.Close()
	newSigned := http.Header{}
	newSigned.Set(trigger.SignatureHeader, trigger.Sign(rotated.Secret, body))
	now := time.Now()
	if err != nil || trigger.VerifyDelivery(stored, now, newSigned, body) != nil || trigger.VerifyDelivery(stored, now, h, body) != nil ||
		trigger.VerifyDelivery(stored, rotated.PreviousUntil.Add(time.Second), h, body) == nil {
		t.Fatalf("after rotate-secret the stored webhook verifies the wrong signatures: %v, %+v", err, stored)
	}
	if _, _, err = runTrigger(t, dir, "rotate-secret", made.ID, "--keep-previous", "0"); err != nil {
		t.Fatalf("rotate-secret --keep-previous 0: %v", err)
	}
	if _, _, err = runTrigger(t, dir, "rotate-secret", made.ID, "--keep-previous", "9999h"); err == nil {
		t.Fatal("rotate-secret kept the previous secret for over a year")
	}
	if out, _, err = runTrigger(t, dir, "pause", made.ID); err != nil || !strings.HasPrefix(out, "paused trigger "+made.ID) {
		t.Fatalf("pause: %v %q", err, out)
	}
	if out, _, err = runTrigger(t, dir, "resume", made.ID); err != nil || !strings.HasPrefix(out, "resumed trigger "+made.ID) {
		t.Fatalf("resume: %v %q", err, out)
	}
	if out, _, err = runTrigger(t, dir, "rm", made.ID); err != nil || !strings.HasPrefix(out, "removed trigger "+made.ID) {
		t.Fatalf("rm: %v %q", err, out)
	}
	if _, _, err = runTrigger(t, dir, "rm", made.ID); err == nil || !strings.Contains(err.Error(), "no trigger with id") {
		t.Fatalf("rm twice: %v", err)
	}
	st, err = store.Open(context.Background(), store.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }() // only read from
	page, err := st.ListAudit(context.Background(), store.AuditQuery{Machine: "build-box"})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range page.Entries {
		actions = append(actions, e.Action)
	}
	if got := strings.Join(actions, ","); got != "trigger-delete,trigger-resume,trigger-pause,trigger-rotate-secret,trigger-rotate-secret,trigger-create" {
		t.Fatalf("audit: %s", got)
	}
}

// A bad request is refused with what is wrong, and stores nothing.
func TestTriggerCreateRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--machine", "laptop", "--workflow", "w"}, "webhook, or a schedule"},
		{[]string{"--machine", "Laptop!", "--workflow", "w", "--webhook"}, "--machine"},
		{[]string{"--machine", "laptop", "--workflow", "w", "--webhook", "--schedule", "@daily"}, "not both"},
		{[]string{"--machine", "laptop", "--workflow", "w", "--schedule", "99 * * * *"}, "schedule"},
		{[]string{"--machine", "laptop", "--workflow", "w", "--schedule", "@daily", "--timezone", "Atlantis"}, "time zone"},
		{[]string{"--machine", "laptop", "--workflow", "w", "--schedule", "@daily", "--missed", "twice"}, "--missed"},
		{[]string{"--machine", "laptop", "--workflow", "w", "--webhook", "--prompt", "{{.x"}, "template"},
		{[]string{"--machine", "laptop", "--workflow", "w", "--webhook", "--public-url", "gw.example.com"}, "--public-url"},
		{[]string{"--machine", "laptop", "--workflow", "", "--webhook"}, "workflow"},
	} {
		_, _, err := runTrigger(t, dir, append([]string{"create"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error with %q", c.args, err, c.want)
		}
	}
	if _, _, err := runTrigger(t, dir, "list"); err == nil || !strings.Contains(err.Error(), "no database") {
		t.Fatalf("a refused create made a database: %v", err)
	}
}
