package tracker

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/flushd"
	"github.com/yidu-io/yidu/internal/namespace"
)

// InsertBatch is the most rows in one INSERT IGNORE statement (3
// placeholders each: 15,000, well under MySQL's 65,535).
const InsertBatch = 5000

// canonical is a validated registration's audience in canonical form.
type canonical struct {
	userIDs []string // sorted, unique
	depts   []int64  // sorted, unique
	tags    []int64  // sorted, unique
	all     bool
	hash    string // hex sha256 of the canonical form
}

// canonicalize validates reg (yidu.Registration.Validate: the one rule)
// and returns its audience in canonical form with its hash.
func canonicalize(reg *yidu.Registration, now time.Time) (canonical, error) {
	if err := reg.Validate(now); err != nil {
		return canonical{}, err
	}
	au := reg.Audience
	c := canonical{userIDs: au.UserIDs, depts: au.Departments, tags: au.Tags, all: au.All}
	h := sha256.New()
	fmt.Fprintf(h, "yidu-audience-v1\nall=%t\n", c.all)
	for _, d := range c.depts {
		fmt.Fprintf(h, "d=%d\n", d)
	}
	for _, u := range c.userIDs {
		fmt.Fprintf(h, "u=%s\n", u)
	}
	// Tags come last, and only when there are any, so the hashes of
	// audiences registered before tags existed do not change.
	for _, t := range c.tags {
		fmt.Fprintf(h, "t=%d\n", t)
	}
	c.hash = hex.EncodeToString(h.Sum(nil))
	return c, nil
}

// Register registers a tracked message: it snapshots the audience, writes
// the messages row and one message_read_record row per recipient to MySQL,
// marks the message active, puts it in Redis, applies orphaned reads and,
// with reg.Send, sends the card (synchronously: see Send).
//
// Registering the same msgid again with the same audience, title, body,
// url and app returns the existing message with created=false and finishes
// whatever an interrupted earlier attempt left undone (rows, Redis,
// sending); any other difference is yidu.ErrConflict. Invalid input is
// yidu.ErrInvalid and writes nothing.
//
// Audience UserIDs the directory does not know as active members are left
// out and reported (Registered.UnknownUserIDs): a made-up UserID must not
// become a member and inflate later "all" audiences. A real new hire is
// brought in by the directory sync (or change_contact); registering again
// after it adds nobody to an existing message (the audience is a
// snapshot), so register a new one.
func (r *Registry) Register(ctx context.Context, reg yidu.Registration) (yidu.Message, bool, error) {
	res, err := r.RegisterAndSend(ctx, reg)
	return res.Message, res.Created, err
}

// RegisterAndSend is Register that also says which UserIDs were unknown
// and what the send did (the zero report without reg.Send). An error from
// the send leaves the registration done: the message and created are
// valid.
func (r *Registry) RegisterAndSend(ctx context.Context, reg yidu.Registration) (yidu.Registered, error) {
	var res yidu.Registered
	start := time.Now()
	c, err := canonicalize(&reg, r.now())
	if err != nil {
		r.met.registrations.WithLabelValues("invalid").Inc()
		return res, err
	}
	m, recipients, result, err := r.register(ctx, reg, c)
	r.met.registrations.WithLabelValues(result).Inc()
	res.Message = m
	if err != nil {
		if result == "error" {
			r.log.Error("register", "corp", reg.App.CorpID, "msgid", reg.MsgID, "err", err)
		}
		return res, err
	}
	res.Created = result == "created"
	r.met.registerSeconds.Observe(time.Since(start).Seconds())
	if res.UnknownUserIDs, err = r.unknown(ctx, m.CorpID, c.userIDs); err != nil {
		return res, err
	}
	if r.orphans != nil {
		if _, err := r.orphans.ApplyOrphans(ctx, m.CorpID, m.MsgID); err != nil {
			r.met.orphanErrors.Inc()
			return res, fmt.Errorf("tracker: apply orphans of %s: %w", m.MsgID, err)
		}
	}
	if !reg.Send {
		return res, nil
	}
	res.Send, err = r.send(ctx, reg.App, m, recipients)
	return res, err
}

// unknown returns the sorted userIDs that name no active member.
func (r *Registry) unknown(ctx context.Context, corpID string, userIDs []string) ([]string, error) {
	if len(userIDs) == 0 {
		return nil, nil
	}
	known, err := r.ids.Known(ctx, corpID, userIDs)
	if err != nil {
		return nil, fmt.Errorf("tracker: known userids: %w", err)
	}
	var out []string
	for _, u := range userIDs {
		if _, ok := known[u]; !ok {
			out = append(out, u)
		}
	}
	return out, nil
}

// messageRow is a messages row.
type messageRow struct {
	m     yidu.Message
	hash  string
	state int
}

const messageCols = "corp_id, msgid, app, agent_id, title, body, url, sent_at, recipient_count, recalled_at, COALESCE(read_at_recall, 0), read_rule"

// ReadRuleOf is the message's rule as yidu.Message keeps it: "" for the
// app's (so messages without a rule compare equal to those registered
// before rules existed), else the rule.
func ReadRuleOf(code uint8) yidu.ReadRule {
	if r := yidu.ReadRuleOfCode(code); r != yidu.ReadRuleApp {
		return r
	}
	return ""
}

func scanMessage(s interface{ Scan(...any) error }, extra ...any) (yidu.Message, error) {
	var m yidu.Message
	var recalled sql.NullTime
	var rule uint8
	dst := append([]any{&m.CorpID, &m.MsgID, &m.App, &m.AgentID, &m.Title, &m.Body, &m.URL, &m.SentAt, &m.Recipients,
		&recalled, &m.ReadAtRecall, &rule}, extra...)
	err := s.Scan(dst...)
	m.ReadRule = ReadRuleOf(rule)
	m.SentAt = m.SentAt.UTC()
	if recalled.Valid {
		m.RecalledAt = recalled.Time.UTC()
	}
	return m, err
}

func (r *Registry) messageRow(ctx context.Context, corpID, msgID string) (messageRow, bool, error) {
	var row messageRow
	var err error
	row.m, err = scanMessage(r.db.QueryRowContext(ctx,
		"SELECT "+messageCols+", audience_hash, state FROM messages WHERE corp_id = ? AND msgid = ?",
		corpID, msgID), &row.hash, &row.state)
	if errors.Is(err, sql.ErrNoRows) {
		return row, false, nil
	}
	if err != nil {
		return row, false, fmt.Errorf("tracker: read message %s: %w", msgID, err)
	}
	return row, true, nil
}

// register does the MySQL and Redis work; result is the metric label.
func (r *Registry) register(ctx context.Context, reg yidu.Registration, c canonical) (yidu.Message, *roaring.Bitmap, string, error) {
	corp := reg.App.CorpID
	for attempt := 0; ; attempt++ {
		row, ok, err := r.messageRow(ctx, corp, reg.MsgID)
		if err != nil {
			return yidu.Message{}, nil, "error", err
		}
		if ok {
			m := row.m
			if row.hash != c.hash || m.Title != reg.Title || m.Body != reg.Body || m.URL != reg.URL ||
				m.App != reg.App.Name || m.AgentID != reg.App.AgentID {
				return m, nil, "conflict", fmt.Errorf("%w: msgid %s", yidu.ErrConflict, reg.MsgID)
			}
			if err := r.claim(ctx, reg); err != nil {
				return m, nil, "conflict", err
			}
			if row.state == stateActive {
				recipients, err := r.ensureRedis(ctx, m)
				return m, recipients, "existing", err
			}
			// An earlier attempt stopped while writing rows: finish it.
			m, recipients, err := r.complete(ctx, m, c, true)
			return m, recipients, "resumed", err
		}
		if attempt > 0 {
			return yidu.Message{}, nil, "error", fmt.Errorf("tracker: message %s vanished during registration", reg.MsgID)
		}
		recipients, err := r.expand(ctx, corp, c)
		if err != nil {
			return yidu.Message{}, nil, resultOf(err), err
		}
		if err := r.claim(ctx, reg); err != nil {
			return yidu.Message{}, nil, resultOf(err), err
		}
		m := yidu.Message{
			CorpID: corp, MsgID: reg.MsgID, App: reg.App.Name, AgentID: reg.App.AgentID,
			Title: reg.Title, Body: reg.Body, URL: reg.URL, SentAt: reg.SentAt, Recipients: int64(recipients.GetCardinality()),
			ReadRule: ReadRuleOf(reg.ReadRule.Code()),
		}
		var retention sql.NullString
		if !reg.Retention.IsZero() {
			retention = sql.NullString{String: reg.Retention.String(), Valid: true}
		}
		res, err := r.db.ExecContext(ctx, `INSERT INTO messages
			(corp_id, msgid, app, agent_id, title, body, url, sent_at, recipient_count, audience_hash, state, read_rule, retention)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)
			ON DUPLICATE KEY UPDATE corp_id = corp_id`,
			corp, m.MsgID, m.App, m.AgentID, m.Title, m.Body, m.URL, m.SentAt, m.Recipients, c.hash, m.ReadRule.Code(), retention)
		if err != nil {
			return m, nil, "error", fmt.Errorf("tracker: insert message %s: %w", m.MsgID, err)
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			// The msgid exists: registered concurrently in this corp and
			// app (the claim admitted it): a re-registration.
			continue
		}
		m, recipients, err = r.completeWith(ctx, m, recipients, false)
		return m, recipients, "created", err
	}
}

// claim takes reg's msgid in the one namespace of notices, drafts and
// scheduled notices (internal/namespace): another corp's or app's msgid,
// or a waiting notice's (unless this is that notice's send), is
// yidu.ErrConflict without saying whose.
func (r *Registry) claim(ctx context.Context, reg yidu.Registration) error {
	kind := namespace.Message
	if reg.FromNotice {
		kind = namespace.NoticeSend
	}
	return namespace.Claim(ctx, r.db, reg.App.CorpID, reg.App.Name, reg.MsgID, kind, r.now())
}

func resultOf(err error) string {
	if errors.Is(err, yidu.ErrInvalid) {
		return "invalid"
	}
	if errors.Is(err, yidu.ErrConflict) {
		return "conflict"
	}
	return "error"
}

// stateActive is messages.state once every recipient row is written (0:
// still registering; such a message is invisible to readers).
const stateActive = 1

// complete finishes a state-0 registration found in MySQL: the audience is
// expanded again and its rows inserted (INSERT IGNORE keeps what is there),
// and the recipients become whatever rows exist, so MySQL and Redis agree even
// if the directory moved between the two attempts.
func (r *Registry) complete(ctx context.Context, m yidu.Message, c canonical, resumed bool) (yidu.Message, *roaring.Bitmap, error) {
	recipients, err := r.expand(ctx, m.CorpID, c)
	switch {
	case errors.Is(err, yidu.ErrInvalid) && recipients != nil && recipients.IsEmpty():
		// The audience emptied since the first attempt: keep its rows.
	case err != nil:
		return m, nil, err
	}
	return r.completeWith(ctx, m, recipients, resumed)
}

func (r *Registry) completeWith(ctx context.Context, m yidu.Message, recipients *roaring.Bitmap, resumed bool) (yidu.Message, *roaring.Bitmap, error) {
	if err := r.insertRows(ctx, m.CorpID, m.MsgID, recipients); err != nil {
		return m, nil, err
	}
	if resumed {
		rows, _, err := r.loadRows(ctx, m.CorpID, m.MsgID)
		if err != nil {
			return m, nil, err
		}
		recipients = rows
		m.Recipients = int64(rows.GetCardinality())
	}
	if _, err := r.db.ExecContext(ctx,
		"UPDATE messages SET state = 1, recipient_count = ? WHERE corp_id = ? AND msgid = ? AND state = 0",
		m.Recipients, m.CorpID, m.MsgID); err != nil {
		return m, nil, fmt.Errorf("tracker: activate message %s: %w", m.MsgID, err)
	}
	if err := r.store.PutMessage(ctx, m, recipients); err != nil {
		return m, nil, fmt.Errorf("tracker: put message %s in redis (mysql is complete; register again or let the recorder restore it): %w", m.MsgID, err)
	}
	return m, recipients, nil
}

// ensureRedis puts an active message back in Redis when an earlier attempt
// failed there (or the keys expired), from MySQL so no read is lost: the
// same restore as the recorder's, the healer's and the dashboard's
// (LoadReads' rows, RestoreReads).
func (r *Registry) ensureRedis(ctx context.Context, m yidu.Message) (*roaring.Bitmap, error) {
	if _, found, err := r.store.MessageMeta(ctx, m.CorpID, m.MsgID); err != nil {
		return nil, fmt.Errorf("tracker: redis meta of %s: %w", m.MsgID, err)
	} else if found {
		return nil, nil // recipients loaded lazily by send when needed
	}
	// Every signal's members too: once the keys are back, no reader's
	// restore-on-miss fills them in, and by_signal would count short.
	recipients, read, signals, err := r.loadReadRows(ctx, m.CorpID, m.MsgID)
	if err != nil {
		return nil, err
	}
	if err := r.store.RestoreReads(ctx, m, recipients, read, signals); err != nil {
		return nil, fmt.Errorf("tracker: restore message %s in redis: %w", m.MsgID, err)
	}
	return recipients, nil
}

// expand snapshots the audience as uids (idmap's Expand: the rule the
// dashboard's preview shows).
func (r *Registry) expand(ctx context.Context, corpID string, c canonical) (*roaring.Bitmap, error) {
	a := yidu.Audience{UserIDs: c.userIDs, Departments: c.depts, Tags: c.tags, All: c.all}
	x, err := r.ids.Expand(ctx, corpID, a)
	if err != nil {
		return nil, fmt.Errorf("tracker: expand audience: %w", err)
	}
	return x.Recipients, a.CheckRecipients(x.Recipients.GetCardinality())
}

// insertRows writes one unread row per recipient through flushd, the
// read archive's owner, with multi-row INSERT IGNORE statements of up to
// InsertBatch rows (IGNORE: a repeated attempt keeps rows, and reads,
// that are already there).
func (r *Registry) insertRows(ctx context.Context, corpID, msgID string, recipients *roaring.Bitmap) error {
	statements, inserted, err := flushd.InsertRecipients(ctx, r.db, corpID, msgID, recipients.ToArray(), InsertBatch)
	r.met.insertStatements.Add(float64(statements))
	r.met.insertedRows.Add(float64(inserted))
	if err != nil {
		return fmt.Errorf("tracker: %w", err)
	}
	return nil
}

// loadRows streams a message's rows into recipient and read bitmaps.
func (r *Registry) loadRows(ctx context.Context, corpID, msgID string) (recipients, read *roaring.Bitmap, err error) {
	rows, err := r.db.QueryContext(ctx,
		"SELECT uid, is_read FROM message_read_record WHERE corp_id = ? AND msgid = ?", corpID, msgID)
	if err != nil {
		return nil, nil, fmt.Errorf("tracker: load rows of %s: %w", msgID, err)
	}
	defer rows.Close()
	recipients, read = roaring.New(), roaring.New()
	var uid uint32
	var isRead bool
	for rows.Next() {
		if err := rows.Scan(&uid, &isRead); err != nil {
			return nil, nil, fmt.Errorf("tracker: scan row of %s: %w", msgID, err)
		}
		recipients.Add(uid)
		if isRead {
			read.Add(uid)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("tracker: load rows of %s: %w", msgID, err)
	}
	return recipients, read, nil
}
