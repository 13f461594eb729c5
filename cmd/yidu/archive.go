package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/cmd/internal/process"
	"github.com/yidu-io/yidu/ledger"
	"github.com/yidu-io/yidu/retention"
)

// purgeFlags are the flags of `yidu archive purge`.
type purgeFlags struct {
	before   string
	corp     string
	batch    int
	dryRun   bool
	execute  bool
	keepSumm bool

	at time.Time // before, parsed by check
}

func (p *purgeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.before, "before", "", "purge notices sent before this date, YYYY-MM-DD (UTC midnight) or RFC 3339; without it, only the notices past their retention are anonymised")
	fs.StringVar(&p.corp, "corp", "", "purge only this corp's notices (default: every corp)")
	fs.IntVar(&p.batch, "batch", retention.DefaultPurgeBatch, fmt.Sprintf("most rows per DELETE, 1..%d: each commits on its own", retention.MaxPurgeBatch))
	fs.BoolVar(&p.dryRun, "dry-run", true, "print what would be deleted and delete nothing (the default; --execute deletes)")
	fs.BoolVar(&p.execute, "execute", false, "delete for real")
	fs.BoolVar(&p.keepSumm, "keep-summaries", true, "keep each notice's message_summary row in message_summaries before deleting it")
}

// check validates the flags: a date, a batch in range, and no
// --dry-run=false without --execute (deleting takes the explicit flag).
func (p *purgeFlags) check() error {
	if p.before != "" {
		t, err := time.Parse(time.DateOnly, p.before)
		if err != nil {
			if t, err = time.Parse(time.RFC3339, p.before); err != nil {
				return usagef("archive purge: --before %q: want YYYY-MM-DD or an RFC 3339 time", p.before)
			}
		}
		p.at = t.UTC()
	}
	if p.batch < 1 || p.batch > retention.MaxPurgeBatch {
		return usagef("archive purge: --batch %d must be in 1..%d", p.batch, retention.MaxPurgeBatch)
	}
	if !p.dryRun && !p.execute {
		return usagef("archive purge: --dry-run=false deletes nothing by itself: pass --execute to delete")
	}
	return nil
}

// runPurge runs `yidu archive purge`. It refuses a date within redis.ttl
// of now: a notice that recent may still have live Redis keys, whose
// reads flushd would then park as orphans of a notice MySQL no longer has.
func runPurge(ctx context.Context, cfg config.Config, p purgeFlags, logger *slog.Logger, out io.Writer) error {
	if err := runAnonymise(ctx, cfg, p, logger, out); err != nil {
		return err
	}
	if p.before == "" {
		return nil
	}
	if limit := time.Now().Add(-cfg.Redis.TTL.D()); p.at.After(limit) {
		return usagef("archive purge: --before %s is within redis.ttl (%v) of now: purge only before %s",
			p.at.Format(time.RFC3339), cfg.Redis.TTL.D(), limit.UTC().Format(time.DateOnly))
	}
	db, err := process.OpenDB(cfg.MySQL.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	opts := retention.PurgeOptions{
		Before:        p.at,
		CorpID:        p.corp,
		BatchSize:     p.batch,
		Execute:       p.execute,
		DropSummaries: !p.keepSumm,
		Logger:        logger,
	}
	verb := "would delete"
	if p.execute {
		verb = "deleted"
	}
	start := time.Now()
	rep, err := retention.Purge(ctx, db, opts, func(pm retention.PurgedMessage) {
		fmt.Fprintf(out, "%s %s/%s (sent %s): %d recipient rows, %d parked reads, %d send attempts, %d reminders, %d follow-up rows\n",
			verb, pm.CorpID, pm.MsgID, pm.SentAt.UTC().Format(time.RFC3339), pm.Records, pm.Orphans, pm.Sends, pm.Reminders, pm.FollowUps)
	})
	fmt.Fprintf(out, "%s %d notice(s) sent before %s: %d recipient rows, %d parked reads, %d send attempts, %d reminders, %d follow-up rows",
		verb, rep.Messages, p.at.Format(time.RFC3339), rep.Records, rep.Orphans, rep.Sends, rep.Reminders, rep.FollowUps)
	if p.execute {
		fmt.Fprintf(out, "; %d summaries kept; %d DELETEs, longest %v, in %v",
			rep.Summaries, rep.Statements, rep.Longest.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	} else {
		fmt.Fprint(out, " (dry run: pass --execute to delete)")
	}
	fmt.Fprintln(out)
	if err != nil {
		return err
	}
	return purgeAudit(ctx, db, cfg, p, verb, out)
}

// purgeAudit deletes (or, in a dry run, counts) the audit events older
// than audit.retention. A purge of one corp's notices leaves the audit
// alone: its retention is the whole trail's.
func purgeAudit(ctx context.Context, db *sql.DB, cfg config.Config, p purgeFlags, verb string, out io.Writer) error {
	ret := cfg.Audit.Retention.D()
	if ret <= 0 || p.corp != "" {
		fmt.Fprintln(out, "audit events kept (audit.retention 0, or --corp given)")
		return nil
	}
	before := time.Now().Add(-ret).UTC()
	rec := audit.NewMySQL(db)
	var n int64
	var err error
	if p.execute {
		n, err = rec.Purge(ctx, before)
	} else {
		n, err = rec.Older(ctx, before)
	}
	fmt.Fprintf(out, "%s %d audit event(s) older than %s (audit.retention %v)\n", verb, n, before.Format(time.RFC3339), ret)
	return err
}

// runAnonymise removes the personal data of the notices past their
// retention (the notice's own, else apps[].retention; issue 40), or in a
// dry run counts it. It runs before the purge by date, which would
// otherwise delete some of them whole first.
func runAnonymise(ctx context.Context, cfg config.Config, p purgeFlags, logger *slog.Logger, out io.Writer) error {
	defaults := map[string]yidu.Retention{}
	for _, a := range cfg.Apps {
		r, err := yidu.ParseRetention(a.Retention)
		if err != nil {
			return fmt.Errorf("archive purge: app %q: retention: %w", a.Name, err)
		}
		defaults[a.Name] = r
	}
	db, err := process.OpenDB(cfg.MySQL.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	verb := "would anonymise"
	if p.execute {
		verb = "anonymised"
	}
	l, err := ledger.New(db, ledger.Options{Logger: logger})
	if err != nil {
		return err
	}
	forget := func(ctx context.Context, corpID, msgID string) error {
		_, err := l.Forget(ctx, corpID, msgID, nil)
		return err
	}
	rep, err := retention.Anonymise(ctx, db, retention.AnonymiseOptions{Now: time.Now(), Defaults: defaults, CorpID: p.corp,
		BatchSize: p.batch, Execute: p.execute, Forget: forget, Logger: logger}, func(am retention.AnonymisedMessage) {
		fmt.Fprintf(out, "%s %s/%s (sent %s, retention %s): %d recipient rows, %d parked reads, %d reminder rows, %d invaliduser lists, %d audit rows\n",
			verb, am.CorpID, am.MsgID, am.SentAt.UTC().Format(time.RFC3339), am.Retention, am.Records, am.Orphans, am.Reminders, am.Sends, am.Audit)
	})
	fmt.Fprintf(out, "%s %d notice(s) past their retention: %d recipient rows, %d parked reads, %d reminder rows, %d invaliduser lists, %d audit rows\n",
		verb, rep.Messages, rep.Records, rep.Orphans, rep.Reminders, rep.Sends, rep.Audit)
	return err
}
