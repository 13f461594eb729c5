package evidence

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/yidu-io/yidu/internal/sqlrows"
)

func (s *Service) deliveries(ctx context.Context, corp, msgid string, mem member, j *Joined, vs []Version) ([]Delivery, error) {
	var batch int
	if j != nil {
		batch = j.batch // a joiner's own batch (tracker.JoinBatchBase + k)
	} else {
		// The first send batched its own recipients in uid order; a
		// standing notice's joiners came later and are not counted.
		var rank int
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM message_read_record r WHERE r.corp_id = ? AND r.msgid = ? AND r.uid < ?
			AND NOT EXISTS (SELECT 1 FROM standing_enrolments e WHERE e.corp_id = r.corp_id AND e.msgid = r.msgid AND e.uid = r.uid)`,
			corp, msgid, mem.uid).Scan(&rank); err != nil {
			return nil, fmt.Errorf("evidence: batch of %s: %w", msgid, err)
		}
		batch = rank / sendBatch
	}
	return collect(ctx, s.db, "sends of "+msgid, `SELECT kind, batch, status, errcode, COALESCE(invalid, ''), unlicensed, COALESCE(wecom_msgid, ''),
		sent_at, recalled_at IS NOT NULL FROM message_sends WHERE corp_id = ? AND msgid = ? AND kind = 'send' AND batch = ?
		ORDER BY sent_at`, []any{corp, msgid, batch}, func(rows *sql.Rows) (Delivery, error) {
		var d Delivery
		var invalid string
		var unlicensed sql.NullString
		if err := rows.Scan(&d.Kind, &d.Batch, &d.Status, &d.ErrCode, &invalid, &unlicensed, &d.WeComMsgID, &d.At, &d.Recalled); err != nil {
			return d, err
		}
		d.At = d.At.UTC()
		// WeCom lower-cases invaliduser (doc path 90236).
		d.InvalidUser = listed(invalid, mem.userID)
		if unlicensed.Valid {
			u := listed(unlicensed.String, mem.userID)
			d.Unlicensed = &u
		}
		d.Version = versionAt(vs, d.At)
		return d, nil
	})
}

// collect runs query and returns each of its rows as scan reads it
// (never nil); what names the rows in the error.
func collect[T any](ctx context.Context, db *sql.DB, what, query string, args []any, scan func(*sql.Rows) (T, error)) ([]T, error) {
	out, err := sqlrows.List(ctx, db, func(rows *sql.Rows, v *T) (err error) {
		*v, err = scan(rows)
		return err
	}, query, args...)
	if err != nil {
		return nil, fmt.Errorf("evidence: %s: %w", what, err)
	}
	if out == nil {
		out = []T{}
	}
	return out, nil
}

// listed reports whether WeCom's '|'-joined list of UserIDs names
// userid (UserIDs are case-insensitive in WeCom).
func listed(list, userid string) bool {
	if list == "" {
		return false
	}
	return slices.ContainsFunc(strings.Split(list, "|"), func(id string) bool { return strings.EqualFold(id, userid) })
}

func (s *Service) followUps(ctx context.Context, corp, msgid string, uid uint32) ([]FollowUp, error) {
	out, err := collect(ctx, s.db, "reminders of "+msgid, `SELECT kind, round, batch, outcome, '', reminded_at, '' FROM reminder_log
		WHERE corp_id = ? AND msgid = ? AND uid = ?
		UNION ALL SELECT 'manual', 0, 0, 'sent', reminded_by, reminded_at, scope FROM manual_reminders
		WHERE corp_id = ? AND msgid = ? AND uid = ?`, []any{corp, msgid, uid, corp, msgid, uid}, func(rows *sql.Rows) (FollowUp, error) {
		var f FollowUp
		var scope string
		if err := rows.Scan(&f.Kind, &f.Round, &f.Batch, &f.Outcome, &f.By, &f.At, &scope); err != nil {
			return f, err
		}
		// campaign.Service.Reconfirm records each update card as a manual
		// reminder of scope "reack:v<N>".
		if v, ok := strings.CutPrefix(scope, "reack:v"); ok {
			f.Kind = "update_card"
			f.Version, _ = strconv.Atoi(v)
		}
		f.At = f.At.UTC()
		return f, nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b FollowUp) int { return a.At.Compare(b.At) })
	return out, nil
}

func (s *Service) ledgerEntries(ctx context.Context, rec *Record) error {
	es, err := s.ledger.EntriesFor(ctx, rec.CorpID, rec.MsgID, rec.Person.UserID)
	if err != nil {
		return fmt.Errorf("evidence: ledger entries: %w", err)
	}
	rec.Ledger = make([]Entry, 0, len(es))
	for _, e := range es {
		en := Entry{Seq: e.Seq, Day: e.Day, Index: e.Index, Kind: e.Kind, LeafHash: hexOf(e.LeafHash), Body: string(e.Body)}
		p, err := s.ledger.Prove(ctx, rec.CorpID, e.Seq)
		if err != nil {
			return fmt.Errorf("evidence: ledger proof of %d: %w", e.Seq, err)
		}
		doc := proofDoc(p)
		en.Proof = &doc
		if p.Checkpoint != "" {
			rec.Checkpoint = p.Checkpoint
		}
		rec.Ledger = append(rec.Ledger, en)
		if e.Kind == "send" && rec.Person.NameAtSend == "" {
			var b struct {
				Name *string `json:"name"`
			}
			if json.Unmarshal(e.Body, &b) == nil && b.Name != nil {
				rec.Person.NameAtSend = *b.Name
			}
		}
	}
	// The day checkpoint is proved a prefix of the checkpoint the newest
	// entry is proved against: without that, any checkpoint signed with
	// the log's key (a forked tree's) could carry the TSA time.
	ds, stamps := s.ledger.(DayStamps)
	if !stamps || len(es) == 0 {
		return nil
	}
	if cp, ok := parseCheckpointText(rec.Ledger[len(rec.Ledger)-1].Proof.Checkpoint); ok {
		st, ok, err := ds.DayStamp(ctx, rec.CorpID, es[len(es)-1].Seq, int64(cp.Size))
		if err != nil {
			return fmt.Errorf("evidence: day checkpoint: %w", err)
		}
		if ok {
			rec.Stamp = &st
		}
	}
	return nil
}

// timeline merges the record's facts in time order; at equal times, in
// the order a reader expects: version, delivery, follow-up, signal.
func timeline(rec Record) []Event {
	out := []Event{}
	for _, v := range rec.Versions {
		d := "版本 " + strconv.Itoa(v.N) + " sha256 " + v.SHA256
		if v.Reacknowledge {
			d += "（需重新确认）"
		}
		out = append(out, Event{At: v.CreatedAt, Kind: "version", Version: v.N, Detail: d})
	}
	for _, d := range rec.Deliveries {
		det := fmt.Sprintf("第 %d 批 %s errcode %d", d.Batch+1, d.Status, d.ErrCode)
		if d.InvalidUser {
			det += " invaliduser"
		}
		if d.Unlicensed != nil && *d.Unlicensed {
			det += " unlicenseduser"
		}
		out = append(out, Event{At: d.At, Kind: "delivery", Version: d.Version, Detail: det})
	}
	if j := rec.Joined; j != nil {
		out = append(out, Event{At: j.JoinedAt, Kind: "joined", Version: j.Version,
			Detail: "加入发送范围（常驻通知），截止 " + j.Deadline.Format("2006-01-02 15:04") + " UTC"})
	}
	for _, f := range rec.FollowUps {
		d := fmt.Sprintf("%s %d %s", f.Kind, f.Round, f.Outcome)
		if f.Kind == "update_card" {
			d = fmt.Sprintf("update_card v%d %s", f.Version, f.Outcome)
		}
		out = append(out, Event{At: f.At, Kind: "follow_up", Version: f.Version, Detail: d})
	}
	for _, sg := range rec.Signals {
		out = append(out, Event{At: sg.At, Kind: "signal", Version: sg.Version, Detail: sg.Kind + " (" + sg.Source + ")"})
	}
	order := map[string]int{"version": 0, "delivery": 1, "follow_up": 2, "signal": 3}
	slices.SortStableFunc(out, func(a, b Event) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return order[a.Kind] - order[b.Kind]
	})
	return out
}

// firstLines is the opening of a version's text as the PDF quotes it:
// its first three non-empty lines, without Markdown's heading and list
// marks, at most 120 characters.
func firstLines(md string) string {
	var out []string
	n := 0
	for line := range strings.SplitSeq(md, "\n") {
		line = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), "#>*-+ "))
		if line == "" {
			continue
		}
		out = append(out, line)
		n += utf8.RuneCountInString(line)
		if len(out) == 3 || n >= 120 {
			break
		}
	}
	s := strings.Join(out, " / ")
	if r := []rune(s); len(r) > 120 {
		s = string(r[:120]) + "…"
	}
	return s
}
