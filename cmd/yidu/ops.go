package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/callback"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/cmd/internal/process"
	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/migrations"
	"github.com/yidu-io/yidu/page"
	"github.com/yidu-io/yidu/reconcile"
	"github.com/yidu-io/yidu/wecom"
)

// migrate runs `yidu migrate up|status|down`.
func migrate(ctx context.Context, cfg config.Config, args []string, out io.Writer) error {
	if args[0] == "up" {
		if err := process.CreateDatabase(ctx, cfg.MySQL.DSN); err != nil {
			return err
		}
	}
	db, err := process.OpenDB(cfg.MySQL.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	p, err := migrations.NewProvider(db)
	if err != nil {
		return err
	}
	switch args[0] {
	case "up":
		res, err := p.Up(ctx)
		if err != nil {
			return fmt.Errorf("migrate up: %w", err)
		}
		for _, r := range res {
			fmt.Fprintf(out, "applied %d %s (%s)\n", r.Source.Version, r.Source.Path, r.Duration.Round(time.Millisecond))
		}
		v, err := p.GetDBVersion(ctx)
		if err != nil {
			return fmt.Errorf("migrate: version: %w", err)
		}
		fmt.Fprintf(out, "schema at version %d\n", v)
	case "down":
		r, err := p.Down(ctx)
		if errors.Is(err, goose.ErrNoNextVersion) {
			// Like up with nothing pending: done, not a failure (goose's
			// "no next version found" told an operator nothing).
			fmt.Fprintln(out, "schema at version 0: nothing to roll back")
			return nil
		}
		if err != nil {
			return fmt.Errorf("migrate down: %w", err)
		}
		fmt.Fprintf(out, "rolled back %d %s\n", r.Source.Version, r.Source.Path)
	case "status":
		st, err := p.Status(ctx)
		if err != nil {
			return fmt.Errorf("migrate status: %w", err)
		}
		for _, s := range st {
			at := "pending"
			if !s.AppliedAt.IsZero() {
				at = "applied " + s.AppliedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(out, "%5d  %-28s %s\n", s.Source.Version, s.Source.Path, at)
		}
	default:
		return fmt.Errorf("migrate: unknown step %q (up, status, down)", args[0])
	}
	return nil
}

// syncDirectory runs `yidu directory sync --app NAME`: the app's secret
// reads its visible range; the corp's contacts-sync secret, when
// configured, the whole corp (wecom.Directory).
func syncDirectory(ctx context.Context, cfg config.Config, appName string, logger *slog.Logger, out io.Writer) error {
	app, ok := cfg.App(appName)
	if !ok {
		return fmt.Errorf("directory sync: no app %q in the configuration", appName)
	}
	if app.Secret == "" {
		return fmt.Errorf("directory sync: app %q has no secret (%s)", appName, config.EnvName(appName, "secret"))
	}
	dir, err := wecom.NewDirectory(wecom.App{CorpID: app.CorpID, AgentID: app.AgentID, Secret: app.Secret},
		wecom.DirectoryOptions{ContactsSecret: app.ContactsSecret})
	if err != nil {
		return fmt.Errorf("directory sync --app %s: %w", appName, err)
	}
	db, err := process.OpenDB(cfg.MySQL.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	process.PointWeCom(cfg.WeCom)
	// Members the sync finds gone lose their reading page sessions.
	rdb, err := process.NewRedis(cfg.Redis)
	if err != nil {
		return err
	}
	defer rdb.Close()
	m, err := idmap.New(db, idmap.Options{Logger: logger, Revoker: page.NewSessions(rdb, cfg.Redis.Prefix, cfg.Receiver.SessionTTL.D())})
	if err != nil {
		return err
	}
	s, err := idmap.NewSyncer(m, map[string]idmap.Directory{app.CorpID: dir}, idmap.Options{Logger: logger})
	if err != nil {
		return err
	}
	rep, err := s.Sync(ctx, app.CorpID)
	var ae *wecom.APIError
	if errors.As(err, &ae) && (ae.API == "user/list_id" || app.ContactsSecret != "" && ae.API == "gettoken") {
		return fmt.Errorf("directory sync --app %s: %w (contacts_secret, %s)", appName, err, config.EnvName(appName, "contacts_secret"))
	}
	if err != nil {
		return fmt.Errorf("directory sync --app %s: %w", appName, err)
	}
	printSyncReport(out, app, rep)
	return nil
}

// printSyncReport tells the operator what a sync did and what it could not
// see: counts, and at most idmap.SampleSize UserIDs as examples.
func printSyncReport(out io.Writer, app config.App, rep idmap.Report) {
	fmt.Fprintf(out, "synced %s: departments=%d users=%d created=%d updated=%d left=%d memberships=%d\n",
		app.CorpID, rep.Departments, rep.Users, rep.Created, rep.Updated, rep.Left, rep.Memberships)
	fmt.Fprintf(out, "  read with the %s\n", rep.Source)
	if rep.Complete {
		fmt.Fprintln(out, "  complete view: members no longer listed are marked left")
	} else {
		fmt.Fprintf(out, "  partial view: the app sees only its visible range (可见范围); %d active member(s) not listed "+
			"were kept, not marked left (outside the range, or gone)%s\n", rep.Unseen, examples(rep.UnseenSample))
		fmt.Fprintf(out, "  for a complete view, widen the app's visible range to the whole corp or set contacts_secret (%s)\n",
			config.EnvName(app.Name, "contacts_secret"))
	}
	if rep.Names < rep.Users {
		fmt.Fprintf(out, "  names: %d of %d members listed with a name (names come from the app's visible range; others keep the stored name)\n",
			rep.Names, rep.Users)
	}
	if !rep.DepartmentNames {
		fmt.Fprintln(out, "  department names: none listed; stored names kept")
	}
	if rep.Flagged > 0 {
		fmt.Fprintf(out, "  flagged: %d member(s) whose UserID breaks WeCom's rule: kept, never sent to%s\n",
			rep.Flagged, examples(rep.FlaggedSample))
	}
	if rep.Unstorable > 0 {
		fmt.Fprintf(out, "  skipped: %d UserID(s) that cannot be stored (empty, over 64 bytes or not UTF-8)\n", rep.Unstorable)
	}
}

func examples(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ", e.g. " + strings.Join(ids, ", ")
}

// runReconcile runs `yidu reconcile --msgid M | --all-active`.
func runReconcile(ctx context.Context, cfg config.Config, logger *slog.Logger, msgID, app string, all bool, out io.Writer) error {
	m := process.NewMain(cfg, logger)
	defer m.Close()
	if err := m.Open(ctx); err != nil {
		return err
	}
	if err := process.CheckKafka(ctx, cfg.Kafka, 10*time.Second); err != nil {
		return err
	}
	kopts, err := process.KafkaOpts(cfg.Kafka, nil, "")
	if err != nil {
		return err
	}
	p, err := delta.NewProducer(cfg.Kafka.Brokers, cfg.Kafka.Topic, delta.ProducerOptions{Logger: logger, DeliveryTimeout: 30 * time.Second, Extra: kopts})
	if err != nil {
		return fmt.Errorf("kafka producer: %w", err)
	}
	defer p.Close()
	rec, err := reconcile.New(m.Tracker, m.Store, p, reconcile.Options{Logger: logger})
	if err != nil {
		return err
	}

	var targets []yidu.Message
	if msgID != "" {
		var corps []string
		if a, ok := cfg.App(app); ok {
			corps = []string{a.CorpID}
		} else if app != "" {
			corps = []string{app}
		}
		msg, found, err := m.Tracker.GetMessage(ctx, corps, msgID)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("reconcile: message %q not found", msgID)
		}
		targets = append(targets, msg)
	} else {
		since := time.Now().Add(-cfg.Redis.TTL.D())
		cursor := ""
		for {
			page, next, err := m.Tracker.ListMessages(ctx, nil, cursor, yidu.MaxListLimit)
			if err != nil {
				return err
			}
			done := next == ""
			for _, msg := range page {
				if msg.SentAt.Before(since) {
					done = true
					break
				}
				targets = append(targets, msg)
			}
			if done {
				break
			}
			cursor = next
		}
	}
	var failed error
	for _, msg := range targets {
		rep, err := rec.Message(ctx, msg.CorpID, msg.MsgID)
		if err != nil {
			failed = errors.Join(failed, err)
			fmt.Fprintf(out, "%s/%s: error: %v\n", msg.CorpID, msg.MsgID, err)
			continue
		}
		fmt.Fprintln(out, rep)
	}
	fmt.Fprintf(out, "reconciled %d message(s)\n", len(targets))
	return failed
}

// printLink runs `yidu link`: the tracked link of message msgID of app to
// target, signed with a key derived from the app's secret (docs/api.md,
// Tracked links).
func printLink(cfg config.Config, appName, msgID, target string, out io.Writer) error {
	app, ok := cfg.App(appName)
	if !ok {
		return fmt.Errorf("link: no app %q in the configuration", appName)
	}
	if cfg.Receiver.PublicURL == "" {
		return errors.New("link: receiver.public_url is not configured (or YIDU_RECEIVER_PUBLIC_URL)")
	}
	if app.Secret == "" {
		return fmt.Errorf("link: app %q has no secret (%s)", appName, config.EnvName(appName, "secret"))
	}
	u, err := callback.LinkURL(cfg.Receiver.PublicURL, app.Name, callback.LinkKey(app.Name, app.Secret), msgID, target)
	if err != nil {
		return fmt.Errorf("link: %w", err)
	}
	fmt.Fprintln(out, u)
	return nil
}

// healthcheck GETs url and succeeds on 200.
func healthcheck(ctx context.Context, url string, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %s", url, resp.Status)
	}
	fmt.Fprintln(out, "ok")
	return nil
}
