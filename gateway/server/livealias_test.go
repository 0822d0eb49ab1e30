package server

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/presence"
)

// The original dashboard's live URL, /api/<name>/threads/<id>/live, is
// the proxied /api/clients/<name>/threads/<id>/live.
func TestLiveAliasReachesTheMachine(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	f.connector("laptop", echoAPI("laptop"))
	resp, body := f.do("GET", "/api/laptop/threads/t1/live?key="+f.dash+"&since=3", "", nil)
	var got struct{ Machine, Path, Query, Auth string }
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &got) != nil {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if got.Machine != "laptop" || got.Path != "/api/threads/t1/live" || got.Query != "since=3" || got.Auth != "" {
		t.Errorf("got %+v", got)
	}
	// Credentials as on every proxied route.
	if resp, body := f.do("GET", "/api/laptop/threads/t1/live", "", nil); resp.StatusCode != 401 {
		t.Errorf("no credentials: %d %s", resp.StatusCode, body)
	}
	if resp, body := f.do("GET", "/api/ghost/threads/t1/live", f.dash, nil); resp.StatusCode != 404 || !strings.Contains(body, "connector not found: ghost") {
		t.Errorf("unknown machine: %d %s", resp.StatusCode, body)
	}
}

// A machine named like one of the gateway's own segments is not reachable
// through the alias (it is at /api/clients/<name>/...), and every other
// /api path stays a JSON 404, with or without credentials.
func TestLiveAliasLeavesReservedWordsAndOtherPathsAlone(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	for name := range reservedAPISegments {
		f.connector(name, echoAPI(name))
	}
	for name := range reservedAPISegments {
		// /api/clients/threads/... is the machine "threads" on the
		// proxied route, never the machine "clients"; /api/gateway/... is
		// nobody.
		resp, body := f.do("GET", "/api/"+name+"/threads/t1/live", f.dash, nil)
		if resp.StatusCode == 200 || strings.Contains(body, `"machine":"`+name+`"`) {
			t.Errorf("%s through the alias: %d %s", name, resp.StatusCode, body)
		}
		resp, body = f.do("GET", "/api/clients/"+name+"/threads/t1/live", f.dash, nil)
		if resp.StatusCode != 200 || !strings.Contains(body, `"machine":"`+name+`"`) {
			t.Errorf("%s under clients/: %d %s", name, resp.StatusCode, body)
		}
	}
	for _, token := range []string{"", f.dash} {
		resp, body := f.do("GET", "/api/gateway/threads/t1/live", token, nil)
		if resp.StatusCode != 404 || !strings.Contains(body, `"error":"no such route: /api/gateway/threads/t1/live"`) {
			t.Errorf("gateway (token %v): %d %s", token != "", resp.StatusCode, body)
		}
	}
	f.connector("laptop", echoAPI("laptop"))
	for _, path := range []string{
		"/api/laptop/threads", "/api/laptop/threads/t1", "/api/laptop/threads/t1/live/x", "/api/laptop/workflows",
		"/api/laptop", "/api/Bad_Name/threads/t1/live", "/api/gateway/threads/t1", "/api/nothing",
	} {
		for _, token := range []string{"", f.dash} {
			resp, body := f.do("GET", path, token, nil)
			if resp.StatusCode != 404 || !strings.Contains(body, `"error":"no such route`) {
				t.Errorf("%s (token %v): %d %s", path, token != "", resp.StatusCode, body)
			}
		}
	}
	// Only GET (and HEAD): the live view reads.
	if resp, body := f.do("POST", "/api/laptop/threads/t1/live", f.dash, nil); resp.StatusCode == 200 {
		t.Errorf("POST: %d %s", resp.StatusCode, body)
	}
	if resp, _ := f.do("HEAD", "/api/laptop/threads/t1/live", f.dash, nil); resp.StatusCode != 200 {
		t.Errorf("HEAD: %d", resp.StatusCode)
	}
}

// Every /api route's first segment is reserved, so the alias can never
// shadow one: a route added under a new segment fails here until the
// segment is reserved.
func TestReservedSegmentsCoverTheRoutes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	for _, r := range f.gw.echo.Routes() {
		rest, ok := strings.CutPrefix(r.Path, "/api/")
		if !ok {
			continue
		}
		first, _, _ := strings.Cut(rest, "/")
		if first == "*" || first == ":name" {
			continue // the not-found route and the alias itself
		}
		if !reservedAPISegments[first] {
			t.Errorf("route %s %s: segment %q is not in reservedAPISegments", r.Method, r.Path, first)
		}
	}
	// Reserved words are valid machine names: the check is needed.
	for name := range reservedAPISegments {
		if !presence.ValidName(name) {
			t.Errorf("%q is no valid machine name; the reservation is moot", name)
		}
	}
}
