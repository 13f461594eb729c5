package ledger

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/yidu-io/yidu/content"
)

// readSlack is how far before a notice's first send batch a read may be
// dated (clocks of replicas and WeCom's CreateTime in whole seconds).
const readSlack = time.Minute

// verifyContent recomputes what the stored rows can be recomputed from:
// each version's content hash from its stored text and its attachments'
// bytes (an edit of the text under its hash), each send entry's UserID
// against the directory's binding of its uid (two members' UserIDs
// swapped in users), and each read against its notice's first send (a
// read dated before the notice was sent).
func (l *Ledger) verifyContent(ctx context.Context, corp string, rep *Report) error {
	if err := l.verifyVersionContent(ctx, corp, rep); err != nil {
		return err
	}
	if err := l.verifyBindings(ctx, corp, rep); err != nil {
		return err
	}
	rows, err := l.db.QueryContext(ctx, `SELECT r.msgid, r.uid, DATE_FORMAT(r.read_time, '%Y-%m-%dT%H:%i:%sZ'), DATE_FORMAT(s.first, '%Y-%m-%dT%H:%i:%sZ')
FROM message_read_record r JOIN (SELECT msgid, MIN(sent_at) AS first FROM message_sends WHERE corp_id = ? AND kind = 'send' GROUP BY msgid) s
ON s.msgid = r.msgid WHERE r.corp_id = ? AND r.is_read = 1 AND r.read_time < s.first - INTERVAL ? SECOND ORDER BY r.msgid, r.uid`,
		corp, corp, int(readSlack/time.Second))
	if err != nil {
		return fmt.Errorf("ledger: verify %s: reads before the send: %w", corp, err)
	}
	defer rows.Close()
	for rows.Next() {
		var msgid, at, first string
		var uid uint32
		if err := rows.Scan(&msgid, &uid, &at, &first); err != nil {
			return fmt.Errorf("ledger: verify %s: reads before the send: %w", corp, err)
		}
		rep.Problems = append(rep.Problems, Problem{Seq: l.signalSeq(ctx, corp, msgid, uid), What: "altered",
			Detail: fmt.Sprintf("message_read_record %s uid %d is read at %s, before the notice was first sent at %s", msgid, uid, at, first)})
	}
	return rows.Err()
}

// signalSeq is the seq of the newest signal entry of msgid's uid, 0 when
// there is none.
func (l *Ledger) signalSeq(ctx context.Context, corp, msgid string, uid uint32) uint64 {
	es, err := l.entries(ctx, corp, "signal entries", "AND msgid = ? AND kind = ? ORDER BY first_seq", msgid, string(KindSignal))
	if err != nil {
		return 0
	}
	var seq uint64
	for _, e := range es {
		if e.UID == uid {
			seq = e.Seq
		}
	}
	return seq
}

// verifyVersionContent recomputes each version's content hash
// (content.VersionHash) from notice_versions' title and text and the
// bytes of its attachments (attachment_chunks), and compares it with the
// stored sha256 (which verifyVersions compares with the entry).
func (l *Ledger) verifyVersionContent(ctx context.Context, corp string, rep *Report) error {
	rows, err := l.db.QueryContext(ctx, "SELECT msgid, version, title, html, attachments, LOWER(HEX(sha256)) FROM notice_versions WHERE corp_id = ? ORDER BY msgid, version", corp)
	if err != nil {
		return fmt.Errorf("ledger: verify %s: version texts: %w", corp, err)
	}
	type version struct {
		msgid, title, html, atts, sum string
		n                             int
	}
	var vs []version
	for rows.Next() {
		var v version
		if err := rows.Scan(&v.msgid, &v.n, &v.title, &v.html, &v.atts, &v.sum); err != nil {
			rows.Close()
			return fmt.Errorf("ledger: verify %s: version texts: %w", corp, err)
		}
		vs = append(vs, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger: verify %s: version texts: %w", corp, err)
	}
	versionSeq, err := l.versionSeqs(ctx, corp)
	if err != nil {
		return err
	}
	for _, v := range vs {
		var atts []struct {
			SHA256 string `json:"sha256"`
		}
		if err := json.Unmarshal([]byte(v.atts), &atts); err != nil && v.atts != "" {
			rep.Problems = append(rep.Problems, Problem{Seq: versionSeq[v.msgid+"/"+fmt.Sprint(v.n)], What: "altered",
				Detail: fmt.Sprintf("notice_versions %s v%d: its attachments are not JSON", v.msgid, v.n)})
			continue
		}
		hashes := make([]content.Hash, 0, len(atts))
		for _, a := range atts {
			h, err := content.ParseHash(a.SHA256)
			if err != nil {
				continue
			}
			got, err := l.attachmentHash(ctx, h)
			if err != nil {
				return err
			}
			if got != h {
				rep.Problems = append(rep.Problems, Problem{Seq: versionSeq[v.msgid+"/"+fmt.Sprint(v.n)], What: "altered",
					Detail: fmt.Sprintf("notice_versions %s v%d: attachment %s: its stored bytes hash to %s", v.msgid, v.n, a.SHA256, got)})
			}
			hashes = append(hashes, h)
		}
		if sum := content.VersionHash(v.title, v.html, hashes).String(); sum != v.sum {
			rep.Problems = append(rep.Problems, Problem{Seq: versionSeq[v.msgid+"/"+fmt.Sprint(v.n)], What: "altered",
				Detail: fmt.Sprintf("notice_versions %s v%d: its stored title and text hash to %s, not to its sha256 %s", v.msgid, v.n, sum, v.sum)})
		}
	}
	return nil
}

// versionSeqs are the seqs of corp's version entries by "msgid/version".
func (l *Ledger) versionSeqs(ctx context.Context, corp string) (map[string]uint64, error) {
	es, err := l.entries(ctx, corp, "version entries", "AND kind = ?", string(KindVersion))
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, e := range es {
		var v struct {
			Version int64 `json:"version"`
		}
		if e.Body != nil && json.Unmarshal(e.Body, &v) == nil {
			out[e.MsgID+"/"+fmt.Sprint(v.Version)] = e.Seq
		}
	}
	return out, nil
}

// attachmentHash is the SHA-256 of the stored bytes of attachment h (its
// chunks in order).
func (l *Ledger) attachmentHash(ctx context.Context, h content.Hash) (content.Hash, error) {
	rows, err := l.db.QueryContext(ctx, "SELECT data FROM attachment_chunks WHERE sha256 = ? ORDER BY seq", h[:])
	if err != nil {
		return content.Hash{}, fmt.Errorf("ledger: verify: attachment %s: %w", h, err)
	}
	defer rows.Close()
	sum := sha256.New()
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return content.Hash{}, fmt.Errorf("ledger: verify: attachment %s: %w", h, err)
		}
		sum.Write(b)
	}
	var out content.Hash
	copy(out[:], sum.Sum(nil))
	return out, rows.Err()
}

// verifyBindings compares each send and reminder entry's UserID with the
// directory's UserID of its uid now: the entry names whom WeCom was asked
// to deliver to, and an evidence record names the directory's member of
// that uid. (A UserID WeCom itself renamed since the send shows here
// too; the directory sync's audit tells the two apart.) Entries written
// since issue 48 also name the member as the directory named them at
// send (kept, not compared: people are renamed, and the directory sync
// renames them here too, so users.name is no witness of the send), their
// departments at send (with send_departments)
// and, in batch 0, the notice's title (with messages.title); older
// entries lack them and are not compared on them.
func (l *Ledger) verifyBindings(ctx context.Context, corp string, rep *Report) error {
	users := map[uint32]string{}
	err := l.scanRows(ctx, corp, "users", "SELECT uid, userid FROM users WHERE corp_id = ?", []any{corp}, func(rows *sql.Rows) error {
		var uid uint32
		var u string
		if err := rows.Scan(&uid, &u); err != nil {
			return err
		}
		users[uid] = u
		return nil
	})
	if err != nil {
		return err
	}
	es, err := l.entries(ctx, corp, "send entries", "AND kind IN (?, ?) ORDER BY first_seq", string(KindSend), string(KindReminder))
	if err != nil {
		return err
	}
	atSend, titles := deptsAtSend{}, titlesOf{}
	for _, e := range es {
		var sb sendBody
		if e.Body == nil || json.Unmarshal(e.Body, &sb) != nil || sb.UserID == "" {
			continue
		}
		if u, ok := users[e.UID]; ok && !strings.EqualFold(u, sb.UserID) {
			rep.Problems = append(rep.Problems, Problem{Seq: e.Seq, What: "altered",
				Detail: fmt.Sprintf("it sent %s to %s as uid %d; the directory now binds uid %d to %s", e.MsgID, sb.UserID, e.UID, e.UID, u)})
		}
		if sb.Departments != nil {
			sets, err := atSend.of(ctx, l.db, corp, e.MsgID)
			if err != nil {
				return err
			}
			if got, ok := sets.depts(e.UID); !ok || !slices.Equal(got, *sb.Departments) {
				rep.Problems = append(rep.Problems, Problem{Seq: e.Seq, What: "altered",
					Detail: fmt.Sprintf("it sent %s to %s in departments %v; send_departments has %v (found %v)", e.MsgID, sb.UserID, *sb.Departments, got, ok)})
			}
		}
		if sb.Title != nil && e.Kind == KindSend && sb.Batch == 0 {
			t, ok, err := titles.of(ctx, l.db, corp, e.MsgID)
			if err != nil {
				return err
			}
			if ok && t != *sb.Title {
				rep.Problems = append(rep.Problems, Problem{Seq: e.Seq, What: "altered",
					Detail: fmt.Sprintf("it sent %s titled %q; messages.title is %q", e.MsgID, *sb.Title, t)})
			}
		}
	}
	return nil
}

// deptsAtSend caches each notice's send_departments: the department ids
// of each uid at its first send.
type deptsAtSend map[string]deptSets

type deptSets []struct {
	ids  []string
	uids *roaring.Bitmap
}

func (s deptSets) depts(uid uint32) ([]string, bool) {
	for _, set := range s {
		if set.uids.Contains(uid) {
			return set.ids, true
		}
	}
	return nil, false
}

func (c deptsAtSend) of(ctx context.Context, db *sql.DB, corp, msgid string) (deptSets, error) {
	if s, ok := c[msgid]; ok {
		return s, nil
	}
	rows, err := db.QueryContext(ctx, "SELECT depts, uids FROM send_departments WHERE corp_id = ? AND msgid = ?", corp, msgid)
	if err != nil {
		return nil, fmt.Errorf("ledger: verify %s: departments at send of %s: %w", corp, msgid, err)
	}
	defer rows.Close()
	var out deptSets
	for rows.Next() {
		var key string
		var ub []byte
		if err := rows.Scan(&key, &ub); err != nil {
			return nil, fmt.Errorf("ledger: verify %s: departments at send of %s: %w", corp, msgid, err)
		}
		b := roaring.New()
		if err := b.UnmarshalBinary(ub); err != nil {
			b = roaring.New() // a bitmap edited into garbage: its uids have no departments
		}
		ids := []string{}
		if key != "" {
			ids = strings.Split(key, ",")
		}
		out = append(out, struct {
			ids  []string
			uids *roaring.Bitmap
		}{ids, b})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: verify %s: departments at send of %s: %w", corp, msgid, err)
	}
	c[msgid] = out
	return out, nil
}

// titlesOf caches messages.title by msgid (ok false: the notice is gone).
type titlesOf map[string]*string

func (c titlesOf) of(ctx context.Context, db *sql.DB, corp, msgid string) (string, bool, error) {
	if t, ok := c[msgid]; ok {
		return deref(t), t != nil, nil
	}
	var t string
	err := db.QueryRowContext(ctx, "SELECT title FROM messages WHERE corp_id = ? AND msgid = ?", corp, msgid).Scan(&t)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		c[msgid] = nil
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("ledger: verify %s: title of %s: %w", corp, msgid, err)
	}
	c[msgid] = &t
	return t, true, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
