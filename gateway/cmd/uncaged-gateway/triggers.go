package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/uncaged/workflow/gateway/notify"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/gateway/server"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/gateway/trigger"
	"github.com/uncaged/workflow/shared/envflag"
)

// The trigger commands work on the gateway's store, as the token
// commands do: a running gateway reads a webhook's trigger at each
// delivery and looks at the schedules every few seconds, so what they
// change takes effect without a restart, on every replica.

func triggerCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "trigger", Short: "Create, list, pause, resume and remove the webhooks and schedules that start threads; give a webhook a new secret"}
	cmd.AddCommand(triggerCreateCmd(), triggerListCmd(), triggerRemoveCmd(), triggerPauseCmd(true), triggerPauseCmd(false), triggerRotateCmd())
	return cmd
}

// triggerOutJSON is a trigger as `trigger list --json` and
// `trigger create --json` print it; Secret only from create.
type triggerOutJSON struct {
	ID        string     `json:"id"`
	Kind      string     `json:"kind"`
	Machine   string     `json:"machine"`
	Workflow  string     `json:"workflow"`
	URL       string     `json:"url,omitempty"`
	Secret    string     `json:"secret,omitempty"`
	Schedule  string     `json:"schedule,omitempty"`
	TimeZone  string     `json:"timezone,omitempty"`
	Missed    string     `json:"missed,omitempty"`
	Prompt    string     `json:"prompt,omitempty"`
	Note      string     `json:"note,omitempty"`
	Expire    string     `json:"expire"`
	Paused    bool       `json:"paused"`
	Created   time.Time  `json:"created"`
	LastFired *time.Time `json:"lastFired,omitempty"`
}

func triggerOut(t store.Trigger, publicURL string) triggerOutJSON {
	j := triggerOutJSON{ID: t.ID, Kind: string(t.Kind), Machine: t.Machine, Workflow: t.Workflow, Schedule: t.Schedule,
		TimeZone: t.TimeZone, Missed: string(t.Missed), Prompt: t.Prompt, Note: t.Note, Expire: t.Expire.String(), Paused: t.Paused,
		Created: t.CreatedAt, LastFired: t.LastFired}
	if t.Kind == store.TriggerWebhook {
		j.URL = hookURL(publicURL, t.ID)
	}
	return j
}

// hookURL is a webhook's URL under the gateway's public URL, or its path
// when none is given.
func hookURL(publicURL, id string) string {
	return strings.TrimSuffix(publicURL, "/") + "/hooks/" + id
}

// publicURLFlag is --public-url on the trigger commands, the same flag
// and variable as serve's.
func publicURLFlag(cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "public-url", "", "https://host[/path] where the gateway is reached, to print a webhook's full URL (default: the path alone)")
	envflag.Bind(cmd.Flags(), "public-url", envName("public-url"))
}

// auditTrigger records a trigger command in the audit log; a failure to
// record is reported but does not undo what was done.
func auditTrigger(ctx context.Context, st store.Store, stderr io.Writer, action string, t store.Trigger) {
	if _, err := st.AppendAudit(ctx, store.AuditEntry{Actor: cliActor, Source: cliSource, Action: action, Machine: t.Machine, Target: t.ID, Status: http.StatusOK}); err != nil {
		fmt.Fprintf(stderr, "warning: %s of trigger %s not recorded in the audit log: %v\n", action, t.ID, err)
	}
}

func triggerCreateCmd() *cobra.Command {
	var st storeFlags
	var spec trigger.Spec
	var missed, publicURL string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "create --machine NAME --workflow NAME (--webhook | --schedule CRON [--timezone TZ]) [--prompt TEMPLATE] [--note TEXT]",
		Short: "Make a webhook or a schedule that starts a workflow's thread on a machine",
		Long: `Make a trigger that starts a thread of --workflow on the machine --machine
(its connector's name).

--webhook prints the URL to deliver to (POST <public-url>/hooks/<id>) and a
secret. A delivery is taken only when its body is signed with HMAC-SHA256
under that secret, in X-Hub-Signature-256 (as GitHub signs: paste the URL
and the secret into a GitHub webhook) or X-Uncaged-Signature. The thread's
prompt is --prompt, a Go template over the delivery's JSON body
({{.issue.title}}), or the whole body when no --prompt is given. A delivery
repeated with the same X-GitHub-Delivery or X-Uncaged-Delivery id starts one
thread.

--schedule takes a standard cron expression (five fields, or @daily,
@hourly, @every 30m) read in --timezone (an IANA name; UTC by default). A
time missed while no gateway ran is run once when one starts (--missed
run-once), or not at all (--missed skip). The prompt's template reads
.trigger, .machine, .workflow and .scheduledFor.

A run for a machine that is offline waits for it, in order, for --expire
(24h by default), and is started when it connects.`,
		Args:    cobra.NoArgs,
		PreRunE: fromEnv,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !presence.ValidName(spec.Machine) {
				return fmt.Errorf("--machine %q: a connector name: lowercase letters, digits and hyphens (at most 63), as the connector's --name", spec.Machine)
			}
			if _, err := notify.ParsePublicURL(publicURL); err != nil {
				return fmt.Errorf("--public-url: %w", err)
			}
			spec.Missed = store.MissedPolicy(missed)
			if spec.Missed != "" && spec.Missed != store.MissedRunOnce && spec.Missed != store.MissedSkip {
				return fmt.Errorf("--missed %q: want run-once or skip", missed)
			}
			spec.CreatedBy = cliActor
			t, err := trigger.New(spec, time.Now())
			if err != nil {
				return err
			}
			if err := withStore(cmd, &st, true, func(ctx context.Context, s store.Store) error {
				if err := s.CreateTrigger(ctx, t); err != nil {
					return err
				}
				auditTrigger(ctx, s, cmd.ErrOrStderr(), server.ActionTriggerCreate, t)
				return nil
			}); err != nil {
				return err
			}
			out := triggerOut(t, publicURL)
			if asJSON {
				out.Secret = t.Secret
				return writeJSON(cmd.OutOrStdout(), out)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "trigger %s: %s on %s\n", t.ID, t.Workflow, t.Machine)
			if t.Kind == store.TriggerWebhook {
				fmt.Fprintf(w, "url:    %s\nsecret: %s\n", out.URL, t.Secret)
				fmt.Fprintln(cmd.ErrOrStderr(), "the secret is shown only now: keep it with the sender (a GitHub webhook's Secret, content type application/json)")
				if publicURL == "" {
					fmt.Fprintln(cmd.ErrOrStderr(), "give --public-url (or UNCAGED_GATEWAY_PUBLIC_URL) to print the full URL senders reach the gateway at")
				}
			} else {
				s, _ := trigger.ParseSchedule(t.Schedule, t.TimeZone) // New parsed it
				fmt.Fprintf(w, "schedule: %s (%s), next at %s\n", t.Schedule, zoneName(t.TimeZone), s.Next(time.Now()).Format(time.RFC3339))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&spec.Machine, "machine", "", "the machine (connector name) the threads start on")
	f.StringVar(&spec.Workflow, "workflow", "", "the workflow to run, as registered on that machine")
	f.BoolVar(&spec.Webhook, "webhook", false, "start a thread for each signed delivery to the trigger's URL")
	f.StringVar(&spec.Schedule, "schedule", "", "start a thread at the times of this cron expression (\"0 2 * * *\", @daily)")
	f.StringVar(&spec.TimeZone, "timezone", "", "the schedule's time zone, an IANA name such as Europe/Berlin (default: UTC)")
	f.StringVar(&missed, "missed", "", "a schedule's time missed while no gateway ran: run-once (default) or skip")
	f.StringVar(&spec.Prompt, "prompt", "", "the thread's prompt, a Go template over the webhook's JSON body, such as 'Fix #{{.issue.number}}: {{.issue.title}}' (default: the whole body)")
	f.StringVar(&spec.Note, "note", "", "a note shown by trigger list and in the dashboard")
	f.DurationVar(&spec.Expire, "expire", store.DefaultRunExpiry, "how long a run waits for its machine to come online")
	f.BoolVar(&asJSON, "json", false, "print {id, url, secret, ...} as JSON")
	publicURLFlag(cmd, &publicURL)
	st.register(cmd)
	return cmd
}

func zoneName(tz string) string {
	if tz == "" {
		return "UTC"
	}
	return tz
}

func triggerListCmd() *cobra.Command {
	var st storeFlags
	var publicURL string
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list [--json]",
		Short:   "List the triggers, oldest first (never their secrets)",
		Args:    cobra.NoArgs,
		PreRunE: fromEnv,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list []store.Trigger
			if err := withStore(cmd, &st, false, func(ctx context.Context, s store.Store) (err error) {
				list, err = s.ListTriggers(ctx)
				return err
			}); err != nil {
				return err
			}
			if asJSON {
				out := make([]triggerOutJSON, 0, len(list))
				for _, t := range list {
					out = append(out, triggerOut(t, publicURL))
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tKIND\tMACHINE\tWORKFLOW\tWHEN\tSTATE\tNOTE")
			for _, t := range list {
				when := hookURL(publicURL, t.ID)
				if t.Kind == store.TriggerSchedule {
					when = t.Schedule + " " + zoneName(t.TimeZone)
				}
				state := "active"
				if t.Paused {
					state = "paused"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Kind, t.Machine, t.Workflow, when, state, dash(oneLine(t.Note)))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the triggers as a JSON array")
	publicURLFlag(cmd, &publicURL)
	st.register(cmd)
	return cmd
}

func triggerRemoveCmd() *cobra.Command {
	var st storeFlags
	cmd := &cobra.Command{
		Use:     "rm ID",
		Short:   "Remove a trigger and its runs: its URL answers 404 from then on",
		Args:    exactTriggerID,
		PreRunE: fromEnv,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, &st, false, func(ctx context.Context, s store.Store) error {
				t, err := getTrigger(ctx, s, args[0])
				if err != nil {
					return err
				}
				if err := s.DeleteTrigger(ctx, t.ID); err != nil {
					return err
				}
				auditTrigger(ctx, s, cmd.ErrOrStderr(), server.ActionTriggerDelete, t)
				fmt.Fprintf(cmd.OutOrStdout(), "removed trigger %s (%s on %s)\n", t.ID, t.Workflow, t.Machine)
				return nil
			})
		},
	}
	st.register(cmd)
	return cmd
}

func triggerPauseCmd(pause bool) *cobra.Command {
	var st storeFlags
	verb, action, short := "resume", server.ActionTriggerResume, "Resume a paused trigger"
	if pause {
		verb, action, short = "pause", server.ActionTriggerPause, "Pause a trigger: its webhook refuses deliveries (409) and its schedule does not fire; queued runs wait"
	}
	cmd := &cobra.Command{
		Use:     verb + " ID",
		Short:   short,
		Args:    exactTriggerID,
		PreRunE: fromEnv,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, &st, false, func(ctx context.Context, s store.Store) error {
				if _, err := getTrigger(ctx, s, args[0]); err != nil {
					return err
				}
				t, err := s.SetTriggerPaused(ctx, args[0], pause)
				if err != nil {
					return err
				}
				auditTrigger(ctx, s, cmd.ErrOrStderr(), action, t)
				fmt.Fprintf(cmd.OutOrStdout(), "%sd trigger %s (%s on %s)\n", verb, t.ID, t.Workflow, t.Machine)
				return nil
			})
		},
	}
	st.register(cmd)
	return cmd
}

func triggerRotateCmd() *cobra.Command {
	var st storeFlags
	var keep time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rotate-secret ID [--keep-previous 24h]",
		Short: "Give a webhook a new secret, shown once; the old one keeps working for --keep-previous",
		Long: `Give webhook ID a new secret and print it, this once. The secret it had
stays accepted for --keep-previous (24h by default), so that the sender can
be given the new one without a delivery refused; --keep-previous 0 ends it
at once, for a secret that leaked. Rotating again forgets the older one.`,
		Args:    exactTriggerID,
		PreRunE: fromEnv,
		RunE: func(cmd *cobra.Command, args []string) error {
			until, err := trigger.PreviousUntil(keep, time.Now())
			if err != nil {
				return fmt.Errorf("--keep-previous %w", err)
			}
			return withStore(cmd, &st, false, func(ctx context.Context, s store.Store) error {
				t, err := getTrigger(ctx, s, args[0])
				if err != nil {
					return err
				}
				if t.Kind != store.TriggerWebhook {
					return fmt.Errorf("trigger %s is a schedule: only a webhook has a secret", t.ID)
				}
				if t, err = s.RotateTriggerSecret(ctx, t.ID, trigger.NewSecret(), until); err != nil {
					return err
				}
				auditTrigger(ctx, s, cmd.ErrOrStderr(), server.ActionTriggerRotateSecret, t)
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), struct {
						ID            string     `json:"id"`
						Secret        string     `json:"secret"`
						PreviousUntil *time.Time `json:"previousUntil,omitempty"`
					}{t.ID, t.Secret, until})
				}
				fmt.Fprintf(cmd.OutOrStdout(), "trigger %s: %s on %s\nsecret: %s\n", t.ID, t.Workflow, t.Machine, t.Secret)
				fmt.Fprintln(cmd.ErrOrStderr(), "the secret is shown only now: give it to the sender")
				if until != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "the previous secret is accepted until %s\n", until.Format(time.RFC3339))
				} else {
					fmt.Fprintln(cmd.ErrOrStderr(), "the previous secret is no longer accepted")
				}
				return nil
			})
		},
	}
	cmd.Flags().DurationVar(&keep, "keep-previous", trigger.DefaultKeepPrevious, "how long the old secret stays accepted beside the new one (0: not at all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {id, secret, previousUntil} as JSON")
	st.register(cmd)
	return cmd
}

// withStore runs fn on the store st names, closing it after: every
// trigger command's change is committed by the time fn returns.
func withStore(cmd *cobra.Command, st *storeFlags, create bool, fn func(ctx context.Context, s store.Store) error) error {
	ctx, s, err := st.open(cmd, create)
	if err != nil {
		return err
	}
	defer func() { _ = s.Close() }() // committed before, or only read from
	return fn(ctx, s)
}

// exactTriggerID wants one argument, a trigger's id.
func exactTriggerID(_ *cobra.Command, args []string) error {
	if len(args) != 1 {
		return errors.New("give the trigger's ID (see uncaged-gateway trigger list)")
	}
	return nil
}

// getTrigger is the trigger with id, or an error that says there is none.
func getTrigger(ctx context.Context, s store.Store, id string) (store.Trigger, error) {
	t, err := s.GetTrigger(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Trigger{}, fmt.Errorf("no trigger with id %q (see uncaged-gateway trigger list)", id)
	}
	return t, err
}
