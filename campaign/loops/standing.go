package loops

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/internal/loop"
	"github.com/yidu-io/yidu/internal/sqlrows"
	noticev "github.com/yidu-io/yidu/notice"
)

// Standing notices (issue 51): a notice whose audience grows with the
// directory. The rule (standing_notices) is campaign's; the enrolment of
// each joiner (a recipient row, the bitmap, the card, the ledger entry
// and the audit row) is the tracker's (Enroller), decided once per member
// by standing_enrolments' primary key.

// Enroller is what a standing notice needs of the tracker
// (tracker.Registry).
type Enroller interface {
	// LoadMessage returns the active message and its recipients (MySQL).
	LoadMessage(ctx context.Context, corpID, msgID string) (yidu.Message, *roaring.Bitmap, *roaring.Bitmap, bool, error)
	GetMessage(ctx context.Context, corps []string, msgID string) (yidu.Message, bool, error)
	Enrol(ctx context.Context, m yidu.Message, members map[uint32]string, version int, joined, deadline time.Time) (int, []uint32, error)
	UnsentJoinBatches(ctx context.Context, corpID, msgID string) ([]int, error)
	SendJoiners(ctx context.Context, m yidu.Message, n int) (yidu.BatchOutcome, error)
	Enrolments(ctx context.Context, corpID, msgID string, since time.Time, limit int) ([]yidu.Enrolment, error)
	ResetAcknowledged(ctx context.Context, m yidu.Message) (bool, error)
	Reconfirm(ctx context.Context, m yidu.Message, userIDs []string) (yidu.RemindReport, error)
	RemindBatch(ctx context.Context, m yidu.Message, taskID string, batch int, users []string) (invalid []string, err error)
}

// StandingDirectory is what enrolment reads of the directory
// (idmap.Mapper): the audience as asked expanded now, the directory's
// version (a sync moves it), the active members among uids.
type StandingDirectory interface {
	Expand(ctx context.Context, corpID string, a yidu.Audience) (yidu.Expansion, error)
	Version(ctx context.Context, corpID string) (uint64, error)
	Active(ctx context.Context, corpID string, uids []uint32) (map[uint32]yidu.User, error)
}

// Versions are a notice's content versions (notice.Store): the current
// one, and a cycle's new one rendered and stored.
type Versions interface {
	Get(ctx context.Context, corp, msgid string, n int) (noticev.Version, error)
	Prepare(ctx context.Context, corp string, d noticev.Draft) (noticev.Version, error)
	Update(ctx context.Context, corp, msgid string, v noticev.Version, reacknowledge bool, by string) (noticev.Version, bool, error)
}

// StandingLoop enrols the members who join a standing notice's audience,
// runs each joiner's own reminder rounds and the notice's
// re-acknowledgement cycles. Every replica runs it; each notice is
// claimed in MySQL (standing_notices.owner, lease_until) for one tick.
type StandingLoop struct {
	DB        *sql.DB
	Directory StandingDirectory
	Tracker   Enroller
	// Contents is the notice's versions (notice.Store): the version a
	// joiner is sent, and each cycle's.
	Contents Versions
	Reads    LiveReads
	Log      *slog.Logger
	Now      func() time.Time
	Owner    string
	TTL      time.Duration
	MinGap   time.Duration
	Zone     func(app string) *time.Location
	// Guard runs each notice's and each joiner round's work under its
	// own recover and backoff, counted in yidu_loop_*{loop="standing"}
	// (issue 46); nil: loop.Nop.
	Guard *loop.Guard
}

// standingRoundBatch numbers the reminder batches of joiners' rounds
// (message_sends kind remind), away from a manual reminder's batch 0.
const standingRoundBatch = 1_000_000

// standingRow is a standing_notices row.
type standingRow struct {
	corp, msgid, app string
	audience         yidu.Audience
	spec             yidu.Standing
	checked          uint64
	cycle            int
	cycleStart       sql.NullTime
	// unreadable: its audience or spec does not decode; the notice is
	// skipped as a failed one (counted, backed off).
	unreadable error
}

// SaveStanding keeps msgid's standing rule (after Post registered or
// composed it, or in its compose's transaction): the audience as asked
// and the spec. A repeated post keeps the first.
func SaveStanding(ctx context.Context, db execer, corp, msgid, app string, a yidu.Audience, spec yidu.Standing, by string, now time.Time) error {
	aj, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("campaign: standing audience: %w", err)
	}
	sj, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("campaign: standing spec: %w", err)
	}
	if _, err := db.ExecContext(ctx, `INSERT IGNORE INTO standing_notices (corp_id, msgid, app, audience, spec, until_at, created_by, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, corp, msgid, app, aj, sj, spec.Until, yidu.Truncate(by, 128), now.UTC()); err != nil {
		return fmt.Errorf("campaign: keep standing notice %s: %w", msgid, err)
	}
	return nil
}

// Run ticks every interval until ctx ends.
func (l *StandingLoop) Run(ctx context.Context, every time.Duration) error {
	loop.EveryFromStart(ctx, every, func(ctx context.Context) {
		if err := l.Tick(ctx); err != nil && ctx.Err() == nil {
			l.Log.Error("standing notices", "err", err)
		}
	})
	return ctx.Err()
}

// Tick enrols the joiners of every standing notice still in force, sends
// what a crash left unsent, starts the cycles that are due and runs the
// joiners' rounds. One notice's failure (or panic, or a row whose
// audience or spec does not decode) is logged, counted and backed off
// (Guard); the others go on.
func (l *StandingLoop) Tick(ctx context.Context) error {
	now := l.Now()
	all, err := sqlrows.List(ctx, l.DB, func(rows *sql.Rows, r *standingRow) error {
		var aj, sj string
		if err := rows.Scan(&r.corp, &r.msgid, &r.app, &aj, &sj, &r.checked, &r.cycle, &r.cycleStart); err != nil {
			return err
		}
		if err := cmp.Or(json.Unmarshal([]byte(aj), &r.audience), json.Unmarshal([]byte(sj), &r.spec)); err != nil {
			r.unreadable = fmt.Errorf("campaign: standing notice %s unreadable: %w", r.msgid, err)
		}
		return nil
	}, `SELECT s.corp_id, s.msgid, s.app, s.audience, s.spec, s.checked_version, s.cycle, s.cycle_started_at
		FROM standing_notices s JOIN messages m ON m.corp_id = s.corp_id AND m.msgid = s.msgid
		WHERE m.state = 1 AND m.recalled_at IS NULL AND (s.owner IS NULL OR s.lease_until < ? OR s.owner = ?)`, now, l.Owner)
	if err != nil {
		return fmt.Errorf("campaign: standing notices: %w", err)
	}
	for _, r := range all {
		if err := l.safely(ctx, r.msgid, func() error {
			if r.unreadable != nil {
				return r.unreadable
			}
			return l.notice(ctx, r)
		}); err != nil && ctx.Err() == nil {
			l.Log.Error("standing notice", "corp", r.corp, "msgid", r.msgid, "err", err)
		}
	}
	return l.joinerRounds(ctx)
}

// safely runs f for the item id (a notice, a joiner's round) under the loop's guard: a panic is
// an error, a failure is logged, counted and backs the notice off (the
// next ticks skip it until then); one notice never stops the loop.
func (l *StandingLoop) safely(ctx context.Context, id string, f func() error) error {
	if l.Guard == nil {
		l.Guard = loop.Nop("standing") // Tick runs on one goroutine
	}
	_, err := l.Guard.Do(ctx, id, func(context.Context) error { return f() })
	return err
}

// claim takes r for this tick; false when another replica holds it.
func (l *StandingLoop) claim(ctx context.Context, r standingRow) (bool, error) {
	now := l.Now()
	res, err := l.DB.ExecContext(ctx, `UPDATE standing_notices SET owner = ?, lease_until = ?
		WHERE corp_id = ? AND msgid = ? AND (owner IS NULL OR lease_until < ? OR owner = ?)`,
		l.Owner, now.Add(l.TTL), r.corp, r.msgid, now, l.Owner)
	if err != nil {
		return false, fmt.Errorf("campaign: claim standing notice %s: %w", r.msgid, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

func (l *StandingLoop) release(r standingRow) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := l.DB.ExecContext(ctx, `UPDATE standing_notices SET owner = NULL, lease_until = NULL WHERE corp_id = ? AND msgid = ? AND owner = ?`,
		r.corp, r.msgid, l.Owner); err != nil {
		l.Log.Warn("standing notice not released; its lease expires", "msgid", r.msgid, "err", err)
	}
}

func (l *StandingLoop) zone(app string) *time.Location {
	if l.Zone != nil {
		if z := l.Zone(app); z != nil {
			return z
		}
	}
	return time.UTC
}

// notice is one tick of one standing notice.
func (l *StandingLoop) notice(ctx context.Context, r standingRow) error {
	now := l.Now()
	unsent, err := l.Tracker.UnsentJoinBatches(ctx, r.corp, r.msgid)
	if err != nil {
		return err
	}
	enrolling := r.spec.Enrolling(now)
	var version uint64
	if enrolling {
		if version, err = l.Directory.Version(ctx, r.corp); err != nil {
			return err
		}
	}
	cycleDue := false
	if enrolling && r.spec.ReacknowledgeEvery != "" && r.cycleStart.Valid {
		next, _ := r.spec.NextCycle(r.cycleStart.Time, l.zone(r.app))
		cycleDue = !now.Before(next)
	}
	if len(unsent) == 0 && (!enrolling || version == r.checked) && !cycleDue && (r.cycleStart.Valid || r.spec.ReacknowledgeEvery == "" || !enrolling) {
		return nil // nothing to do: no query of the recipients
	}
	ok, err := l.claim(ctx, r)
	if err != nil || !ok {
		return err
	}
	defer l.release(r)
	m, rcpt, read, found, err := l.Tracker.LoadMessage(ctx, r.corp, r.msgid)
	if err != nil || !found {
		return err
	}
	for _, n := range unsent {
		if _, err := l.Tracker.SendJoiners(ctx, m, n); err != nil {
			return fmt.Errorf("campaign: resend joiners of %s: %w", r.msgid, err)
		}
	}
	if !r.cycleStart.Valid {
		// Cycle 1 is the first send.
		if _, err := l.DB.ExecContext(ctx, `UPDATE standing_notices SET cycle_started_at = ? WHERE corp_id = ? AND msgid = ? AND cycle_started_at IS NULL`,
			m.SentAt, r.corp, r.msgid); err != nil {
			return fmt.Errorf("campaign: standing cycle of %s: %w", r.msgid, err)
		}
		if _, err := l.DB.ExecContext(ctx, `INSERT IGNORE INTO standing_cycles (corp_id, msgid, cycle, version, started_at) VALUES (?, ?, 1, ?, ?)`,
			r.corp, r.msgid, l.currentVersion(ctx, r), m.SentAt); err != nil {
			return fmt.Errorf("campaign: standing cycle of %s: %w", r.msgid, err)
		}
	}
	if enrolling && version != r.checked {
		if err := l.enrol(ctx, r, m, rcpt, now); err != nil {
			return err
		}
		if _, err := l.DB.ExecContext(ctx, `UPDATE standing_notices SET checked_version = ? WHERE corp_id = ? AND msgid = ?`,
			version, r.corp, r.msgid); err != nil {
			return fmt.Errorf("campaign: standing notice %s: %w", r.msgid, err)
		}
	}
	if cycleDue {
		return l.nextCycle(ctx, r, m, rcpt, read, now)
	}
	return nil
}

// currentVersion is the notice's current version number (0: no content).
func (l *StandingLoop) currentVersion(ctx context.Context, r standingRow) int {
	if l.Contents == nil {
		return 0
	}
	v, err := l.Contents.Get(ctx, r.corp, r.msgid, 0)
	if err != nil {
		return 0
	}
	return v.N
}

// enrol finds the audience's members who are not recipients and enrols
// them, SendBatch at a time, each batch sent at once.
func (l *StandingLoop) enrol(ctx context.Context, r standingRow, m yidu.Message, rcpt *roaring.Bitmap, now time.Time) error {
	x, err := l.Directory.Expand(ctx, r.corp, r.audience)
	if err != nil {
		return fmt.Errorf("campaign: standing audience of %s: %w", r.msgid, err)
	}
	joiners := roaring.AndNot(x.Recipients, rcpt)
	if joiners.IsEmpty() {
		return nil
	}
	all := joiners.ToArray()
	version := l.currentVersion(ctx, r)
	deadline := r.spec.Deadline(now, l.zone(r.app))
	for start := 0; start < len(all); start += RoundBatch {
		chunk := all[start:min(start+RoundBatch, len(all))]
		active, err := l.Directory.Active(ctx, r.corp, chunk)
		if err != nil {
			return fmt.Errorf("campaign: joiners of %s: %w", r.msgid, err)
		}
		members := make(map[uint32]string, len(active))
		for uid, u := range active {
			members[uid] = u.UserID
		}
		n, got, err := l.Tracker.Enrol(ctx, m, members, version, now, deadline)
		if err != nil {
			return err
		}
		if n == 0 {
			continue
		}
		l.Log.InfoContext(ctx, "standing notice: joiners enrolled", "corp", r.corp, "msgid", r.msgid, "batch", n, "people", len(got))
		if _, err := l.Tracker.SendJoiners(ctx, m, n); err != nil {
			return fmt.Errorf("campaign: send joiners of %s: %w", r.msgid, err)
		}
	}
	return nil
}

// EndStanding ends msgid's standing at until (nil: now), by p: nobody
// is enrolled after it. Whether p may is the caller's decision
// (campaign.Service.EndStanding).
func EndStanding(ctx context.Context, db *sql.DB, p *access.Principal, corp, msgid string, until *time.Time, now time.Time) error {
	at := now.UTC().Truncate(time.Millisecond)
	if until != nil {
		s := yidu.Standing{Until: until}
		if err := s.ValidateUntil(now); err != nil {
			return err
		}
		at = *s.Until
	}
	res, err := db.ExecContext(ctx, `UPDATE standing_notices SET until_at = ?, ended_by = ?,
			spec = JSON_SET(spec, '$.until', ?) WHERE corp_id = ? AND msgid = ?`,
		at, yidu.Truncate(p.By(), 128), at.Format("2006-01-02T15:04:05.000Z07:00"), corp, msgid)
	if err != nil {
		return fmt.Errorf("campaign: end standing notice %s: %w", msgid, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var one int
		if err := db.QueryRowContext(ctx, `SELECT 1 FROM standing_notices WHERE corp_id = ? AND msgid = ?`, corp, msgid).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return yidu.Fieldf("standing", "standing: the notice is not a standing notice")
		}
	}
	return nil
}

// nextCycle starts cycle r.cycle+1: the ending cycle's counts are kept
// (by_cycle), the notice's current text becomes a new material version
// (reacknowledge, as an editor's would: the page asks everyone to
// acknowledge it), acknowledgements are reset and every active recipient
// is sent the card again. The cycle's row is its claim: a crash midway
// is resumed by the next tick (the version is the same text: made once).
func (l *StandingLoop) nextCycle(ctx context.Context, r standingRow, m yidu.Message, rec, read *roaring.Bitmap, now time.Time) error {
	next := r.cycle + 1
	// The live count (Redis) when it has the notice; MySQL's otherwise,
	// which may lag the last reads by a flush.
	if live, ok, err := l.Reads.ReadBitmap(ctx, r.corp, r.msgid); err == nil && ok && live != nil {
		read = roaring.And(live, rec)
	}
	nRec, nRead := rec.GetCardinality(), orEmpty(read).GetCardinality()
	if _, err := l.DB.ExecContext(ctx, `UPDATE standing_cycles SET ended_at = ?, recipients = ?, acknowledged = ?
		WHERE corp_id = ? AND msgid = ? AND cycle = ? AND ended_at IS NULL`, now, nRec, nRead, r.corp, r.msgid, r.cycle); err != nil {
		return fmt.Errorf("campaign: end cycle %d of %s: %w", r.cycle, r.msgid, err)
	}
	version := 0
	if l.Contents != nil {
		cur, err := l.Contents.Get(ctx, r.corp, r.msgid, 0)
		switch {
		case errors.Is(err, noticev.ErrNotFound):
		case err != nil:
			return err
		default:
			ids := make([]string, 0, len(cur.Attachments))
			for _, a := range cur.Attachments {
				ids = append(ids, a.ID)
			}
			md := cycleMarkdown(cur.Markdown, next, now, l.zone(r.app))
			v, err := l.Contents.Prepare(ctx, r.corp, noticev.Draft{Title: cur.Title, Markdown: md, Attachments: ids})
			if err != nil {
				return fmt.Errorf("campaign: cycle %d of %s: %w", next, r.msgid, err)
			}
			nv, _, err := l.Contents.Update(ctx, r.corp, r.msgid, v, true, "yidu")
			if err != nil {
				return fmt.Errorf("campaign: cycle %d of %s: %w", next, r.msgid, err)
			}
			version = nv.N
		}
	}
	if _, err := l.DB.ExecContext(ctx, `INSERT IGNORE INTO standing_cycles (corp_id, msgid, cycle, version, started_at) VALUES (?, ?, ?, ?, ?)`,
		r.corp, r.msgid, next, version, now); err != nil {
		return fmt.Errorf("campaign: cycle %d of %s: %w", next, r.msgid, err)
	}
	if _, err := l.Tracker.ResetAcknowledged(ctx, m); err != nil {
		return err
	}
	if _, err := l.DB.ExecContext(ctx, `UPDATE standing_notices SET cycle = ?, cycle_started_at = ? WHERE corp_id = ? AND msgid = ? AND cycle = ?`,
		next, now, r.corp, r.msgid, r.cycle); err != nil {
		return fmt.Errorf("campaign: cycle %d of %s: %w", next, r.msgid, err)
	}
	if rec.IsEmpty() {
		return nil
	}
	active, err := l.Directory.Active(ctx, r.corp, rec.ToArray())
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(active))
	for _, u := range active {
		ids = append(ids, u.UserID)
	}
	sent, err := l.Tracker.Reconfirm(ctx, m, ids)
	if err != nil {
		return fmt.Errorf("campaign: cycle %d of %s: cards: %w", next, r.msgid, err)
	}
	l.Log.InfoContext(ctx, "standing notice: cycle begun", "corp", r.corp, "msgid", r.msgid, "cycle", next, "version", version, "asked", sent.Reminded)
	return nil
}

// cycleMarkdown is the cycle's text: the current one with a line naming
// the cycle, so its version is new (the page asks again) and its record
// says which cycle it was. An earlier cycle's line is replaced.
func cycleMarkdown(md string, cycle int, now time.Time, loc *time.Location) string {
	const mark = "\n\n---\n\n第 "
	if i := strings.LastIndex(md, mark); i >= 0 {
		md = md[:i]
	}
	l := now.In(loc)
	return fmt.Sprintf("%s%s%d 轮确认（%d年%d月%d日）", md, mark, cycle, l.Year(), int(l.Month()), l.Day())
}

// Save keeps msgid's standing rule (SaveStanding) by by, now.
func (l *StandingLoop) Save(ctx context.Context, corp, msgid, app string, a yidu.Audience, spec yidu.Standing, by string) error {
	return SaveStanding(ctx, l.DB, corp, msgid, app, a, spec, by, l.Now())
}

// SaveIn is Save in tx, the transaction that stores the notice.
func (l *StandingLoop) SaveIn(ctx context.Context, tx *sql.Tx, corp, msgid, app string, a yidu.Audience, spec yidu.Standing, by string) error {
	return SaveStanding(ctx, tx, corp, msgid, app, a, spec, by, l.Now())
}

// Spec is msgid's standing rule as it was posted (ok false: msgid is no
// standing notice).
func (l *StandingLoop) Spec(ctx context.Context, corp, msgid string) (spec yidu.Standing, ok bool, err error) {
	var sj string
	err = l.DB.QueryRowContext(ctx, `SELECT spec FROM standing_notices WHERE corp_id = ? AND msgid = ?`, corp, msgid).Scan(&sj)
	if errors.Is(err, sql.ErrNoRows) {
		return spec, false, nil
	}
	if err != nil {
		return spec, false, fmt.Errorf("campaign: standing rule of %s: %w", msgid, err)
	}
	if err := json.Unmarshal([]byte(sj), &spec); err != nil {
		return spec, false, fmt.Errorf("campaign: standing rule of %s: %w", msgid, err)
	}
	return spec, true, nil
}
