package loops

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/loop"
	"github.com/yidu-io/yidu/internal/sqlrows"
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

// Joiners are the members enrolled in a standing notice after its first
// send (tracker.Registry.Enrolled: standing_enrolments is the tracker's).
// Their rounds are their own, counted from their own card
// (standing_joiners.go), so a notice's rounds leave them out.
type Joiners interface {
	Enrolled(ctx context.Context, corpID, msgID string) (*roaring.Bitmap, error)
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
	// Joiners are each standing notice's joiners, left out of its rounds.
	Joiners Joiners
	Log     *slog.Logger
	Now     func() time.Time
	Owner   string
	TTL     time.Duration
	MinGap  time.Duration
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
	// Gate is the notice service's decision whether a notice may reach
	// people (Service.RoundGate: not recalled, approved when its app asks
	// it); a round of a notice it answers wait waits, unclaimed, until it
	// lets it through. Nil: every round runs.
	Gate func(ctx context.Context, corpID, msgID string) (wait bool, err error)
	// Guard runs each round and each notice's planning under its own
	// recover and backoff (yidu_loop_*{loop="rounds"}): a round that
	// panics or fails waits, the others run. Nil: one counting nowhere,
	// on Now.
	Guard *loop.Guard

	guardOnce sync.Once
}

// guard is r.Guard or, without one, a Guard of its own on r.Now.
func (r *Rounds) guard() *loop.Guard {
	r.guardOnce.Do(func() {
		if r.Guard == nil {
			r.Guard, _ = loop.New("rounds", loop.Options{Logger: r.Log, Now: r.Now}) // no Registerer: no error
		}
	})
	return r.Guard
}

// roundItem is a round's id in the loop's log and backoff.
func roundItem(corpID, msgID string, round int) string {
	return fmt.Sprintf("%s/%s round %d", corpID, msgID, round)
}

// notice is what a round needs of a notice.
type notice struct {
	corpID, msgID, app, title string
	sentAt                    time.Time
	recalled                  bool
	policy                    yidu.Policy
	msg                       yidu.Message
}

func (r *Rounds) notice(ctx context.Context, corpID, msgID string) (notice, error) {
	n := notice{corpID: corpID, msgID: msgID}
	var recalled sql.NullTime
	var body, url sql.NullString
	err := r.DB.QueryRowContext(ctx, `SELECT app, agent_id, title, body, url, sent_at, recalled_at FROM messages WHERE corp_id = ? AND msgid = ?`,
		corpID, msgID).Scan(&n.app, &n.msg.AgentID, &n.title, &body, &url, &n.sentAt, &recalled)
	if errors.Is(err, sql.ErrNoRows) {
		return n, yidu.Fieldf("msgid", "msgid: no notice %s", yidu.Truncate(msgID, 64))
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
	type key struct {
		corp, msg string
		round     int
	}
	due, err := sqlrows.List(ctx, r.DB, func(rows *sql.Rows, k *key) error { return rows.Scan(&k.corp, &k.msg, &k.round) },
		`SELECT corp_id, msgid, round FROM follow_up_rounds
		WHERE (state = 'pending' AND due_at <= ?) OR (state = 'sending' AND lease_until < ?) ORDER BY due_at`, r.Now(), r.Now())
	if err != nil {
		return fmt.Errorf("campaign: due rounds: %w", err)
	}
	// Each round on its own: one that fails or panics is logged with its
	// id, counted and backed off; the others run (issue 46).
	g := r.guard()
	for _, k := range due {
		_, _ = g.Do(ctx, roundItem(k.corp, k.msg, k.round), func(ctx context.Context) error {
			return r.run(ctx, k.corp, k.msg, k.round)
		})
	}
	return nil
}

// plan writes the next due round of every running follow-up, and ends
// those whose rounds are over or whose notice was recalled.
func (r *Rounds) plan(ctx context.Context) error {
	type row struct {
		n            notice
		done, active int
		// unreadable: its policy does not decode; the follow-up fails as
		// a plan of its own, and never stops the others'.
		unreadable error
	}
	all, err := sqlrows.List(ctx, r.DB, func(rows *sql.Rows, x *row) error {
		var policy string
		if err := rows.Scan(&x.n.corpID, &x.n.msgID, &policy, &x.n.app, &x.n.title, &x.n.sentAt, &x.n.recalled, &x.done, &x.active); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(policy), &x.n.policy); err != nil {
			x.unreadable = fmt.Errorf("campaign: policy of %s: %w", x.n.msgID, err)
		}
		return nil
	}, `SELECT f.corp_id, f.msgid, f.policy, m.app, m.title, m.sent_at, m.recalled_at IS NOT NULL,
			(SELECT COUNT(*) FROM follow_up_rounds x WHERE x.corp_id = f.corp_id AND x.msgid = f.msgid),
			(SELECT COUNT(*) FROM follow_up_rounds x WHERE x.corp_id = f.corp_id AND x.msgid = f.msgid AND x.state IN ('pending', 'sending'))
		FROM follow_ups f JOIN messages m ON m.corp_id = f.corp_id AND m.msgid = f.msgid
		WHERE f.stopped_reason IS NULL`)
	if err != nil {
		return fmt.Errorf("campaign: follow-ups: %w", err)
	}
	now := r.Now()
	for _, x := range all {
		if x.unreadable == nil && x.active > 0 && !x.n.recalled {
			continue
		}
		_, _ = r.guard().Do(ctx, "plan "+x.n.corpID+"/"+x.n.msgID, func(ctx context.Context) error {
			if x.unreadable != nil {
				return x.unreadable
			}
			return r.planOne(ctx, x.n, x.done, now)
		})
	}
	return nil
}

// planOne plans n's next round, or ends its follow-up, given done rounds.
func (r *Rounds) planOne(ctx context.Context, n notice, done int, now time.Time) error {
	if n.recalled {
		return r.stop(ctx, n, "recalled")
	}
	s, err := n.policy.Compile(n.sentAt, r.MinGap)
	if err != nil {
		r.Log.Warn("follow-up policy no longer valid", "msgid", n.msgID, "err", err)
		return nil
	}
	round, at, ok := s.Due(n.sentAt, now, r.zone(n.app), done)
	if !ok {
		if at.IsZero() {
			reason := "done"
			if len(s.Times(n.sentAt, r.zone(n.app))) < s.Rounds() {
				reason = "deadline"
			}
			return r.stop(ctx, n, reason)
		}
		return nil
	}
	if _, err := r.DB.ExecContext(ctx, `INSERT IGNORE INTO follow_up_rounds (corp_id, msgid, round, state, due_at)
		VALUES (?, ?, ?, 'pending', ?)`, n.corpID, n.msgID, round, at); err != nil {
		return fmt.Errorf("campaign: plan round: %w", err)
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

// lease is the round's claim: store.Lease on follow_up_rounds, the
// same conditional UPDATE as a scheduled send's, so of replicas claiming
// at once exactly one sends a round, and one whose owner died (its lease
// ran out) is resumed by another.
func (r *Rounds) lease() store.Lease {
	return store.Lease{Table: "follow_up_rounds", Owner: r.Owner, TTL: r.TTL}
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
