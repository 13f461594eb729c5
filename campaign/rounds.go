package campaign

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/yidu-io/yidu"
)

// RoundBatch is how many people one reminder batch addresses: WeCom's
// message/send takes at most 1,000 in touser (doc path 90236).
const RoundBatch = 1000

// LiveReads is the live state of a notice in Redis (bitmap.Store): a
// round's people are read from it when the round fires, never from a
// list taken earlier.
type LiveReads interface {
	RecipientBitmap(ctx context.Context, corpID, msgID string) (*roaring.Bitmap, bool, error)
	ReadBitmap(ctx context.Context, corpID, msgID string) (*roaring.Bitmap, bool, error)
}

// Member is an active member of the synced directory: its UserID and
// name are what a round uses.
type Member = yidu.User

// People resolves uids to the active members among them; a member who
// left is absent from the answer, and so is skipped by every round.
type People interface {
	Active(ctx context.Context, corpID string, uids []uint32) (map[uint32]Member, error)
}

// OrgSource gives the department tree with its leaders and memberships
// (Escalate's input).
type OrgSource interface {
	Org(ctx context.Context, corpID string) (*yidu.Org, error)
}

// Seats counts a corp's active members: a daily quota's default
// (dailyQuota).
type Seats interface {
	CountActive(ctx context.Context, corpID string) (int, error)
}

// RoundSender sends the cards of a round: the notice's reminder card
// (the same card as the manual "Remind unread") to a batch, and a leader's
// digest card. taskID is stable per batch, so a batch resent after a crash
// carries the same task_id and content, which WeCom's
// enable_duplicate_check drops within its interval (doc path 90236): the
// second guard after the batch record.
// invalid are the UserIDs WeCom refused (invaliduser, doc path 90236);
// an error leaves the batch pending, to be sent again. The tracker's
// Registry implements it (tracker/follow.go).
type RoundSender interface {
	RemindBatch(ctx context.Context, m yidu.Message, taskID string, batch int, userIDs []string) (invalid []string, err error)
	Digest(ctx context.Context, m yidu.Message, taskID, userID, text string) error
}

// Rounds runs the follow-up rounds of every notice with a policy: it
// plans each round when it becomes due (a round due while every replica
// was down fires at the next start), claims it in MySQL so exactly one
// replica sends it, records each batch and its people before sending and
// marks them after, and resumes an interrupted round at its first
// unsent batch.
type Rounds struct {
	DB     *sql.DB
	Reads  LiveReads
	People People
	Org    OrgSource
	// Seats counts members for the default daily quota; nil: a quota of
	// 0 is unlimited, as for a corp with no synced directory.
	Seats  Seats
	Sender RoundSender
	Log    *slog.Logger
	Now    func() time.Time
	Owner  string
	TTL    time.Duration
	MinGap time.Duration
	// Zone is each app's time zone (apps[].timezone).
	Zone func(app string) *time.Location
	// Fallback is each app's apps[].escalation_fallback UserIDs.
	Fallback func(app string) []string
	// DailyQuota is each app's apps[].daily_quota, recipient-sends a day
	// in its zone; 0 is the default (dailyQuota). A round larger than
	// what is left of the day sends what fits and the rest on the next
	// working days. Nil: no quota.
	DailyQuota func(app string) int
	// PageURL is the dashboard's page of a notice (dashboard.public_url +
	// "/m/" + msgid), linked from each leader's digest: opened inside
	// WeCom it signs the leader in and shows their own people. Nil or
	// "": the digest carries the list only.
	PageURL func(msgID string) string
}

// notice is what a round needs of a notice.
type notice struct {
	corpID, msgID, app, title string
	sentAt                    time.Time
	recalled                  bool
	policy                    yidu.Policy
	msg                       yidu.Message
}

// SetPolicy stores m's follow-up policy after checking it. A recalled
// notice takes none. The error wraps yidu.ErrInvalid and names the field.
func (r *Rounds) SetPolicy(ctx context.Context, corpID, msgID string, p yidu.Policy, by string) error {
	n, err := r.notice(ctx, corpID, msgID)
	if err != nil {
		return err
	}
	if n.recalled {
		return yidu.Invalidf("follow_up: the notice was recalled")
	}
	return r.StorePolicy(ctx, corpID, msgID, p, n.sentAt, by)
}

// CheckPolicy checks p for a notice sent at sendAt, writing nothing: the
// dashboard calls it before it sends or stores the notice, so a bad
// policy leaves nothing behind. The error wraps yidu.ErrInvalid.
func (r *Rounds) CheckPolicy(p yidu.Policy, sendAt time.Time) error {
	return p.Validate(sendAt, r.MinGap)
}

// StorePolicy stores the policy of a notice sent (or to be sent) at
// sendAt, whether or not it is registered yet: a scheduled notice's or a
// draft's policy waits keyed by its msgid, and plan starts it once the
// Runner has registered the notice (plan joins messages).
func (r *Rounds) StorePolicy(ctx context.Context, corpID, msgID string, p yidu.Policy, sendAt time.Time, by string) error {
	return r.storePolicy(ctx, r.DB, corpID, msgID, p, sendAt, by)
}

// execer is a *sql.DB or a *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// storePolicy is StorePolicy through ex (a compose's transaction).
func (r *Rounds) storePolicy(ctx context.Context, ex execer, corpID, msgID string, p yidu.Policy, sendAt time.Time, by string) error {
	if err := p.Validate(sendAt, r.MinGap); err != nil {
		return err
	}
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("campaign: policy: %w", err)
	}
	_, err = ex.ExecContext(ctx, `INSERT INTO follow_ups (corp_id, msgid, policy, updated_by, updated_at) VALUES (?, ?, ?, ?, ?)
		ON DUPLICATE KEY UPDATE policy = VALUES(policy), updated_by = VALUES(updated_by), updated_at = VALUES(updated_at), stopped_reason = NULL`,
		corpID, msgID, string(b), by, r.Now())
	if err != nil {
		return fmt.Errorf("campaign: store policy: %w", err)
	}
	return nil
}

func (r *Rounds) notice(ctx context.Context, corpID, msgID string) (notice, error) {
	n := notice{corpID: corpID, msgID: msgID}
	var recalled sql.NullTime
	var body, url sql.NullString
	err := r.DB.QueryRowContext(ctx, `SELECT app, agent_id, title, body, url, sent_at, recalled_at FROM messages WHERE corp_id = ? AND msgid = ?`,
		corpID, msgID).Scan(&n.app, &n.msg.AgentID, &n.title, &body, &url, &n.sentAt, &recalled)
	if errors.Is(err, sql.ErrNoRows) {
		return n, yidu.Invalidf("msgid: no notice %s", yidu.Truncate(msgID, 64))
	}
	if err != nil {
		return n, fmt.Errorf("campaign: notice %s: %w", msgID, err)
	}
	n.recalled = recalled.Valid
	n.msg.CorpID, n.msg.MsgID, n.msg.App, n.msg.Title, n.msg.Body, n.msg.URL, n.msg.SentAt = corpID, msgID, n.app, n.title, body.String, url.String, n.sentAt
	if recalled.Valid {
		n.msg.RecalledAt = recalled.Time
	}
	return n, nil
}

// Tick plans the rounds that are due and runs every round this replica
// can claim. Call it every few seconds; it returns after the rounds it
// ran.
func (r *Rounds) Tick(ctx context.Context) error {
	if err := r.plan(ctx); err != nil {
		return err
	}
	rows, err := r.DB.QueryContext(ctx, `SELECT corp_id, msgid, round FROM follow_up_rounds
		WHERE (state = 'pending' AND due_at <= ?) OR (state = 'sending' AND lease_until < ?) ORDER BY due_at`, r.Now(), r.Now())
	if err != nil {
		return fmt.Errorf("campaign: due rounds: %w", err)
	}
	type key struct {
		corp, msg string
		round     int
	}
	var due []key
	for rows.Next() {
		var k key
		if err := rows.Scan(&k.corp, &k.msg, &k.round); err != nil {
			rows.Close()
			return fmt.Errorf("campaign: due rounds: %w", err)
		}
		due = append(due, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("campaign: due rounds: %w", err)
	}
	for _, k := range due {
		if err := r.run(ctx, k.corp, k.msg, k.round); err != nil {
			r.Log.Error("follow-up round", "msgid", k.msg, "round", k.round, "err", err)
		}
	}
	return nil
}

// plan writes the next due round of every running follow-up, and ends
// those whose rounds are over or whose notice was recalled.
func (r *Rounds) plan(ctx context.Context) error {
	rows, err := r.DB.QueryContext(ctx, `SELECT f.corp_id, f.msgid, f.policy, m.app, m.title, m.sent_at, m.recalled_at IS NOT NULL,
			(SELECT COUNT(*) FROM follow_up_rounds x WHERE x.corp_id = f.corp_id AND x.msgid = f.msgid),
			(SELECT COUNT(*) FROM follow_up_rounds x WHERE x.corp_id = f.corp_id AND x.msgid = f.msgid AND x.state IN ('pending', 'sending'))
		FROM follow_ups f JOIN messages m ON m.corp_id = f.corp_id AND m.msgid = f.msgid
		WHERE f.stopped_reason IS NULL`)
	if err != nil {
		return fmt.Errorf("campaign: follow-ups: %w", err)
	}
	type row struct {
		n            notice
		done, active int
	}
	var all []row
	for rows.Next() {
		var x row
		var policy string
		if err := rows.Scan(&x.n.corpID, &x.n.msgID, &policy, &x.n.app, &x.n.title, &x.n.sentAt, &x.n.recalled, &x.done, &x.active); err != nil {
			rows.Close()
			return fmt.Errorf("campaign: follow-ups: %w", err)
		}
		if err := json.Unmarshal([]byte(policy), &x.n.policy); err != nil {
			rows.Close()
			return fmt.Errorf("campaign: policy of %s: %w", x.n.msgID, err)
		}
		all = append(all, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("campaign: follow-ups: %w", err)
	}
	now := r.Now()
	for _, x := range all {
		if x.n.recalled {
			if err := r.stop(ctx, x.n, "recalled"); err != nil {
				return err
			}
			continue
		}
		if x.active > 0 {
			continue
		}
		s, err := x.n.policy.Compile(x.n.sentAt, r.MinGap)
		if err != nil {
			r.Log.Warn("follow-up policy no longer valid", "msgid", x.n.msgID, "err", err)
			continue
		}
		round, at, ok := s.Due(x.n.sentAt, now, r.zone(x.n.app), x.done)
		if !ok {
			if at.IsZero() {
				reason := "done"
				if len(s.Times(x.n.sentAt, r.zone(x.n.app))) < s.Rounds() {
					reason = "deadline"
				}
				if err := r.stop(ctx, x.n, reason); err != nil {
					return err
				}
			}
			continue
		}
		if _, err := r.DB.ExecContext(ctx, `INSERT IGNORE INTO follow_up_rounds (corp_id, msgid, round, state, due_at)
			VALUES (?, ?, ?, 'pending', ?)`, x.n.corpID, x.n.msgID, round, at); err != nil {
			return fmt.Errorf("campaign: plan round: %w", err)
		}
	}
	return nil
}

func (r *Rounds) zone(app string) *time.Location {
	if r.Zone != nil {
		if l := r.Zone(app); l != nil {
			return l
		}
	}
	return time.UTC
}

func (r *Rounds) stop(ctx context.Context, n notice, reason string) error {
	if _, err := r.DB.ExecContext(ctx, `UPDATE follow_ups SET stopped_reason = ? WHERE corp_id = ? AND msgid = ? AND stopped_reason IS NULL`,
		reason, n.corpID, n.msgID); err != nil {
		return fmt.Errorf("campaign: stop follow-up: %w", err)
	}
	if _, err := r.DB.ExecContext(ctx, `UPDATE follow_up_rounds SET state = 'cancelled', finished_at = ?
		WHERE corp_id = ? AND msgid = ? AND state = 'pending'`, r.Now(), n.corpID, n.msgID); err != nil {
		return fmt.Errorf("campaign: stop follow-up: %w", err)
	}
	return nil
}

// roundWhere selects one round of follow_up_rounds.
const roundWhere = "corp_id = ? AND msgid = ? AND round = ?"

// lease is the round's claim: campaign.Lease on follow_up_rounds, the
// same conditional UPDATE as a scheduled send's, so of replicas claiming
// at once exactly one sends a round, and one whose owner died (its lease
// ran out) is resumed by another.
func (r *Rounds) lease() Lease {
	return Lease{Table: "follow_up_rounds", Owner: r.Owner, TTL: r.TTL}
}

// claim takes the round for r.Owner: a pending one, or a sending one
// whose owner's lease ran out.
func (r *Rounds) claim(ctx context.Context, corpID, msgID string, round int) (bool, error) {
	now := r.Now()
	return r.lease().Claim(ctx, r.DB, now, []yidu.NoticeState{roundPending}, "started_at = COALESCE(started_at, ?)",
		roundWhere, now, corpID, msgID, round)
}

// roundPending is a round planned and not yet claimed.
const roundPending yidu.NoticeState = "pending"

// renew extends the lease; held false: another replica holds the round
// and this one must stop; cancelled: a cancel was asked, the round stops
// after the batch that was sending.
func (r *Rounds) renew(ctx context.Context, corpID, msgID string, round int) (held, cancelled bool, err error) {
	held, err = r.lease().Renew(ctx, r.DB, r.Now(), roundWhere, corpID, msgID, round)
	if err != nil || !held {
		return false, false, err
	}
	var c sql.NullTime
	if err := r.DB.QueryRowContext(ctx, `SELECT cancelled_at FROM follow_up_rounds WHERE `+roundWhere,
		corpID, msgID, round).Scan(&c); err != nil {
		return false, false, fmt.Errorf("campaign: renew round: %w", err)
	}
	return true, c.Valid, nil
}

// run claims and sends one round (or resumes it). A round larger than
// what is left of the app's daily quota records and sends the part that
// fits, and waits (pending, spread_until set) for the next working day,
// when it records the next part from who is unread then and was not
// reminded in this round yet.
func (r *Rounds) run(ctx context.Context, corpID, msgID string, round int) error {
	ok, err := r.claim(ctx, corpID, msgID, round)
	if err != nil || !ok {
		return err
	}
	n, err := r.notice(ctx, corpID, msgID)
	if err != nil {
		return err
	}
	if n.recalled {
		return r.finish(ctx, n, round, "cancelled")
	}
	var policy string
	if err := r.DB.QueryRowContext(ctx, `SELECT policy FROM follow_ups WHERE corp_id = ? AND msgid = ?`, corpID, msgID).Scan(&policy); err == nil {
		_ = json.Unmarshal([]byte(policy), &n.policy)
	}
	s, err := n.policy.Compile(n.sentAt, r.MinGap)
	if err != nil {
		s, _ = (&yidu.Policy{}).Compile(n.sentAt, 0) // any time of any day
	}
	var recorded, pending int
	var spread sql.NullTime
	if err := r.DB.QueryRowContext(ctx, `SELECT
			(SELECT COUNT(*) FROM follow_up_batches b WHERE b.corp_id = x.corp_id AND b.msgid = x.msgid AND b.round = x.round AND b.kind = 'reminder'),
			(SELECT COUNT(*) FROM follow_up_batches b WHERE b.corp_id = x.corp_id AND b.msgid = x.msgid AND b.round = x.round AND b.kind = 'reminder' AND b.state = 'pending'),
			x.spread_until
		FROM follow_up_rounds x WHERE x.corp_id = ? AND x.msgid = ? AND x.round = ?`, corpID, msgID, round).Scan(&recorded, &pending, &spread); err != nil {
		return fmt.Errorf("campaign: batches: %w", err)
	}
	if pending == 0 && (recorded == 0 || spread.Valid) {
		q, err := r.dailyQuota(ctx, n, r.Now())
		if err != nil {
			return err
		}
		people, rest, err := r.record(ctx, n, round, recorded, q, s)
		if err != nil {
			return err
		}
		if recorded == 0 && people == 0 && rest == 0 {
			if err := r.finish(ctx, n, round, "skipped"); err != nil {
				return err
			}
			return r.stop(ctx, n, "everyone_read")
		}
		spread.Valid = spread.Valid || rest > 0
	}
	if stopped, err := r.sendBatches(ctx, n, round); err != nil || stopped {
		return err
	}
	if spread.Valid {
		left, _, err := r.candidates(ctx, n, round, true)
		if err != nil {
			return err
		}
		if len(left) > 0 {
			return r.postpone(ctx, n, round, s, len(left))
		}
	}
	if n.policy.EscalateAfter == round {
		if err := r.escalate(ctx, n, round); err != nil {
			return err
		}
	}
	return r.finish(ctx, n, round, "sent")
}

// postpone puts a spread round back to pending until the next working
// day, with rest people still to remind, and says until when it will
// take (spread_until). A next day past the policy's deadline ends the
// round with the people it reached.
func (r *Rounds) postpone(ctx context.Context, n notice, round int, s *yidu.FollowUpSchedule, rest int) error {
	now, loc := r.Now(), r.zone(n.app)
	next := s.NextDay(now, loc)
	if d := s.Deadline(); d != nil && next.After(*d) {
		return r.finish(ctx, n, round, "sent")
	}
	q, err := r.dailyQuota(ctx, n, next)
	if err != nil {
		return err
	}
	until := spreadUntil(s, now, loc, rest, q.limit)
	if _, err := r.DB.ExecContext(ctx, `UPDATE follow_up_rounds SET state = 'pending', due_at = ?, spread_until = ?, owner = NULL, lease_until = NULL,
			sent_to = (SELECT COUNT(*) FROM reminder_log l WHERE l.corp_id = ? AND l.msgid = ? AND l.round = ? AND l.kind = 'reminder' AND l.outcome = 'sent')
		WHERE `+roundWhere+` AND state = 'sending' AND owner = ?`,
		next, until, n.corpID, n.msgID, round, n.corpID, n.msgID, round, r.Owner); err != nil {
		return fmt.Errorf("campaign: postpone round: %w", err)
	}
	r.Log.Info("follow-up round spread over days (daily quota)", "msgid", n.msgID, "round", round, "rest", rest, "next", next, "until", until)
	return nil
}

// candidates are the round's people at this moment: the live recipients
// not read, active in the directory, and (reminded) not already in the
// round's reminder_log.
func (r *Rounds) candidates(ctx context.Context, n notice, round int, reminded bool) ([]uint32, map[uint32]Member, error) {
	rec, ok, err := r.Reads.RecipientBitmap(ctx, n.corpID, n.msgID)
	if err != nil || !ok {
		return nil, nil, fmt.Errorf("campaign: recipients of %s (found %v): %w", n.msgID, ok, err)
	}
	read, _, err := r.Reads.ReadBitmap(ctx, n.corpID, n.msgID)
	if err != nil {
		return nil, nil, fmt.Errorf("campaign: reads of %s: %w", n.msgID, err)
	}
	unread := roaring.AndNot(rec, read)
	if reminded {
		rows, err := r.DB.QueryContext(ctx, `SELECT uid FROM reminder_log WHERE corp_id = ? AND msgid = ? AND round = ? AND kind = 'reminder'`,
			n.corpID, n.msgID, round)
		if err != nil {
			return nil, nil, fmt.Errorf("campaign: reminded: %w", err)
		}
		done := roaring.New()
		for rows.Next() {
			var uid uint32
			if err := rows.Scan(&uid); err != nil {
				rows.Close()
				return nil, nil, fmt.Errorf("campaign: reminded: %w", err)
			}
			done.Add(uid)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, nil, fmt.Errorf("campaign: reminded: %w", err)
		}
		unread.AndNot(done)
	}
	members, err := r.People.Active(ctx, n.corpID, unread.ToArray())
	if err != nil {
		return nil, nil, fmt.Errorf("campaign: members: %w", err)
	}
	uids := make([]uint32, 0, len(members))
	it := unread.Iterator()
	for it.HasNext() {
		if uid := it.Next(); hasMember(members, uid) {
			uids = append(uids, uid) // one who left, or is not in the directory, is skipped
		}
	}
	return uids, members, nil
}

func hasMember(m map[uint32]Member, uid uint32) bool {
	_, ok := m[uid]
	return ok
}

// record takes the round's people at this moment (candidates; after a
// part sent on an earlier day, those not reminded yet), as many as q
// leaves for today, and records them in batches numbered from first
// (follow_up_batches and reminder_log, one transaction) before anything
// is sent. rest are the people left for a later day; with any, the
// round's spread_until is set in the same transaction.
func (r *Rounds) record(ctx context.Context, n notice, round, first int, q quota, s *yidu.FollowUpSchedule) (people, rest int, err error) {
	uids, members, err := r.candidates(ctx, n, round, first > 0)
	if err != nil {
		return 0, 0, err
	}
	if left := q.left(); len(uids) > left {
		uids, rest = uids[:left], len(uids)-left
	}
	now := r.Now()
	tx, err := r.DB.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("campaign: record round: %w", err)
	}
	defer tx.Rollback()
	batch, count := roaring.New(), first
	flush := func() error {
		if batch.IsEmpty() {
			return nil
		}
		b, err := batch.ToBytes()
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO follow_up_batches (corp_id, msgid, round, kind, batch, state, uids, people, created_at)
			VALUES (?, ?, ?, 'reminder', ?, 'pending', ?, ?, ?)`, n.corpID, n.msgID, round, count, b, batch.GetCardinality(), now); err != nil {
			return err
		}
		args := make([]any, 0, batch.GetCardinality()*8)
		stmt := []byte(`INSERT INTO reminder_log (corp_id, msgid, round, kind, uid, userid, batch, reminded_at, outcome) VALUES `)
		it := batch.Iterator()
		for i := 0; it.HasNext(); i++ {
			uid := it.Next()
			if i > 0 {
				stmt = append(stmt, ',')
			}
			stmt = append(stmt, "(?, ?, ?, 'reminder', ?, ?, ?, ?, 'pending')"...)
			args = append(args, n.corpID, n.msgID, round, uid, members[uid].UserID, count, now.UTC().Truncate(time.Second))
		}
		if _, err := tx.ExecContext(ctx, string(stmt), args...); err != nil {
			return err
		}
		count++
		batch = roaring.New()
		return nil
	}
	for _, uid := range uids {
		batch.Add(uid)
		people++
		if batch.GetCardinality() == RoundBatch {
			if err := flush(); err != nil {
				return 0, 0, fmt.Errorf("campaign: record batch: %w", err)
			}
		}
	}
	if err := flush(); err != nil {
		return 0, 0, fmt.Errorf("campaign: record batch: %w", err)
	}
	if rest > 0 {
		loc := r.zone(n.app)
		if _, err := tx.ExecContext(ctx, `UPDATE follow_up_rounds SET spread_until = ? WHERE `+roundWhere,
			spreadUntil(s, now, loc, rest, q.limit), n.corpID, n.msgID, round); err != nil {
			return 0, 0, fmt.Errorf("campaign: spread round: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, fmt.Errorf("campaign: record round: %w", err)
	}
	return people, rest, nil
}

// sendBatches sends the round's batches still pending, in order, each
// marked sent after WeCom answered. stopped: the lease was lost or the
// round cancelled, after the current batch.
func (r *Rounds) sendBatches(ctx context.Context, n notice, round int) (stopped bool, err error) {
	rows, err := r.DB.QueryContext(ctx, `SELECT batch, uids FROM follow_up_batches
		WHERE corp_id = ? AND msgid = ? AND round = ? AND kind = 'reminder' AND state = 'pending' ORDER BY batch`, n.corpID, n.msgID, round)
	if err != nil {
		return false, fmt.Errorf("campaign: pending batches: %w", err)
	}
	type pending struct {
		batch int
		uids  *roaring.Bitmap
	}
	var todo []pending
	for rows.Next() {
		var p pending
		var b []byte
		if err := rows.Scan(&p.batch, &b); err != nil {
			rows.Close()
			return false, fmt.Errorf("campaign: pending batches: %w", err)
		}
		p.uids = roaring.New()
		if err := p.uids.UnmarshalBinary(b); err != nil {
			rows.Close()
			return false, fmt.Errorf("campaign: batch %d: %w", p.batch, err)
		}
		todo = append(todo, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("campaign: pending batches: %w", err)
	}
	for _, p := range todo {
		held, cancelled, err := r.renew(ctx, n.corpID, n.msgID, round)
		if err != nil {
			return true, err
		}
		if !held {
			return true, nil
		}
		if cancelled {
			return true, r.finish(ctx, n, round, "cancelled")
		}
		members, err := r.People.Active(ctx, n.corpID, p.uids.ToArray())
		if err != nil {
			return true, fmt.Errorf("campaign: members: %w", err)
		}
		users := make([]string, 0, len(members))
		byUser := make(map[string]uint32, len(members))
		for uid, m := range members {
			users = append(users, m.UserID)
			byUser[m.UserID] = uid
		}
		taskID := yidu.RoundTaskID(yidu.MsgID(n.msgID), round, p.batch)
		invalid, err := r.Sender.RemindBatch(ctx, n.msg, taskID, p.batch, users)
		if err != nil {
			// Unknown outcome: the batch stays pending; the next owner
			// resends it with the same task_id (WeCom's duplicate check).
			return true, fmt.Errorf("campaign: send batch %d of round %d: %w", p.batch, round, err)
		}
		if err := r.mark(ctx, n, round, p.batch, invalid, byUser); err != nil {
			return true, err
		}
	}
	return false, nil
}

// mark records a batch WeCom answered: the batch sent, each person's
// outcome.
func (r *Rounds) mark(ctx context.Context, n notice, round, batch int, invalid []string, byUser map[string]uint32) error {
	tx, err := r.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("campaign: mark batch: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE reminder_log SET outcome = 'sent'
		WHERE corp_id = ? AND msgid = ? AND round = ? AND kind = 'reminder' AND batch = ?`, n.corpID, n.msgID, round, batch); err != nil {
		return fmt.Errorf("campaign: mark batch: %w", err)
	}
	for _, u := range invalid {
		if uid, ok := byUser[u]; ok {
			if _, err := tx.ExecContext(ctx, `UPDATE reminder_log SET outcome = 'invalid'
				WHERE corp_id = ? AND msgid = ? AND round = ? AND kind = 'reminder' AND uid = ?`, n.corpID, n.msgID, round, uid); err != nil {
				return fmt.Errorf("campaign: mark batch: %w", err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE follow_up_batches SET state = 'sent', sent_at = ?
		WHERE corp_id = ? AND msgid = ? AND round = ? AND kind = 'reminder' AND batch = ?`, r.Now(), n.corpID, n.msgID, round, batch); err != nil {
		return fmt.Errorf("campaign: mark batch: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("campaign: mark batch: %w", err)
	}
	return nil
}

// escalate sends each leader's digest of the round once: a digest is
// recorded in reminder_log (kind digest) before it is sent, and one
// already recorded is never sent again.
func (r *Rounds) escalate(ctx context.Context, n notice, round int) error {
	org, err := r.Org.Org(ctx, n.corpID)
	if err != nil {
		return fmt.Errorf("campaign: org: %w", err)
	}
	rec, _, err := r.Reads.RecipientBitmap(ctx, n.corpID, n.msgID)
	if err != nil {
		return fmt.Errorf("campaign: recipients: %w", err)
	}
	read, _, err := r.Reads.ReadBitmap(ctx, n.corpID, n.msgID)
	if err != nil {
		return fmt.Errorf("campaign: reads: %w", err)
	}
	active, err := r.People.Active(ctx, n.corpID, rec.ToArray())
	if err != nil {
		return fmt.Errorf("campaign: members: %w", err)
	}
	present := roaring.New()
	for uid := range active {
		present.Add(uid)
	}
	esc := Escalate(org, present, read)
	name := func(uid uint32) string {
		if m, ok := active[uid]; ok && m.Name != "" {
			return m.Name
		}
		return active[uid].UserID
	}
	type digest struct {
		uid    uint32
		userID string
		g      *Group
	}
	var all []digest
	leaderUIDs := make([]uint32, 0, len(esc.Leaders))
	for l := range esc.Leaders {
		leaderUIDs = append(leaderUIDs, l)
	}
	leaders, err := r.People.Active(ctx, n.corpID, leaderUIDs)
	if err != nil {
		return fmt.Errorf("campaign: leaders: %w", err)
	}
	for l, g := range esc.Leaders {
		if m, ok := leaders[l]; ok {
			all = append(all, digest{l, m.UserID, g})
		} else if esc.Fallback == nil {
			esc.Fallback = &Group{People: g.People.Clone(), Unread: g.Unread.Clone()}
		} else {
			esc.Fallback.People.Or(g.People) // a leader who left: their people to the fallback
			esc.Fallback.Unread.Or(g.Unread)
		}
	}
	if esc.Fallback != nil && r.Fallback != nil {
		for _, u := range r.Fallback(n.app) {
			all = append(all, digest{0, u, esc.Fallback})
		}
	}
	for i, d := range all {
		head, names := DigestText(n.title, d.g, name)
		res, err := r.DB.ExecContext(ctx, `INSERT IGNORE INTO reminder_log (corp_id, msgid, round, kind, uid, userid, batch, reminded_at, outcome)
			VALUES (?, ?, ?, 'digest', ?, ?, ?, ?, 'pending')`, n.corpID, n.msgID, round, digestKey(d.uid, i), d.userID, i, r.Now().UTC().Truncate(time.Second))
		if err != nil {
			return fmt.Errorf("campaign: record digest: %w", err)
		}
		if k, _ := res.RowsAffected(); k == 0 {
			continue // recorded by an earlier owner of the round
		}
		taskID := yidu.DigestTaskID(yidu.MsgID(n.msgID), round, i)
		outcome := "sent"
		text := head + "\n" + names
		if r.PageURL != nil {
			if u := r.PageURL(n.msgID); u != "" {
				// A text message may carry <a href> links (message/send,
				// msgtype text, doc path 90236).
				text += "\n" + `<a href="` + html.EscapeString(u) + `">` + DigestLinkText + "</a>"
			}
		}
		if err := r.Sender.Digest(ctx, n.msg, taskID, d.userID, text); err != nil {
			outcome = "failed"
			r.Log.Warn("digest", "msgid", n.msgID, "round", round, "err", err)
		}
		if _, err := r.DB.ExecContext(ctx, `UPDATE reminder_log SET outcome = ? WHERE corp_id = ? AND msgid = ? AND round = ? AND kind = 'digest' AND uid = ?`,
			outcome, n.corpID, n.msgID, round, digestKey(d.uid, i)); err != nil {
			return fmt.Errorf("campaign: mark digest: %w", err)
		}
	}
	if _, err := r.DB.ExecContext(ctx, `UPDATE follow_up_rounds SET escalated = 1 WHERE corp_id = ? AND msgid = ? AND round = ?`,
		n.corpID, n.msgID, round); err != nil {
		return fmt.Errorf("campaign: escalated: %w", err)
	}
	return nil
}

// digestKey is a digest's reminder_log uid: the leader's uid, or for a
// fallback UserID (not a directory member, perhaps) a number above every
// uid idmap assigns, by its place in the list.
func digestKey(uid uint32, i int) uint32 {
	if uid != 0 {
		return uid
	}
	return ^uint32(0) - uint32(i)
}

// finish ends the round in state, with sent_to the people it reached.
func (r *Rounds) finish(ctx context.Context, n notice, round int, state string) error {
	_, err := r.lease().Finish(ctx, r.DB, yidu.NoticeState(state), `finished_at = ?,
			sent_to = (SELECT COUNT(*) FROM reminder_log l WHERE l.corp_id = ? AND l.msgid = ? AND l.round = ? AND l.kind = 'reminder' AND l.outcome = 'sent')`,
		roundWhere, r.Now(), n.corpID, n.msgID, round, n.corpID, n.msgID, round)
	return err
}

// CancelRound stops the notice's current round: a pending one does not
// start; one sending stops after its current batch.
func (r *Rounds) CancelRound(ctx context.Context, corpID, msgID string) (bool, error) {
	res, err := r.DB.ExecContext(ctx, `UPDATE follow_up_rounds SET cancelled_at = ?,
			state = CASE WHEN state = 'pending' THEN 'cancelled' ELSE state END
		WHERE corp_id = ? AND msgid = ? AND state IN ('pending', 'sending') AND cancelled_at IS NULL`, r.Now(), corpID, msgID)
	if err != nil {
		return false, fmt.Errorf("campaign: cancel round: %w", err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// RoundReport is one round done, as the message JSON's follow_up.rounds
// shows it (docs/api.md).
type RoundReport struct {
	Round int `json:"round"`
	// At is when the round started sending.
	At            time.Time `json:"at"`
	State         string    `json:"state"`
	SentTo        int       `json:"sent_to"`
	ReadWithin1h  int       `json:"read_within_1h"`
	ReadWithin24h int       `json:"read_within_24h"`
	Escalated     bool      `json:"escalated"`
	// SpreadUntil is when a round larger than the app's remaining daily
	// quota will have reached everyone (null: within its day).
	SpreadUntil *time.Time `json:"spread_until"`
}

// FollowUp is a notice's follow-up as the message JSON's "follow_up"
// carries it.
type FollowUp struct {
	Policy    yidu.Policy   `json:"policy"`
	NextRound int           `json:"next_round,omitempty"`
	NextAt    *time.Time    `json:"next_at"`
	Stopped   string        `json:"stopped,omitempty"`
	Rounds    []RoundReport `json:"rounds"`
}

// FollowUpOf returns the notice's follow-up; ok is false for a notice
// without a policy. The read counts are reminder_effect's (migration
// 00012), so the page and an analyst's query agree.
func (r *Rounds) FollowUpOf(ctx context.Context, corpID, msgID string) (FollowUp, bool, error) {
	fu := FollowUp{Rounds: []RoundReport{}}
	var policy string
	var stopped sql.NullString
	err := r.DB.QueryRowContext(ctx, `SELECT policy, stopped_reason FROM follow_ups WHERE corp_id = ? AND msgid = ?`,
		corpID, msgID).Scan(&policy, &stopped)
	if errors.Is(err, sql.ErrNoRows) {
		return fu, false, nil
	}
	if err != nil {
		return fu, false, fmt.Errorf("campaign: follow-up: %w", err)
	}
	if err := json.Unmarshal([]byte(policy), &fu.Policy); err != nil {
		return fu, false, fmt.Errorf("campaign: policy of %s: %w", msgID, err)
	}
	fu.Stopped = stopped.String
	rows, err := r.DB.QueryContext(ctx, `SELECT x.round, COALESCE(x.started_at, x.due_at), x.due_at, x.state, x.sent_to, x.escalated, x.spread_until,
			COALESCE(e.read_within_1h, 0), COALESCE(e.read_within_24h, 0)
		FROM follow_up_rounds x
		LEFT JOIN reminder_effect e ON e.corp_id = x.corp_id AND e.msgid = x.msgid AND e.round = x.round
		WHERE x.corp_id = ? AND x.msgid = ? ORDER BY x.round`, corpID, msgID)
	if err != nil {
		return fu, false, fmt.Errorf("campaign: rounds: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var rr RoundReport
		var spread sql.NullTime
		var due time.Time
		if err := rows.Scan(&rr.Round, &rr.At, &due, &rr.State, &rr.SentTo, &rr.Escalated, &spread, &rr.ReadWithin1h, &rr.ReadWithin24h); err != nil {
			return fu, false, fmt.Errorf("campaign: rounds: %w", err)
		}
		if spread.Valid {
			rr.SpreadUntil = &spread.Time
			if rr.State == "pending" {
				// A spread round waiting for its next part is the next
				// thing to send.
				fu.NextRound, fu.NextAt = rr.Round, &due
			}
		}
		fu.Rounds = append(fu.Rounds, rr)
	}
	if err := rows.Err(); err != nil {
		return fu, false, fmt.Errorf("campaign: rounds: %w", err)
	}
	if fu.Stopped != "" {
		return fu, true, nil
	}
	n, err := r.notice(ctx, corpID, msgID)
	if errors.Is(err, yidu.ErrInvalid) {
		return fu, true, nil // not registered yet (scheduled, draft): no round is planned
	}
	if err != nil {
		return fu, false, err
	}
	s, err := fu.Policy.Compile(n.sentAt, r.MinGap)
	if err != nil {
		return fu, true, nil // a policy the minimum now refuses: shown, not scheduled
	}
	if times := s.Times(n.sentAt, r.zone(n.app)); fu.NextAt == nil && len(fu.Rounds) < len(times) {
		fu.NextRound = len(fu.Rounds) + 1
		at := times[len(fu.Rounds)]
		fu.NextAt = &at
	}
	return fu, true, nil
}
