package server

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"testing"
)

// TestTheDashboardFiltersOnEveryAuditAction: the audit view's action
// filter offers exactly the actions the gateway records and its API
// filters on. The two lists are in two languages; a new action added to
// one only (as trigger-rotate-secret once was, and the connection
// actions long were) fails here rather than being unfilterable.
func TestTheDashboardFiltersOnEveryAuditAction(t *testing.T) {
	src, err := os.ReadFile("../web/src/audit/AuditView.tsx")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`export const ACTIONS = (\[[^\]]*\]);`).FindSubmatch(src)
	if m == nil {
		t.Fatal("AuditView.tsx has no `export const ACTIONS = [...];`")
	}
	var dashboard []string
	if err := json.Unmarshal(m[1], &dashboard); err != nil {
		t.Fatalf("ACTIONS is not a list of strings: %v", err)
	}
	for _, a := range auditActions {
		if !slices.Contains(dashboard, a) {
			t.Errorf("the dashboard cannot filter on %q", a)
		}
	}
	for _, a := range dashboard {
		if !slices.Contains(auditActions, a) {
			t.Errorf("the dashboard offers %q, which the gateway does not filter on", a)
		}
	}
}
