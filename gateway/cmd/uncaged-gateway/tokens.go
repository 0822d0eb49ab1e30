package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/gateway/server"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/envflag"
)

// DefaultDashboardTTL is how long a dashboard token is valid when
// `token create --dashboard` is given no --ttl.
const DefaultDashboardTTL = 30 * 24 * time.Hour

// Audit entries of the token commands: who acted is the person at the
// gateway's own machine, with no token to name.
const (
	cliActor  = "cli"
	cliSource = "local"
)

// storeFlags are the store's flags, the same on serve and the token
// commands (with the same variables), so that `token revoke` changes the
// database the gateway beside it uses.
type storeFlags struct {
	dataDir, databaseURL, databaseURLFile string
	// defaulted is set by config when neither flags nor variables named
	// a store, and the default data directory is used.
	defaulted bool
}

// register adds the flags to cmd, each bound to its variable.
func (s *storeFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.dataDir, "data-dir", "", "directory of the gateway's SQLite database, gateway.db (default: ~/.uncaged/gateway; not used with --database-url)")
	cmd.Flags().StringVar(&s.databaseURLFile, "database-url-file", "", "file holding the PostgreSQL URL; wins over --database-url")
	cmd.Flags().StringVar(&s.databaseURL, "database-url", "", "PostgreSQL URL (postgres://user:password@host/db): keep the gateway's state there instead of SQLite; cluster mode needs it")
	for _, name := range []string{"data-dir", "database-url", "database-url-file"} {
		envflag.Bind(cmd.Flags(), name, envName(name))
	}
}

// config is the store the flags name: PostgreSQL when a URL is given,
// else the SQLite file in the data directory (its default if none).
func (s *storeFlags) config() (store.Config, error) {
	url, err := envflag.ReadSecret(s.databaseURL, s.databaseURLFile)
	if err != nil {
		return store.Config{}, fmt.Errorf("--database-url-file: %w", err)
	}
	dir := s.dataDir
	if url == "" && dir == "" {
		if dir, err = defaultDataDir(); err != nil {
			return store.Config{}, err
		}
		s.defaulted = true
	}
	return store.Config{DataDir: dir, DatabaseURL: url}, nil
}

// open opens the store the flags name for cmd, with cmd's context (one
// for the command's whole run when cobra gave none), and says on
// standard error which database it is and whether a running gateway uses
// it. Only create may make a new database. A data directory whose
// gateway is running but whose database is not the one that gateway
// opened (removed or replaced under it) is refused, changing nothing:
// what the command did there would never reach the gateway.
func (s *storeFlags) open(cmd *cobra.Command, create bool) (context.Context, store.Store, error) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	cfg, err := s.config()
	if err != nil {
		return nil, nil, err
	}
	stderr := cmd.ErrOrStderr()
	var holder *store.Holder
	if cfg.DatabaseURL == "" {
		path := filepath.Join(cfg.DataDir, store.SQLiteFile)
		// Before the database is opened: opening would make a new one.
		if holder, err = store.SQLiteHolder(cfg.DataDir); err != nil {
			return nil, nil, err
		}
		file, err := store.FileID(path)
		if err != nil {
			return nil, nil, err
		}
		switch missing := file == ""; {
		case missing && holder != nil:
			return nil, nil, fmt.Errorf("the gateway running here (%s) uses database %s, but %s no longer exists: it was removed while the gateway runs. Nothing was changed. Put the file back (the gateway goes on writing to the removed one until then), or restart the gateway, which then starts an empty database without the tokens it had",
				holder, holder.Database, path)
		case holder != nil && holder.File != "" && holder.File != file:
			// Not opened: beside it is the write-ahead log of the gateway's
			// file, which SQLite would read into this one.
			return nil, nil, fmt.Errorf("%s is not the file the gateway running here (%s) opened, database %s: the file was replaced while the gateway runs. Nothing was changed. Put the gateway's file back, or restart the gateway to use this one",
				path, holder, holder.Database)
		case missing && !create:
			return nil, nil, fmt.Errorf("no database at %s: no gateway has kept its state in %s (check --data-dir, or UNCAGED_GATEWAY_DATA_DIR)", path, cfg.DataDir)
		case missing:
			fmt.Fprintf(stderr, "warning: no database at %s: creating a new, empty one\n", path)
		}
	}
	st, err := store.Open(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	if holder != nil && holder.Database != st.Identity().ID {
		_ = st.Close() // nothing was written
		return nil, nil, fmt.Errorf("%s is database %s, not database %s, the one the gateway running here (%s) uses: the file was replaced while the gateway runs. Nothing was changed. Put the gateway's file back, or restart the gateway to use this one",
			st.Where(), st.Identity().ID, holder.Database, holder)
	}
	if s.defaulted {
		fmt.Fprintf(stderr, "database: %s (the default: no --data-dir, %s or --database-url given)\n", st.Where(), envName("data-dir"))
	} else {
		fmt.Fprintf(stderr, "database: %s\n", st.Where())
	}
	holders, err := st.Holders(ctx)
	if err != nil {
		_ = st.Close() // nothing was written
		return nil, nil, err
	}
	if len(holders) == 0 {
		fmt.Fprint(stderr, noGatewayWarning(cfg))
	}
	return ctx, st, nil
}

// noGatewayWarning says that no running gateway uses cfg's database,
// which gateway would, and which databases the gateways running on this
// machine use instead.
func noGatewayWarning(cfg store.Config) string {
	same := "--database-url"
	if cfg.DatabaseURL == "" {
		same = "--data-dir " + cfg.DataDir
	}
	msg := "warning: no running gateway uses this database: only a gateway started with " + same + " will see this command's changes\n"
	gateways, err := runningGateways()
	if err != nil {
		return msg + "  (cannot tell which gateways run on this machine: " + err.Error() + ")\n"
	}
	return msg + elsewhere(gateways)
}

// tokenJSON is a token's record as `token list --json` and
// `token create --json` print it.
type tokenJSON struct {
	ID      string     `json:"id"`
	Kind    string     `json:"kind"`
	Name    string     `json:"name,omitempty"`
	Created time.Time  `json:"created"`
	Expires *time.Time `json:"expires"`
	Note    string     `json:"note,omitempty"`
	Revoked *time.Time `json:"revoked"`
	// Token is the token itself, only from create.
	Token string `json:"token,omitempty"`
}

func toJSON(t store.Token) tokenJSON {
	return tokenJSON{ID: t.ID, Kind: string(t.Kind), Name: t.Name, Created: t.CreatedAt, Expires: t.ExpiresAt, Note: t.Note, Revoked: t.RevokedAt}
}

// audit records a token command in the audit log. A failure to record
// is reported but does not undo what was done.
func audit(ctx context.Context, st store.Store, stderr io.Writer, action string, t store.Token) {
	machine := ""
	if t.Kind == store.KindConnector {
		machine = t.Name
	}
	if _, err := st.AppendAudit(ctx, store.AuditEntry{Actor: cliActor, Source: cliSource, Action: action, Machine: machine, Target: t.ID, Status: http.StatusOK}); err != nil {
		fmt.Fprintf(stderr, "warning: %s of token %s not recorded in the audit log: %v\n", action, t.ID, err)
	}
}

func tokenCmd() *cobra.Command {
	tok := &cobra.Command{Use: "token", Short: "Create, list and revoke tokens"}
	tok.AddCommand(tokenCreateCmd(), tokenListCmd(), tokenRevokeCmd())
	return tok
}

func tokenCreateCmd() *cobra.Command {
	var connector, note string
	var key keyFlags
	var st storeFlags
	var dashboard, asJSON bool
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "create --connector NAME | --dashboard [--ttl DURATION] [--note TEXT]",
		Short: "Issue a token signed with the gateway's key and record it, so it can be listed and revoked",
		Long: `Issue a token signed with the gateway's key and record it in the gateway's
store (the same --data-dir or --database-url as serve), so that it can be
listed and revoked. The token alone is printed on standard output; its id
goes to standard error (or, with --json, everything to standard output).`,
		Args:    cobra.NoArgs,
		PreRunE: fromEnv,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (connector == "") == !dashboard {
				return errors.New("give exactly one of --connector NAME or --dashboard")
			}
			if connector != "" && !presence.ValidName(connector) {
				return fmt.Errorf("--connector %q: invalid connector name: use lowercase letters, digits and hyphens (at most 63), as the connector's --name", connector)
			}
			if ttl < 0 {
				return fmt.Errorf("--ttl %s: must not be negative (0: never expires)", ttl)
			}
			role := auth.RoleDashboard
			if connector != "" {
				role = auth.RoleConnector
			} else if !cmd.Flags().Changed("ttl") {
				ttl = DefaultDashboardTTL
			}
			a, err := authority(&key, "")
			if err != nil {
				return err
			}
			token, rec, err := a.Mint(role, connector, ttl, note)
			if err != nil {
				return err
			}
			ctx, s, err := st.open(cmd, true)
			if err != nil {
				return err
			}
			defer func() { _ = s.Close() }() // read-write work is committed; nothing left to lose
			if err := s.CreateToken(ctx, rec); err != nil {
				return err
			}
			audit(ctx, s, cmd.ErrOrStderr(), server.ActionTokenCreate, rec)
			if role == auth.RoleDashboard && ttl == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning: this dashboard token never expires (--ttl 0); revoke it with `uncaged-gateway token revoke "+rec.ID+"` when it is no longer needed")
			}
			if asJSON {
				j := toJSON(rec)
				j.Token = token
				return writeJSON(cmd.OutOrStdout(), j)
			}
			expires := "never expires"
			if rec.ExpiresAt != nil {
				expires = "expires " + rec.ExpiresAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "token id %s (%s, %s)\n", rec.ID, describe(rec), expires)
			fmt.Fprintln(cmd.OutOrStdout(), token)
			return nil
		},
	}
	cmd.Flags().StringVar(&connector, "connector", "", "issue a connector token bound to this name")
	cmd.Flags().BoolVar(&dashboard, "dashboard", false, "issue a dashboard token")
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "validity; 0: never expires (default: 720h for a dashboard token, never for a connector token)")
	cmd.Flags().StringVar(&note, "note", "", "a note recorded with the token, shown by token list and in the audit log (who holds it, what for)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the token and its record as JSON")
	key.register(cmd)
	st.register(cmd)
	return cmd
}

// describe names a token for people: its kind and name.
func describe(t store.Token) string {
	if t.Kind == store.KindConnector {
		return "connector " + t.Name
	}
	return string(t.Kind)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func tokenListCmd() *cobra.Command {
	var st storeFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list [--json]",
		Short:   "List the recorded tokens, newest first",
		Args:    cobra.NoArgs,
		PreRunE: fromEnv,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, s, err := st.open(cmd, false)
			if err != nil {
				return err
			}
			defer func() { _ = s.Close() }() // only read from
			toks, err := s.ListTokens(ctx, store.TokenFilter{})
			if err != nil {
				return err
			}
			if asJSON {
				out := make([]tokenJSON, 0, len(toks))
				for _, t := range toks {
					out = append(out, toJSON(t))
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			return printTokens(cmd.OutOrStdout(), toks, time.Now())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tokens as a JSON array")
	st.register(cmd)
	return cmd
}

// printTokens writes the token table: one aligned row a token.
func printTokens(w io.Writer, toks []store.Token, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tNAME\tCREATED\tEXPIRES\tNOTE\tREVOKED")
	for _, t := range toks {
		expires := "never"
		if t.ExpiresAt != nil {
			expires = stamp(*t.ExpiresAt)
			if !t.ExpiresAt.After(now) {
				expires += " (expired)"
			}
		}
		revoked := "-"
		if t.RevokedAt != nil {
			revoked = stamp(*t.RevokedAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Kind, dash(t.Name), stamp(t.CreatedAt), expires, dash(oneLine(t.Note)), revoked)
	}
	return tw.Flush()
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04Z") }

// oneLine keeps a note from breaking the table.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func tokenRevokeCmd() *cobra.Command {
	var st storeFlags
	var connector, kind string
	cmd := &cobra.Command{
		Use:   "revoke ID | --connector NAME | --kind dashboard|connector",
		Short: "Revoke tokens: one by id, every token of a connector, or every token of a kind",
		Long: `Revoke tokens in the gateway's store. A running gateway refuses them within
a few seconds (every replica of a cluster), disconnects the connectors
that use them and ends the dashboard sessions made with them. Prints what
was revoked; revoking nothing is an error.`,
		Args:    cobra.MaximumNArgs(1),
		PreRunE: fromEnv,
		RunE: func(cmd *cobra.Command, args []string) error {
			given := 0
			for _, b := range []bool{len(args) == 1, connector != "", kind != ""} {
				if b {
					given++
				}
			}
			if given != 1 {
				return errors.New("give exactly one of a token ID, --connector NAME or --kind dashboard|connector")
			}
			if kind != "" && kind != string(store.KindDashboard) && kind != string(store.KindConnector) {
				return fmt.Errorf("--kind %q: want dashboard or connector", kind)
			}
			ctx, s, err := st.open(cmd, false)
			if err != nil {
				return err
			}
			defer func() { _ = s.Close() }() // the revocation is committed before
			var revoked []store.Token
			switch {
			case len(args) == 1:
				id := args[0]
				before, err := s.GetToken(ctx, id)
				if errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("no token with id %q (see uncaged-gateway token list)", id)
				} else if err != nil {
					return err
				}
				if before.RevokedAt != nil {
					return fmt.Errorf("token %s (%s) was already revoked at %s: nothing revoked", id, describe(before), before.RevokedAt.UTC().Format(time.RFC3339))
				}
				t, err := s.RevokeToken(ctx, id)
				if err != nil {
					return err
				}
				revoked = []store.Token{t}
			case connector != "":
				if revoked, err = s.RevokeConnectorTokens(ctx, connector); err != nil {
					return err
				}
				if len(revoked) == 0 {
					return fmt.Errorf("no unrevoked token of connector %q: nothing revoked", connector)
				}
			default:
				if revoked, err = s.RevokeKind(ctx, store.TokenKind(kind)); err != nil {
					return err
				}
				if len(revoked) == 0 {
					return fmt.Errorf("no unrevoked %s token: nothing revoked", kind)
				}
			}
			for _, t := range revoked {
				audit(ctx, s, cmd.ErrOrStderr(), server.ActionTokenRevoke, t)
				note := ""
				if t.Note != "" {
					note = ", " + oneLine(t.Note)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "revoked %s (%s%s)\n", t.ID, describe(t), note)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&connector, "connector", "", "revoke every token of this connector")
	cmd.Flags().StringVar(&kind, "kind", "", "revoke every token of this kind: dashboard or connector")
	st.register(cmd)
	return cmd
}
