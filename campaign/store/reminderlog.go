package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/loop"
	"github.com/yidu-io/yidu/internal/opt"
	"github.com/yidu-io/yidu/internal/sqlrows"
	"github.com/yidu-io/yidu/ledger"
)

// ReminderLog is what a person's acts on a sent notice need to act once
// across replicas, over MySQL: the claim of the notice for one act at a
// time (notice_acts, claimed with Lease: the same conditional UPDATE as a
// scheduled send's or a round's), and who was reminded when
// (manual_reminders with the rounds' reminder_log; migrations 00012,
// 00015). It is not the evidence ledger (package ledger): it only writes
// an entry there for each reminder asked for (WithEvidence).
type ReminderLog struct {
	db  *sql.DB
	l   Lease
	now func() time.Time
	log *slog.Logger
	// evidence logs each reminder asked for (WithEvidence).
	evidence EvidenceLog
}

// WithEvidence makes each manual reminder asked for (a manual_reminders
// row) an entry of the corp's evidence log, written in the row's
// transaction, and its withdrawal (Unrecord) one too (issue 48).
func (s *ReminderLog) WithEvidence(l EvidenceLog) *ReminderLog {
	s.evidence = l
	return s
}

// NewReminderLog returns the reminder log over db for owner (DefaultOwner when
// ""), claims lasting ttl (DefaultLeaseTTL when 0) unless renewed; nil
// now is time.Now.
func NewReminderLog(db *sql.DB, owner string, ttl time.Duration, now func() time.Time, log *slog.Logger) (*ReminderLog, error) {
	if db == nil {
		return nil, errors.New("campaign: reminder log: db is required")
	}
	if owner == "" {
		owner = DefaultOwner()
	}
	opt.Clock(&now)
	opt.Logger(&log)
	return &ReminderLog{db: db, l: Lease{Table: "notice_acts", Owner: owner, TTL: or(ttl, DefaultLeaseTTL)}, now: now, log: log}, nil
}

const actWhere = "corp_id = ? AND msgid = ?"

// actIdle is a notice_acts row nobody holds.
const actIdle yidu.NoticeState = "idle"

// Claim creates the notice's row if it has none and claims it: of any
// number of replicas claiming at once, MySQL's row lock lets one move it
// from idle to sending. A goroutine renews the claim every third of its
// TTL until release, so a long reminder keeps it, and a replica that died
// holding it loses it after the TTL.
func (s *ReminderLog) Claim(ctx context.Context, corpID, msgID, act string) (func(), bool, error) {
	if _, err := execRetry(ctx, s.db, `INSERT IGNORE INTO notice_acts (corp_id, msgid, state) VALUES (?, ?, ?)`,
		corpID, msgID, string(actIdle)); err != nil {
		return nil, false, fmt.Errorf("campaign: act row: %w", err)
	}
	// Each claim is its own owner: a request of this replica that took
	// over a claim whose lease ran out is never released by the one it
	// took it from.
	l := s.l
	var b [4]byte
	_, _ = rand.Read(b[:])
	l.Owner += "/" + hex.EncodeToString(b[:])
	ok, err := l.Claim(ctx, s.db, s.now(), []yidu.NoticeState{actIdle}, "act = ?", actWhere, act, corpID, msgID)
	if err != nil || !ok {
		return nil, false, err
	}
	// The renewals outlive the request's context: release ends them.
	beats, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		loop.Every(beats, s.l.TTL/3, func(context.Context) {
			rctx, cancel := context.WithTimeout(context.Background(), s.l.TTL/3)
			held, err := l.Renew(rctx, s.db, s.now(), actWhere, corpID, msgID)
			cancel()
			if err != nil || !held {
				// The per-person record still keeps a replica that
				// takes over from reminding these people again.
				s.log.Warn("act claim not renewed", "corp", corpID, "msgid", msgID, "act", act, "held", held, "err", err)
			}
		})
	}()
	release := func() {
		stop()
		<-done
		// A fresh context: the claim must end even when the request's did.
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := l.Finish(rctx, s.db, actIdle, "", actWhere, corpID, msgID); err != nil {
			s.log.Warn("act claim not released; it ends with its lease", "corp", corpID, "msgid", msgID, "act", act, "err", err)
		}
	}
	return release, true, nil
}

// Reminded reads manual_reminders and the follow-up rounds' reminder_log
// (a person a round reminded is not reminded again by hand within the
// interval, as before per notice).
func (s *ReminderLog) Reminded(ctx context.Context, corpID, msgID string, since time.Time) (map[uint32]time.Time, error) {
	out, err := sqlrows.Map[uint32, time.Time](ctx, s.db, `SELECT uid, MAX(at) FROM (
			SELECT uid, reminded_at AS at FROM manual_reminders WHERE corp_id = ? AND msgid = ? AND reminded_at > ?
			UNION ALL
			SELECT uid, reminded_at AS at FROM reminder_log WHERE corp_id = ? AND msgid = ? AND kind = 'reminder' AND reminded_at > ?
		) x GROUP BY uid`, corpID, msgID, since.UTC(), corpID, msgID, since.UTC())
	if err != nil {
		return nil, fmt.Errorf("campaign: reminded: %w", err)
	}
	return out, nil
}

// Record inserts one row per person, RowsPerStatement rows a statement, in one
// transaction: the people are reminded entirely or not at all.
func (s *ReminderLog) Record(ctx context.Context, corpID, msgID string, at time.Time, by, scope string, uids []uint32) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("campaign: record reminder: %w", err)
	}
	defer tx.Rollback()
	at = at.UTC().Truncate(time.Millisecond)
	by = yidu.Truncate(by, 128)
	for start := 0; start < len(uids); start += RowsPerStatement {
		chunk := uids[start:min(start+RowsPerStatement, len(uids))]
		args := make([]any, 0, len(chunk)*6)
		for _, u := range chunk {
			args = append(args, corpID, msgID, u, at, by, scope)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO manual_reminders (corp_id, msgid, uid, reminded_at, reminded_by, scope) VALUES (?, ?, ?, ?, ?, ?)`+
			strings.Repeat(", (?, ?, ?, ?, ?, ?)", len(chunk)-1), args...); err != nil {
			return fmt.Errorf("campaign: record reminder: %w", err)
		}
	}
	facts := make([]ledger.Fact, 0, len(uids))
	for _, u := range uids {
		facts = append(facts, ledger.Asked{MsgID: msgID, UID: u, At: at, By: by, Scope: scope}.Fact())
	}
	if err := appendEvidence(ctx, s.evidence, tx, corpID, facts); err != nil {
		return fmt.Errorf("campaign: record reminder: evidence log: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("campaign: record reminder: %w", err)
	}
	return nil
}

// Unrecord deletes the rows Record wrote at at; with an evidence log,
// each deleted row is a withdrawal entry (ledger.Asked, Undone) in the
// same transaction.
func (s *ReminderLog) Unrecord(ctx context.Context, corpID, msgID string, at time.Time) error {
	at = at.UTC().Truncate(time.Millisecond)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("campaign: unrecord reminder: %w", err)
	}
	defer tx.Rollback()
	var facts []ledger.Fact
	if s.evidence != nil {
		rows, err := tx.QueryContext(ctx, `SELECT uid, reminded_by, scope FROM manual_reminders WHERE corp_id = ? AND msgid = ? AND reminded_at = ? FOR UPDATE`,
			corpID, msgID, at)
		if err != nil {
			return fmt.Errorf("campaign: unrecord reminder: %w", err)
		}
		for rows.Next() {
			a := ledger.Asked{MsgID: msgID, At: at, Undone: true}
			if err := rows.Scan(&a.UID, &a.By, &a.Scope); err != nil {
				rows.Close()
				return fmt.Errorf("campaign: unrecord reminder: %w", err)
			}
			facts = append(facts, a.Fact())
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("campaign: unrecord reminder: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM manual_reminders WHERE corp_id = ? AND msgid = ? AND reminded_at = ?`,
		corpID, msgID, at); err != nil {
		return fmt.Errorf("campaign: unrecord reminder: %w", err)
	}
	if err := appendEvidence(ctx, s.evidence, tx, corpID, facts); err != nil {
		return fmt.Errorf("campaign: unrecord reminder: evidence log: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("campaign: unrecord reminder: %w", err)
	}
	return nil
}

// ReconfirmScope is manual_reminders.scope of the 通知已更新，请重新确认
// card of version n (Service.Reconfirm): the record that each person got
// it once.
func ReconfirmScope(n int) string { return "reack:v" + strconv.Itoa(n) }

// Reconfirmable returns the members (uid → UserID) who acknowledged a
// version of the notice older than version (page_signals), are still
// members, and were not yet recorded as sent version's update card.
func (s *ReminderLog) Reconfirmable(ctx context.Context, corpID, msgID string, version int) (map[uint32]string, error) {
	out, err := sqlrows.Map[uint32, string](ctx, s.db, `SELECT DISTINCT p.uid, u.userid FROM page_signals p
		JOIN users u ON u.corp_id = p.corp_id AND u.uid = p.uid
		WHERE p.corp_id = ? AND p.msgid = ? AND p.source = 6 AND p.version < ? AND u.status = 1
		  AND NOT EXISTS (SELECT 1 FROM manual_reminders r
		    WHERE r.corp_id = p.corp_id AND r.msgid = p.msgid AND r.uid = p.uid AND r.scope = ?)`,
		corpID, msgID, version, ReconfirmScope(version))
	if err != nil {
		return nil, fmt.Errorf("campaign: reconfirmable: %w", err)
	}
	return out, nil
}

// ManualReminder is one 提醒未读 of a notice, and what it achieved
// (zh-CN.md: 提醒效果: 提醒后 1 小时内已读 N 人).
type ManualReminder struct {
	At time.Time `json:"at"`
	// By is who reminded; Scope "all" (a sender's) or "led" (a leader's).
	By    string `json:"by"`
	Scope string `json:"scope"`
	// People is how many it reminded; ReadWithin1h and ReadSince how
	// many of them read (under read_rule acknowledged: acknowledged) at
	// most an hour after it, and at all after it.
	People       int `json:"people"`
	ReadWithin1h int `json:"read_within_1h"`
	ReadSince    int `json:"read_since"`
}

// ManualReminders are corp's msgID's 提醒未读 by hand (scope all or
// led), oldest first, each with what it achieved.
func (s *ReminderLog) ManualReminders(ctx context.Context, corpID, msgID string) ([]ManualReminder, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT mr.reminded_at, mr.reminded_by, mr.scope, r.is_read, r.read_time
		FROM manual_reminders mr
		JOIN message_read_record r ON r.corp_id = mr.corp_id AND r.msgid = mr.msgid AND r.uid = mr.uid
		WHERE mr.corp_id = ? AND mr.msgid = ? AND mr.scope IN ('all', 'led')
		ORDER BY mr.reminded_at`, corpID, msgID)
	if err != nil {
		return nil, fmt.Errorf("campaign: reminders of %s: %w", msgID, err)
	}
	defer rows.Close()
	out := []ManualReminder{}
	for rows.Next() {
		var (
			at        time.Time
			by, scope string
			read      bool
			readTime  sql.NullTime
		)
		if err := rows.Scan(&at, &by, &scope, &read, &readTime); err != nil {
			return nil, fmt.Errorf("campaign: reminders of %s: %w", msgID, err)
		}
		at = at.UTC()
		if n := len(out); n == 0 || !out[n-1].At.Equal(at) || out[n-1].By != by || out[n-1].Scope != scope {
			out = append(out, ManualReminder{At: at, By: by, Scope: scope})
		}
		mr := &out[len(out)-1]
		mr.People++
		// read_time is in whole seconds: a read in the reminder's second
		// counts as after it, as reminder_effect does.
		if read && readTime.Valid && !readTime.Time.Before(at.Truncate(time.Second)) {
			mr.ReadSince++
			if !readTime.Time.After(at.Add(time.Hour)) {
				mr.ReadWithin1h++
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("campaign: reminders of %s: %w", msgID, err)
	}
	return out, nil
}
