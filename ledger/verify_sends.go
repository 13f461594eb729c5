package ledger

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

type sendBody struct {
	Batch      int64  `json:"batch"`
	At         string `json:"at"`
	ErrCode    int64  `json:"errcode"`
	WeComMsgID string `json:"wecom_msgid"`
	Invalid    bool   `json:"invalid"`
	Unlicensed bool   `json:"unlicensed"`
	UserID     string `json:"userid"`
	// The recipient binding at send and the notice's title (batch 0),
	// absent from entries written before issue 48.
	Name        *string   `json:"name"`
	Departments *[]string `json:"departments"`
	Title       *string   `json:"title"`
}

// verifySends checks each send and reminder entry against its batch row
// in message_sends: the batch was recorded, with the entry's errcode and
// WeCom msgid, and the entry's invalid and unlicensed flags agree with
// the row's invaliduser and unlicenseduser lists.
func (l *Ledger) verifySends(ctx context.Context, corp, day string, rep *Report) error {
	where, args := "AND kind IN (?, ?)", []any{string(KindSend), string(KindReminder)}
	if day != "" {
		where += " AND day = ?"
		args = append(args, day)
	}
	es, err := l.entries(ctx, corp, "send entries", where+" ORDER BY first_seq", args...)
	if err != nil {
		return err
	}
	type batchKey struct {
		msgid, kind string
		batch       int64
		at          string
	}
	type batchRow struct {
		errcode    int64
		wmsg       string
		invalid    map[string]bool
		unlicensed map[string]bool
		found      bool
	}
	cache := map[batchKey]*batchRow{}
	type pending struct {
		seq  uint64
		key  batchKey
		body sendBody
	}
	var todo []pending
	for _, e := range es {
		if e.Body == nil {
			continue
		}
		var b sendBody
		if err := json.Unmarshal(e.Body, &b); err != nil {
			continue // checkBody reports it
		}
		k := batchKey{msgid: e.MsgID, kind: "send", batch: b.Batch, at: b.At}
		if e.Kind == KindReminder {
			k.kind = "remind"
		}
		todo = append(todo, pending{e.Seq, k, b})
	}
	for _, p := range todo {
		r, ok := cache[p.key]
		if !ok {
			r = &batchRow{}
			at, err := time.Parse(time.RFC3339Nano, p.key.at)
			if err == nil {
				var inv, unl sql.NullString
				err = l.db.QueryRowContext(ctx, "SELECT errcode, COALESCE(wecom_msgid, ''), invalid, unlicensed FROM message_sends"+
					" WHERE corp_id = ? AND msgid = ? AND kind = ? AND batch = ? AND sent_at = ?",
					corp, p.key.msgid, p.key.kind, p.key.batch, at.UTC()).Scan(&r.errcode, &r.wmsg, &inv, &unl)
				switch {
				case errors.Is(err, sql.ErrNoRows):
				case err != nil:
					return fmt.Errorf("ledger: verify %s: send rows: %w", corp, err)
				default:
					r.found = true
					r.invalid = userSet(inv.String)
					r.unlicensed = userSet(unl.String)
				}
			}
			cache[p.key] = r
			rep.Facts++
		}
		switch {
		case !r.found:
			rep.Problems = append(rep.Problems, Problem{Seq: p.seq, What: "deleted",
				Detail: fmt.Sprintf("its batch %d of %s sent at %s is not in message_sends", p.key.batch, p.key.msgid, p.key.at)})
		case r.errcode != p.body.ErrCode || r.wmsg != p.body.WeComMsgID || r.invalid[p.body.UserID] != p.body.Invalid ||
			r.unlicensed[p.body.UserID] != p.body.Unlicensed:
			rep.Problems = append(rep.Problems, Problem{Seq: p.seq, What: "altered",
				Detail: fmt.Sprintf("message_sends batch %d of %s: errcode %d, msgid %q, %s invalid %v unlicensed %v; the entry says errcode %d, msgid %q, invalid %v, unlicensed %v",
					p.key.batch, p.key.msgid, r.errcode, r.wmsg, p.body.UserID, r.invalid[p.body.UserID], r.unlicensed[p.body.UserID],
					p.body.ErrCode, p.body.WeComMsgID, p.body.Invalid, p.body.Unlicensed)})
		}
	}
	return nil
}

// userSet is the set of UserIDs of a "|"-separated list (message_sends'
// invalid and unlicensed).
func userSet(list string) map[string]bool {
	out := map[string]bool{}
	for _, u := range bytes.Split([]byte(list), []byte("|")) {
		out[string(u)] = true
	}
	return out
}
