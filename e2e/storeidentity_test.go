package e2e

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the test edits the gateway's database as another program would

	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/testkit/pgtest"
)

// storeReadyz is the gateway's /readyz: its status and its error.
func storeReadyz(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var why struct{ Error string }
	_ = json.Unmarshal(body, &why)
	return resp.StatusCode, why.Error
}

// storeLogLines counts the gateway's log lines whose message is msg.
func storeLogLines(p *proc, msg string) int {
	return strings.Count(p.logs.String(), `"msg":"`+msg+`"`)
}

// The report: gateway.db deleted while the gateway ran — the gateway
// logged nothing and /readyz stayed 200; `token create` quietly made a new
// database whose token the gateway refused; `token revoke` printed
// "revoked" and the token still worked; after a restart every token was
// unknown. Now the gateway notices within seconds (an ERROR, /readyz 503
// with the reason, `status --health` fails), every token command refuses
// to touch a database the running gateway does not use and makes none,
// and the file put back makes it ready again. A restart on an empty data
// directory says so.
func TestTheGatewayNoticesItsDatabaseRemoved(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	tok := createToken(t, g.key, "--dashboard")
	if code, _ := refusal(t, g.addr, tok.Token); code != 200 {
		t.Fatalf("the new token: %d", code)
	}
	db := filepath.Join(g.dataDir, "gateway.db")
	if code, why := storeReadyz(t, g.addr); code != 200 {
		t.Fatalf("/readyz at start: %d %s", code, why)
	}
	_, errOut, err := gwCLIResult(t, g.key, "token", "list")
	if err != nil || !strings.Contains(errOut, "database: "+db+"\n") || strings.Contains(errOut, "no running gateway") {
		t.Fatalf("token list beside the gateway: %v\n%s", err, errOut)
	}

	// Moved away, then put back.
	if err := os.Rename(db, db+".aside"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "/readyz to say the database is gone", func() bool {
		code, why := storeReadyz(t, g.addr)
		return code == 503 && strings.Contains(why, "was removed while the gateway runs")
	})
	// The ERROR line follows the change /readyz reports: wait for it, then
	// check that it came once.
	testkit.WaitUntil(t, "the gateway to log that its store is not usable", func() bool {
		return storeLogLines(g.gw, "store not usable: not ready until it is") >= 1
	})
	if storeLogLines(g.gw, "store not usable: not ready until it is") != 1 || !strings.Contains(g.gw.logs.String(), `"level":"ERROR"`) {
		t.Fatalf("the gateway's log:\n%s", g.gw.logs.String())
	}
	if _, errOut, err := gwCLIResult(t, g.key, "status", "--health", "--url", "http://"+g.addr); err == nil || !strings.Contains(errOut, "was removed") {
		t.Fatalf("status --health with the database gone: %v %s", err, errOut)
	}
	for _, args := range [][]string{
		{"token", "create", "--connector", "desk"},
		{"token", "revoke", tok.ID},
		{"token", "list"},
	} {
		out, errOut, err := gwCLIResult(t, g.key, args...)
		if err == nil || !strings.Contains(errOut, "removed while the gateway runs. Nothing was changed") || out != "" {
			t.Fatalf("%v with the database gone: %v\n%s%s", args, err, out, errOut)
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Fatal("a token command made a new database")
	}
	if err := os.Rename(db+".aside", db); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "/readyz to be ready again", func() bool {
		code, _ := storeReadyz(t, g.addr)
		return code == 200
	})
	// The refused revocation changed nothing; now it is made, and the
	// gateway refuses the token.
	if code, _ := refusal(t, g.addr, tok.Token); code != 200 {
		t.Fatalf("the token after a refused revocation: %d", code)
	}
	gwCLI(t, g.key, "token", "revoke", tok.ID)
	testkit.WaitUntil(t, "the revoked token to be refused", func() bool {
		code, _ := refusal(t, g.addr, tok.Token)
		return code == 401
	})

	// Deleted for good: the same, and a restart says the database is new.
	if err := os.Remove(db); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "/readyz to say the database is gone", func() bool {
		code, why := storeReadyz(t, g.addr)
		return code == 503 && strings.Contains(why, "was removed while the gateway runs")
	})
	if _, errOut, err := gwCLIResult(t, g.key, "token", "create", "--dashboard"); err == nil || !strings.Contains(errOut, "Nothing was changed") {
		t.Fatalf("token create with the database deleted: %v %s", err, errOut)
	}
	g.restart()
	if !strings.Contains(g.gw.logs.String(), "store created: a new, empty database") {
		t.Fatalf("a restart on a removed database did not say it starts empty:\n%s", g.gw.logs.String())
	}
}

// A database replaced under the running gateway — another gateway's file
// copied over it — is noticed the same way, and the token commands refuse
// it without opening it.
func TestTheGatewayNoticesItsDatabaseReplaced(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	other := startGateway(t)
	db := filepath.Join(g.dataDir, "gateway.db")
	data, err := os.ReadFile(filepath.Join(other.dataDir, "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db+".new", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(db+".new", db); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "/readyz to say the database was replaced", func() bool {
		code, why := storeReadyz(t, g.addr)
		return code == 503 && strings.Contains(why, "was replaced while the gateway runs")
	})
	_, errOut, err := gwCLIResult(t, g.key, "token", "create", "--connector", "desk")
	if err == nil || !strings.Contains(errOut, "the file was replaced while the gateway runs. Nothing was changed") {
		t.Fatalf("token create on the replaced database: %v\n%s", err, errOut)
	}
	after, _ := os.ReadFile(db)
	if string(after) != string(data) {
		t.Fatal("the refused command changed the file")
	}
}

// The report: /readyz stayed 200 while the tokens table was corrupt and
// every request got 503. Now /readyz is 503 and says so, and the ERROR is
// logged once.
func TestReadyzFailsWhileTheTokensTableIsCorrupt(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	path := filepath.Join(g.dataDir, "gateway.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	var pageSize int64
	if err := db.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The table and its index by id, which a token's lookup reads.
	for _, name := range []string{"tokens", "sqlite_autoindex_tokens_1"} {
		var root int64
		if err := db.QueryRow(`SELECT rootpage FROM sqlite_schema WHERE name = ?`, name).Scan(&root); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		garbage := make([]byte, pageSize)
		binary.BigEndian.PutUint32(garbage, 0xdeadbeef)
		if _, err := f.WriteAt(garbage, (root-1)*pageSize); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// Any commit makes the gateway's connections read the pages again.
	if _, err := db.Exec(`INSERT INTO audit (at, action) VALUES (1, 'poke')`); err != nil {
		t.Fatal(err)
	}
	// A token the gateway has not seen yet is looked up in the table.
	fresh := createTokenCorrupt(t, g)
	req, _ := http.NewRequest("GET", "http://"+g.addr+"/api/gateway/endpoints", nil)
	req.Header.Set("Authorization", "Bearer "+fresh)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 503 {
		t.Fatalf("a request with a token the corrupt table must answer: %v %v", resp, err)
	}
	testkit.WaitUntil(t, "/readyz to say the store is damaged", func() bool {
		code, why := storeReadyz(t, g.addr)
		return code == 503 && strings.Contains(why, "store: ") && strings.Contains(why, "tokens")
	})
	if n := storeLogLines(g.gw, "store not usable: not ready until it is"); n != 1 {
		t.Fatalf("%d ERROR lines for one change of state:\n%s", n, g.gw.logs.String())
	}
}

// createTokenCorrupt signs a dashboard token with the gateway's key and
// records it elsewhere: the gateway's own store is damaged.
func createTokenCorrupt(t *testing.T, g *gatewayEnv) string {
	t.Helper()
	return gwCLI(t, g.key, "token", "create", "--dashboard", "--data-dir", t.TempDir())
}

// On PostgreSQL the database behind the URL is checked by its identity:
// another database restored in its place makes the gateway not ready, and
// token commands say whether a gateway's heartbeat shows it in use.
func TestTheGatewayNoticesItsPostgresDatabaseReplaced(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	key := gwCLI(t, "", "key", "generate")
	useStore(key, "UNCAGED_GATEWAY_DATABASE_URL="+url)
	_, errOut, err := gwCLIResult(t, key, "token", "create", "--dashboard")
	if err != nil || !strings.Contains(errOut, "database: PostgreSQL database") || !strings.Contains(errOut, "no running gateway uses this database") {
		t.Fatalf("token create with no gateway: %v\n%s", err, errOut)
	}
	p := startProc(t, []string{"UNCAGED_GATEWAY_KEY=" + key, "UNCAGED_GATEWAY_DATABASE_URL=" + url}, "uncaged-gateway", "serve", "--listen", "127.0.0.1:0")
	addr := p.listening(t)
	waitOK(t, "the gateway to be ready", "http://"+addr+"/readyz")
	_, errOut, err = gwCLIResult(t, key, "token", "list")
	if err != nil || strings.Contains(errOut, "no running gateway") {
		t.Fatalf("token list beside the gateway: %v\n%s", err, errOut)
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(context.Background(), `UPDATE store_identity SET id = 'restored-from-elsewhere'`); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "/readyz to say the database was replaced", func() bool {
		code, why := storeReadyz(t, addr)
		return code == 503 && strings.Contains(why, "is database restored-from-elsewhere")
	})
}
