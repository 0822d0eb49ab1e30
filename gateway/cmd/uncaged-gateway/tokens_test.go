package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/store"
)

const testKey = "0123456789abcdef0123456789abcdef"

// runToken runs `token args...` against dir's store; it returns stdout,
// stderr and the error. The commands run without the root, so no
// package-level flag is touched and tests may run in parallel.
func runToken(t *testing.T, dir string, args ...string) (string, string, error) {
	t.Helper()
	cmd := tokenCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	full := append([]string{}, args...)
	full = append(full, "--data-dir", dir)
	if args[0] == "create" {
		full = append(full, "--key", testKey)
	}
	cmd.SetArgs(full)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func TestTokenCreateListRevoke(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// create prints the bare token on stdout, its id on stderr.
	out, errOut, err := runToken(t, dir, "create", "--connector", "laptop", "--note", "Ann's laptop")
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out)
	m := regexp.MustCompile(`token id ([a-z2-7]{26}) \(connector laptop, never expires\)`).FindStringSubmatch(errOut)
	if strings.Count(tok, ".") != 2 || m == nil {
		t.Fatalf("create: stdout %q, stderr %q", out, errOut)
	}
	laptopID := m[1]
	a, err := auth.New([]byte(testKey), "")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := a.Verify(tok, auth.RoleConnector, "laptop"); err != nil || p.TokenID != laptopID {
		t.Fatalf("the token: %+v, %v", p, err)
	}

	// A dashboard token expires in 30 days unless told; --ttl 0 warns.
	out, _, err = runToken(t, dir, "create", "--dashboard", "--json", "--note", "ops")
	var created tokenJSON
	if err != nil || json.Unmarshal([]byte(out), &created) != nil || created.Token == "" || created.Expires == nil {
		t.Fatalf("create --json: %q, %v", out, err)
	}
	if d := created.Expires.Sub(created.Created); d < DefaultDashboardTTL-time.Second || d > DefaultDashboardTTL {
		t.Fatalf("a dashboard token's default validity: %s", d)
	}
	_, errOut, err = runToken(t, dir, "create", "--dashboard", "--ttl", "0")
	if err != nil || !strings.Contains(errOut, "warning: this dashboard token never expires") {
		t.Fatalf("--ttl 0: %q, %v", errOut, err)
	}

	// list shows them all, newest first, aligned; --json too.
	out, _, err = runToken(t, dir, "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 4 || !strings.HasPrefix(lines[0], "ID ") || !strings.Contains(lines[3], laptopID) || !strings.Contains(lines[3], "Ann's laptop") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if col := strings.Index(lines[0], "KIND"); strings.Index(lines[3], "connector") != col {
		t.Fatalf("list is not aligned:\n%s", out)
	}
	out, _, err = runToken(t, dir, "list", "--json")
	var listed []tokenJSON
	if err != nil || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 3 || listed[2].ID != laptopID || listed[2].Token != "" {
		t.Fatalf("list --json: %v\n%s", err, out)
	}

	// revoke by id, then by kind; what was revoked is printed.
	out, _, err = runToken(t, dir, "revoke", laptopID)
	if err != nil || out != "revoked "+laptopID+" (connector laptop, Ann's laptop)\n" {
		t.Fatalf("revoke: %q, %v", out, err)
	}
	out, _, err = runToken(t, dir, "revoke", "--kind", "dashboard")
	if err != nil || strings.Count(out, "revoked ") != 2 {
		t.Fatalf("revoke --kind dashboard: %q, %v", out, err)
	}
	out, _, _ = runToken(t, dir, "list", "--json")
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatal(err)
	}
	for _, l := range listed {
		if l.Revoked == nil {
			t.Fatalf("%s not revoked: %s", l.ID, out)
		}
	}

	// Every creation and revocation is in the audit log, as the CLI's.
	st, err := store.Open(context.Background(), store.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	page, err := st.ListAudit(context.Background(), store.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, e := range page.Entries {
		if e.Actor != cliActor || e.Source != cliSource || e.Target == "" {
			t.Fatalf("audit entry %+v", e)
		}
		counts[e.Action]++
	}
	if counts["token-create"] != 3 || counts["token-revoke"] != 3 {
		t.Fatalf("audit: %v", counts)
	}
}

// Revoking nothing, or what does not exist, fails and says why; so do
// bad arguments, which change nothing.
func TestTokenCommandRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, errOut, err := runToken(t, dir, "create", "--connector", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	id := regexp.MustCompile(`token id (\S+)`).FindStringSubmatch(errOut)[1]
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "--connector", "x", "--dashboard"}, "exactly one of --connector NAME or --dashboard"},
		{[]string{"create"}, "exactly one of --connector NAME or --dashboard"},
		{[]string{"create", "--dashboard", "--ttl", "-1h"}, "must not be negative"},
		{[]string{"create", "--connector", "Bad Name"}, "invalid connector name"},
		{[]string{"revoke"}, "exactly one of a token ID, --connector NAME or --kind"},
		{[]string{"revoke", id, "--connector", "laptop"}, "exactly one of"},
		{[]string{"revoke", "--kind", "admin"}, `--kind "admin": want dashboard or connector`},
		{[]string{"revoke", "nosuchid"}, `no token with id "nosuchid"`},
		{[]string{"revoke", "--kind", "dashboard"}, "no unrevoked dashboard token: nothing revoked"},
		{[]string{"revoke", "--connector", "desk"}, `no unrevoked token of connector "desk"`},
	} {
		_, _, err := runToken(t, dir, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	if _, _, err := runToken(t, dir, "revoke", id); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runToken(t, dir, "revoke", id); err == nil || !strings.Contains(err.Error(), "already revoked") {
		t.Fatalf("revoking twice: %v", err)
	}
	out, _, err := runToken(t, dir, "list", "--json")
	var listed []tokenJSON
	if err != nil || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 {
		t.Fatalf("after the refusals, list: %v\n%s", err, out)
	}
}
