package ledger_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"

	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/content"
	"github.com/yidu-io/yidu/flushd"
	"github.com/yidu-io/yidu/internal/rfc3161"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/internal/tsatest"
	"github.com/yidu-io/yidu/ledger"
)

// signedFixture is newFixture with the log signed by a key of its own, a
// send of every recipient (batch 0, an hour before now) and version 1 of
// the notice's text, each ledgered in its fact's transaction.
func signedFixture(t *testing.T, n int) (*fixture, string) {
	t.Helper()
	f := newFixture(t, n)
	ctx := context.Background()
	skey, vkey, err := note.GenerateKey(rand.Reader, "yidu.test")
	testenv.Check(t, "key", err)
	signer, _, err := ledger.ParseSigningKey(skey)
	testenv.Check(t, "signer", err)
	f.l, err = ledger.New(f.db, ledger.Options{Now: f.clk.now, Audit: audit.NewMySQL(f.db), Signer: signer})
	testenv.Check(t, "ledger", err)
	f.w, err = flushd.NewWriter(f.db, flushd.WriterOptions{Ledger: f.l})
	testenv.Check(t, "writer", err)
	sent := f.clk.t.Add(-time.Hour).UTC().Truncate(time.Second)
	tx, err := f.db.BeginTx(ctx, nil)
	testenv.Check(t, "begin", err)
	_, err = tx.ExecContext(ctx, `INSERT INTO message_sends (corp_id, msgid, kind, batch, status, errcode, wecom_msgid, sent_at, users)
		VALUES (?, ?, 'send', 0, 'sent', 0, 'wx-1', ?, ?)`, corp, msg, sent, n)
	testenv.Check(t, "send row", err)
	// The recipient binding at send (issue 48): each member's name, their
	// departments in send_departments, the notice's title in batch 0.
	_, err = tx.ExecContext(ctx, "UPDATE users SET name = CONCAT('成员', uid) WHERE corp_id = ?", corp)
	testenv.Check(t, "names", err)
	_, err = tx.ExecContext(ctx, "UPDATE messages SET title = '考勤制度' WHERE corp_id = ? AND msgid = ?", corp, msg)
	testenv.Check(t, "title", err)
	everyone := roaring.New()
	everyone.AddRange(0, uint64(n))
	ub, err := everyone.ToBytes()
	testenv.Check(t, "bitmap", err)
	_, err = tx.ExecContext(ctx, `INSERT INTO send_departments (corp_id, msgid, set_no, taken_at, depts, names, uids) VALUES (?, ?, 0, ?, '2,5', '{"2":"人事部","5":"财务部"}', ?)`,
		corp, msg, sent, ub)
	testenv.Check(t, "departments", err)
	var facts []ledger.Fact
	for i := range n {
		name := "成员" + itoa(i)
		facts = append(facts, ledger.Delivery{MsgID: msg, UID: uint32(i), UserID: "u" + itoa(i), Batch: 0, At: sent, WeComMsgID: "wx-1",
			Name: &name, Departments: []string{"2", "5"}, Title: "考勤制度"}.Fact())
	}
	_, err = f.l.Append(ctx, tx, corp, facts)
	testenv.Check(t, "append sends", err)
	testenv.Check(t, "commit", tx.Commit())
	sum := content.VersionHash("考勤制度", "<p>九点上班</p>", nil).String()
	tx, err = f.db.BeginTx(ctx, nil)
	testenv.Check(t, "begin", err)
	_, err = tx.ExecContext(ctx, `INSERT INTO notice_versions (corp_id, msgid, version, title, markdown, html, attachments, sha256, reacknowledge, created_at)
		VALUES (?, ?, 1, '考勤制度', '九点上班', '<p>九点上班</p>', '[]', UNHEX(?), 0, ?)`, corp, msg, sum, sent.Add(-time.Minute))
	testenv.Check(t, "version row", err)
	_, err = f.l.Append(ctx, tx, corp, []ledger.Fact{ledger.Version{MsgID: msg, Number: 1, SHA256: sum, At: sent.Add(-time.Minute)}.Fact()})
	testenv.Check(t, "append version", err)
	testenv.Check(t, "commit", tx.Commit())
	return f, vkey
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestForgeries is the forger's table (issue 48): someone with MySQL
// writes one fact an evidence record would show, or removes one, and
// yidu evidence verify names what is wrong. Each case is clean before
// the forgery.
func TestForgeries(t *testing.T) {
	tests := []struct {
		name   string
		forge  func(t *testing.T, f *fixture)
		what   string
		detail string
		// prepare, when set, writes the facts the case forges among
		// (with their entries) before the clean check.
		prepare func(t *testing.T, f *fixture)
	}{
		{"card press forged on a non-reader", func(t *testing.T, f *fixture) {
			f.exec(t, "UPDATE message_read_record SET button_at = ? WHERE corp_id = ? AND msgid = ? AND uid = 7",
				f.clk.t.Add(30*time.Second).UTC(), corp, msg)
		}, "inserted", "uid 7 has button at", nil},
		{"directory swapped", func(t *testing.T, f *fixture) {
			// u1's acknowledgement would print on u2's PDF.
			f.exec(t, "UPDATE users SET userid = 'tmp' WHERE corp_id = ? AND uid = 1", corp)
			f.exec(t, "UPDATE users SET userid = 'u1' WHERE corp_id = ? AND uid = 2", corp)
			f.exec(t, "UPDATE users SET userid = 'u2' WHERE corp_id = ? AND uid = 1", corp)
		}, "altered", "the directory now binds uid 1 to u2", nil},
		{"departments at send edited", func(t *testing.T, f *fixture) {
			f.exec(t, "UPDATE send_departments SET depts = '9' WHERE corp_id = ? AND msgid = ?", corp, msg)
		}, "altered", "send_departments has [9]", nil},
		{"title edited", func(t *testing.T, f *fixture) {
			f.exec(t, "UPDATE messages SET title = '考勤制度（修订）' WHERE corp_id = ? AND msgid = ?", corp, msg)
		}, "altered", `messages.title is "考勤制度（修订）"`, nil},
		{"text edited under its hash", func(t *testing.T, f *fixture) {
			f.exec(t, "UPDATE notice_versions SET html = '<p>八点上班</p>' WHERE corp_id = ? AND msgid = ?", corp, msg)
		}, "altered", "its stored title and text hash to", nil},
		{"tail truncated: last block deleted, head rewound", func(t *testing.T, f *fixture) {
			var first, count uint64
			testenv.Check(t, "last", f.db.QueryRow("SELECT first_seq, count FROM ledger_blocks WHERE corp_id = ? ORDER BY first_seq DESC LIMIT 1", corp).Scan(&first, &count))
			f.exec(t, "DELETE FROM ledger_blocks WHERE corp_id = ? AND first_seq = ?", corp, first)
			f.exec(t, "UPDATE ledger_heads SET next_seq = ?, day_size = day_size - ? WHERE corp_id = ?", first, count, corp)
			_, err := f.db.Exec("DELETE FROM message_read_record WHERE corp_id = ? AND msgid = ? AND uid IN (5, 6)", corp, msg)
			testenv.Check(t, "rows of the tail", err)
			_, err = f.db.Exec("INSERT INTO message_read_record (corp_id, msgid, uid) VALUES (?, ?, 5), (?, ?, 6)", corp, msg, corp, msg)
			testenv.Check(t, "rows back unread", err)
		}, "deleted", "; the log has", nil},
		{"root rewritten with an entry", func(t *testing.T, f *fixture) {
			// Entry 13 (uid 2's read) says source 3, its leaf is rehashed,
			// and the checkpoint's root and note are rewritten to match:
			// the note's signature no longer verifies.
			e, err := f.l.Entry(context.Background(), corp, 13)
			testenv.Check(t, "entry", err)
			body := strings.Replace(string(e.Body), `"source":1`, `"source":3`, 1)
			unpack(t, f, 12)
			f.exec(t, "UPDATE ledger_blocks SET bodies = REPLACE(bodies, ?, ?) WHERE corp_id = ? AND first_seq = 12", string(e.Body), body, corp)
			leaf := ledger.LeafHash([]byte(body))
			f.exec(t, "UPDATE ledger_blocks SET leaves = CONCAT(SUBSTRING(leaves, 1, 32), ?, SUBSTRING(leaves, 65)) WHERE corp_id = ? AND first_seq = 12", leaf[:], corp)
			f.exec(t, "UPDATE message_read_record SET source = 3 WHERE corp_id = ? AND msgid = ? AND uid = 2", corp, msg)
		}, "altered", "checkpoint", nil},
		{"read dated before the send", func(t *testing.T, f *fixture) {
			// A read ledgered as it was written (its entry agrees), but
			// two hours before the notice was sent.
			f.read(t, []uint32{8}, f.clk.t.Add(-3*time.Hour))
		}, "altered", "before the notice was first sent", nil},
		{"approval forged", func(t *testing.T, f *fixture) {
			// An approval the approver never gave, written into MySQL.
			f.exec(t, "INSERT INTO notice_approvals (corp_id, msgid, version_hash, step, actor, at, reason) VALUES (?, ?, ?, 'approved', 'mallory', ?, '')",
				corp, msg, strings.Repeat("cd", 32), f.clk.t.Add(-10*time.Second).UTC())
		}, "inserted", "approved of " + msg + " version cdcdcdcdcdcdcdcd by mallory", approvals},
		{"approval's approver edited", func(t *testing.T, f *fixture) {
			f.exec(t, "UPDATE notice_approvals SET actor = 'mallory' WHERE corp_id = ? AND step = 'approved'", corp)
		}, "inserted", "by mallory", approvals},
		{"rejection deleted", func(t *testing.T, f *fixture) {
			f.exec(t, "DELETE FROM notice_approvals WHERE corp_id = ? AND step = 'rejected'", corp)
		}, "deleted", "rejected", approvals},
		{"manual reminder forged", func(t *testing.T, f *fixture) {
			// A reminder nobody asked for, so the member "was reminded".
			f.exec(t, "INSERT INTO manual_reminders (corp_id, msgid, uid, reminded_at, reminded_by, scope) VALUES (?, ?, 9, ?, 'hr-admin', 'all')",
				corp, msg, f.clk.t.Add(-5*time.Second).UTC())
		}, "inserted", "manual_reminders row (" + msg + " uid 9 asked by hr-admin", approvals},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := signedFixture(t, 10)
			f.read(t, []uint32{1, 2, 3, 4}, f.clk.t.Add(-time.Minute))
			f.read(t, []uint32{5, 6}, f.clk.t.Add(-50*time.Second))
			if tc.prepare != nil {
				tc.prepare(t, f)
			}
			if _, err := f.l.Checkpoint(context.Background(), corp); err != nil {
				t.Fatal(err)
			}
			if rep := f.verify(t, ""); len(rep.Problems) != 0 {
				t.Fatalf("before the forgery: %v", rep.Problems)
			}
			tc.forge(t, f)
			if tc.name == "root rewritten with an entry" {
				rewriteCheckpoint(t, f)
			}
			rep := f.verify(t, "")
			for _, p := range rep.Problems {
				if p.What == tc.what && strings.Contains(p.Detail, tc.detail) {
					return
				}
			}
			t.Errorf("verify found %v; want %s … %q", rep.Problems, tc.what, tc.detail)
		})
	}
}

// approvals writes an approval trail of the notice (v1 requested by
// its author, rejected, then approved by the approver) and a manual
// reminder of uid 8 asked by an admin (which was then taken back, and
// one of uid 7 which stays), each row with its entry in its transaction,
// as campaign writes them.
func approvals(t *testing.T, f *fixture) {
	t.Helper()
	ctx := context.Background()
	sum := content.VersionHash("考勤制度", "<p>九点上班</p>", nil).String()
	at := f.clk.t.Add(-30 * time.Minute).UTC().Truncate(time.Millisecond)
	for i, st := range []struct{ step, actor, reason string }{{"requested", "author", ""}, {"rejected", "boss", "措辞不清"}, {"approved", "boss", ""}} {
		tx, err := f.db.BeginTx(ctx, nil)
		testenv.Check(t, "begin", err)
		sat := at.Add(time.Duration(i) * time.Minute)
		_, err = tx.ExecContext(ctx, "INSERT INTO notice_approvals (corp_id, msgid, version_hash, step, actor, at, reason) VALUES (?, ?, ?, ?, ?, ?, ?)",
			corp, msg, sum, st.step, st.actor, sat, st.reason)
		testenv.Check(t, "approval row", err)
		_, err = f.l.Append(ctx, tx, corp, []ledger.Fact{ledger.Approval{MsgID: msg, Step: st.step, VersionHash: sum, Actor: st.actor, At: sat, Reason: st.reason}.Fact()})
		testenv.Check(t, "append approval", err)
		testenv.Check(t, "commit", tx.Commit())
	}
	tx, err := f.db.BeginTx(ctx, nil)
	testenv.Check(t, "begin", err)
	rat := at.Add(10 * time.Minute)
	_, err = tx.ExecContext(ctx, "INSERT INTO manual_reminders (corp_id, msgid, uid, reminded_at, reminded_by, scope) VALUES (?, ?, 7, ?, 'hr-admin', 'all'), (?, ?, 8, ?, 'hr-admin', 'all')",
		corp, msg, rat, corp, msg, rat)
	testenv.Check(t, "manual reminder rows", err)
	_, err = f.l.Append(ctx, tx, corp, []ledger.Fact{ledger.Asked{MsgID: msg, UID: 7, At: rat, By: "hr-admin", Scope: "all"}.Fact(),
		ledger.Asked{MsgID: msg, UID: 8, At: rat, By: "hr-admin", Scope: "all"}.Fact()})
	testenv.Check(t, "append asked", err)
	testenv.Check(t, "commit", tx.Commit())
	tx, err = f.db.BeginTx(ctx, nil)
	testenv.Check(t, "begin", err)
	_, err = tx.ExecContext(ctx, "DELETE FROM manual_reminders WHERE corp_id = ? AND uid = 8", corp)
	testenv.Check(t, "unrecord", err)
	_, err = f.l.Append(ctx, tx, corp, []ledger.Fact{ledger.Asked{MsgID: msg, UID: 8, At: rat, By: "hr-admin", Scope: "all", Undone: true}.Fact()})
	testenv.Check(t, "append undone", err)
	testenv.Check(t, "commit", tx.Commit())
}

// rewriteCheckpoint rewrites the newest checkpoint's root, and its note's
// text, to the root of the log as it now stands (keeping the old
// signature line: the forger has no key).
func rewriteCheckpoint(t *testing.T, f *fixture) {
	t.Helper()
	ctx := context.Background()
	c, ok, err := f.l.LatestCheckpoint(ctx, corp)
	if err != nil || !ok {
		t.Fatalf("LatestCheckpoint = %v, %v", ok, err)
	}
	tree, err := f.l.Tree(ctx, corp, 0)
	testenv.Check(t, "tree", err)
	root, err := tree.Root(c.Size)
	testenv.Check(t, "root", err)
	note := strings.Replace(c.Note, base64.StdEncoding.EncodeToString(c.Root[:]), base64.StdEncoding.EncodeToString(root[:]), 1)
	f.exec(t, "UPDATE ledger_checkpoints SET root = ?, note = ? WHERE corp_id = ? AND size = ?", root[:], note, corp, c.Size)
}

// TestSeenEntries: a press that does not make the row read (a button
// under read_rule acknowledged, a link after the read) is a seen entry
// in the batch's transaction, and verify is clean; a redelivery adds
// none.
func TestSeenEntries(t *testing.T) {
	f, _ := signedFixture(t, 10)
	ctx := context.Background()
	at := f.clk.t.Add(10 * time.Second).Unix()
	press := []flushd.Read{{UID: 3, Button: at}, {UID: 4, Link: at, EnterAgent: at + 5}}
	for range 2 {
		if _, _, err := f.w.Write(ctx, corp, msg, press); err != nil {
			t.Fatal(err)
		}
	}
	f.read(t, []uint32{4}, f.clk.t.Add(20*time.Second)) // a later counted read of uid 4
	// A press of a member whose row is not there yet is parked, then
	// applied when the row appears: its seen entry comes with it.
	if _, _, err := f.w.Write(ctx, corp, msg, []flushd.Read{{UID: 20, Button: at}}); err != nil {
		t.Fatal(err)
	}
	_, err := f.db.ExecContext(ctx, "INSERT INTO message_read_record (corp_id, msgid, uid) VALUES (?, ?, 20)", corp, msg)
	testenv.Check(t, "row 20", err)
	if n, err := f.w.ApplyOrphans(ctx, corp, msg); err != nil || n != 1 {
		t.Fatalf("ApplyOrphans = %d, %v; want 1", n, err)
	}
	es, err := f.l.EntriesOf(ctx, corp, msg)
	testenv.Check(t, "entries", err)
	var seen []string
	for _, e := range es {
		if e.Kind == ledger.KindSeen {
			seen = append(seen, string(e.Body))
		}
	}
	if len(seen) != 4 || !strings.Contains(seen[0], `"signal":"button","uid":3`) || !strings.Contains(seen[3], `"signal":"button","uid":20`) {
		t.Errorf("seen entries = %q; want uid 3's button, uid 4's link and enter_agent, uid 20's parked button", seen)
	}
	if rep := f.verify(t, ""); len(rep.Problems) != 0 {
		t.Errorf("verify: %v; want clean", rep.Problems)
	}
}

// TestCheckpointsSigned: every checkpoint is a C2SP checkpoint that
// note.Open accepts with the log's verifier key (and refuses with
// another), and transparency-dev/merkle's verifiers accept the ledger's
// inclusion proofs against it and its consistency proofs between any two.
func TestCheckpointsSigned(t *testing.T) {
	f, vkey := signedFixture(t, 10)
	ctx := context.Background()
	var cps []ledger.Checkpoint
	for i, uids := range [][]uint32{{1}, {2, 3}, {4, 5, 6, 7}} {
		f.read(t, uids, f.clk.t.Add(time.Duration(i)*time.Second))
		c, err := f.l.Checkpoint(ctx, corp)
		testenv.Check(t, "checkpoint", err)
		cps = append(cps, c)
	}
	v, err := note.NewVerifier(vkey)
	testenv.Check(t, "verifier", err)
	_, otherKey, _ := note.GenerateKey(rand.Reader, "yidu.test")
	other, _ := note.NewVerifier(otherKey)
	for _, c := range cps {
		cp, _, _, err := log.ParseCheckpoint([]byte(c.Note), ledger.Origin("yidu.test", corp), v)
		if err != nil || cp.Size != c.Size || string(cp.Hash) != string(c.Root[:]) {
			t.Fatalf("ParseCheckpoint(%q) = %+v, %v; want size %d root %s", c.Note, cp, err, c.Size, c.Root)
		}
		if _, err := note.Open([]byte(c.Note), note.VerifierList(other)); err == nil {
			t.Errorf("another key opens checkpoint %d", c.Size)
		}
		for seq := uint64(1); seq <= c.Size; seq++ {
			e, err := f.l.Entry(ctx, corp, seq)
			testenv.Check(t, "entry", err)
			p, err := f.l.ProveAt(ctx, c, seq)
			testenv.Check(t, "prove", err)
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, p.Index, p.TreeSize, e.LeafHash[:], hashBytes(p.Path), cp.Hash); err != nil {
				t.Errorf("entry %d in checkpoint %d: %v", seq, c.Size, err)
			}
		}
	}
	for i := range cps {
		for j := i; j < len(cps); j++ {
			cs, err := f.l.Consistency(ctx, corp, cps[i].Size, cps[j].Size)
			testenv.Check(t, "consistency", err)
			if err := proof.VerifyConsistency(rfc6962.DefaultHasher, cps[i].Size, cps[j].Size, hashBytes(cs.Path), cps[i].Root[:], cps[j].Root[:]); err != nil {
				t.Errorf("consistency %d→%d: %v", cps[i].Size, cps[j].Size, err)
			}
		}
	}
	if _, err := f.l.Consistency(ctx, corp, cps[0].Size+1, 0); err == nil {
		t.Error("Consistency from a size that is no checkpoint = nil; want ErrNotFound")
	}
}

func hashBytes(hs []ledger.Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out
}

// TestDayCheckpointTimestamped: a day's checkpoint gets an RFC 3161
// token from the configured TSA (a real one: openssl ts -reply), over
// SHA-256 of the signed checkpoint; openssl ts -verify accepts it for the
// checkpoint and refuses it for an edited one; verify checks the token
// states the checkpoint.
func TestDayCheckpointTimestamped(t *testing.T) {
	tsa := tsatest.Start(t)
	f, _ := signedFixture(t, 10)
	ctx := context.Background()
	stamper, err := ledger.NewTSA(tsa.URL, nil)
	testenv.Check(t, "tsa", err)
	signer, _, err := ledger.ParseSigningKey(mustKey(t))
	testenv.Check(t, "key", err)
	f.l, err = ledger.New(f.db, ledger.Options{Now: f.clk.now, Signer: signer, Stamper: stamper})
	testenv.Check(t, "ledger", err)
	f.w, err = flushd.NewWriter(f.db, flushd.WriterOptions{Ledger: f.l})
	testenv.Check(t, "writer", err)
	f.read(t, []uint32{1, 2, 3}, f.clk.t.Add(-time.Minute))
	f.clk.t = f.clk.t.Add(24 * time.Hour)
	cps, err := f.l.SealDue(ctx)
	testenv.Check(t, "SealDue", err)
	if len(cps) != 1 || cps[0].Timestamp == nil || tsa.Requests != 1 {
		t.Fatalf("SealDue = %+v (TSA asked %d times); want one day's checkpoint with a token", cps, tsa.Requests)
	}
	c := cps[0]
	ts, err := ledger.ParseTimestamp(c.Timestamp)
	sum := sha256.Sum256([]byte(c.Note))
	if err != nil || !bytes.Equal(ts.Digest, sum[:]) || ts.Time.IsZero() {
		t.Fatalf("ParseTimestamp = %+v, %v; want SHA-256 of the checkpoint", ts, err)
	}
	if err := tsa.Verify([]byte(c.Note), c.Timestamp); err != nil {
		t.Errorf("openssl ts -verify of the day's checkpoint: %v", err)
	}
	if err := tsa.Verify([]byte(strings.Replace(c.Note, fmt.Sprintf("\n%d\n", c.Size), fmt.Sprintf("\n%d\n", c.Size+1), 1)), c.Timestamp); err == nil {
		t.Error("openssl ts -verify accepts the token for an edited checkpoint")
	}
	if again, err := f.l.Seal(ctx, corp, c.Day); err != nil || !bytes.Equal(again.Timestamp, c.Timestamp) || tsa.Requests != 1 {
		t.Errorf("Seal again = %v, %v (TSA asked %d times); want the same token, not asked again", again.Timestamp != nil, err, tsa.Requests)
	}
	if rep := f.verify(t, ""); len(rep.Problems) != 0 {
		t.Fatalf("verify: %v", rep.Problems)
	}
	// The day's stamped checkpoint covers the day's entries (the 告知确认书
	// prints its TSA time); none covers an entry beyond it yet.
	if got, ok, err := f.l.StampedCheckpoint(ctx, corp, 3); err != nil || !ok || got.Size != c.Size || !bytes.Equal(got.Timestamp, c.Timestamp) {
		t.Errorf("StampedCheckpoint(3) = size %d, %v, %v; want the day's checkpoint %d", got.Size, ok, err, c.Size)
	}
	if _, ok, err := f.l.StampedCheckpoint(ctx, corp, c.Size+1); err != nil || ok {
		t.Errorf("StampedCheckpoint beyond the day = %v, %v; want none", ok, err)
	}
	// The stored token's CMS signature verifies with the TSA's certificate,
	// and, given the TSA's root, so does its chain (a root of another TSA
	// refuses it).
	tok, err := rfc3161.Verify(c.Timestamp, []byte(c.Note), nil)
	if err != nil || !tok.Time.Equal(ts.Time) || tok.RootChecked {
		t.Fatalf("rfc3161.Verify = %+v, %v; want the token's time, its root unchecked", tok, err)
	}
	pem, err := os.ReadFile(tsa.Cert)
	testenv.Check(t, "cert", err)
	roots, err := rfc3161.Roots(pem)
	testenv.Check(t, "roots", err)
	if tok, err := rfc3161.Verify(c.Timestamp, []byte(c.Note), roots); err != nil || !tok.RootChecked {
		t.Errorf("rfc3161.Verify with the TSA's root = %+v, %v; want it checked", tok, err)
	}
	other := tsatest.Start(t)
	pem, err = os.ReadFile(other.Cert)
	testenv.Check(t, "cert", err)
	otherRoots, err := rfc3161.Roots(pem)
	testenv.Check(t, "roots", err)
	strict, err := ledger.New(f.db, ledger.Options{Now: f.clk.now, Signer: signer, TSARoots: otherRoots})
	testenv.Check(t, "ledger", err)
	if rep, err := strict.Verify(ctx, corp, ""); err != nil || !slices.ContainsFunc(rep.Problems, func(p ledger.Problem) bool {
		return strings.Contains(p.Detail, "TSA token") && strings.Contains(p.Detail, "trusted root")
	}) {
		t.Errorf("verify with another TSA's root: %v, %v; want the token refused", rep.Problems, err)
	}
	tsaNamed := func(what string) {
		t.Helper()
		rep := f.verify(t, "")
		if !slices.ContainsFunc(rep.Problems, func(p ledger.Problem) bool {
			return strings.Contains(p.Detail, fmt.Sprintf("checkpoint %d: its TSA token", c.Size))
		}) {
			t.Errorf("verify after %s: %v; want the checkpoint's TSA token named", what, rep.Problems)
		}
	}
	// The token's time edited (a digit of its genTime): its signature no
	// longer verifies.
	gen := []byte(ts.Time.Format("20060102150405"))
	i := bytes.Index(c.Timestamp, gen)
	if i < 0 {
		t.Fatalf("genTime %s not in the token", gen)
	}
	edited := bytes.Clone(c.Timestamp)
	edited[i+3]++ // the year's last digit
	f.exec(t, "UPDATE ledger_checkpoints SET tsa_token = ? WHERE corp_id = ? AND size = ?", edited, corp, c.Size)
	tsaNamed("the token's time was edited")
	// A genuine token of the same TSA over another checkpoint moved onto
	// this one.
	otherNote := strings.Replace(c.Note, fmt.Sprintf("\n%d\n", c.Size), fmt.Sprintf("\n%d\n", c.Size-1), 1)
	otherSum := sha256.Sum256([]byte(otherNote))
	moved, err := stamper.Stamp(ctx, otherSum[:])
	testenv.Check(t, "stamp", err)
	if err := tsa.Verify([]byte(otherNote), moved); err != nil {
		t.Fatalf("openssl ts -verify of the other token: %v", err)
	}
	f.exec(t, "UPDATE ledger_checkpoints SET tsa_token = ? WHERE corp_id = ? AND size = ?", moved, corp, c.Size)
	tsaNamed("a token of another checkpoint was moved onto it")
	f.exec(t, "UPDATE ledger_checkpoints SET tsa_token = ? WHERE corp_id = ? AND size = ?", c.Timestamp, corp, c.Size)
	if rep := f.verify(t, ""); len(rep.Problems) != 0 {
		t.Fatalf("verify with the token restored: %v", rep.Problems)
	}
	// A token of another checkpoint put in its place.
	f.exec(t, "UPDATE ledger_checkpoints SET note = CONCAT(note, ' ') WHERE corp_id = ? AND size = ?", corp, c.Size)
	rep := f.verify(t, "")
	if !slices.ContainsFunc(rep.Problems, func(p ledger.Problem) bool { return strings.Contains(p.Detail, "checkpoint") }) {
		t.Errorf("verify after the note changed: %v; want the checkpoint named", rep.Problems)
	}
}

func mustKey(t *testing.T) string {
	t.Helper()
	skey, _, err := note.GenerateKey(rand.Reader, "yidu.test")
	testenv.Check(t, "key", err)
	return skey
}

// TestProveAfterCheckpoint: an entry appended after the newest
// checkpoint (a pack made while facts arrive, before the minute's
// checkpoint) is proved against a signed checkpoint taken then, never
// against the unsigned head (CI: a pack's entry read "its checkpoint:
// not signed by the log's key: malformed note").
func TestProveAfterCheckpoint(t *testing.T) {
	f, vkey := signedFixture(t, 10)
	ctx := context.Background()
	f.read(t, []uint32{1}, f.clk.t)
	first, err := f.l.Checkpoint(ctx, corp)
	testenv.Check(t, "checkpoint", err)
	f.read(t, []uint32{2, 3}, f.clk.t.Add(time.Second))
	v, err := note.NewVerifier(vkey)
	testenv.Check(t, "verifier", err)
	for seq := first.Size + 1; ; seq++ {
		e, err := f.l.Entry(ctx, corp, seq)
		if err != nil {
			if seq == first.Size+1 {
				t.Fatalf("no entry after the checkpoint of %d: %v", first.Size, err)
			}
			break
		}
		p, err := f.l.Prove(ctx, corp, seq)
		testenv.Check(t, "prove", err)
		if p.Checkpoint == "" {
			t.Fatalf("entry %d after checkpoint %d is proved against no signed checkpoint", seq, first.Size)
		}
		cp, _, _, err := log.ParseCheckpoint([]byte(p.Checkpoint), ledger.Origin("yidu.test", corp), v)
		if err != nil || cp.Size != p.TreeSize || cp.Size < seq {
			t.Fatalf("proof of %d: checkpoint %q: %+v, %v", seq, p.Checkpoint, cp, err)
		}
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, p.Index, p.TreeSize, e.LeafHash[:], hashBytes(p.Path), cp.Hash); err != nil {
			t.Errorf("entry %d: %v", seq, err)
		}
	}
}

// TestRenameIsNotForgery: a member renamed in the directory after a send
// (the sync does this when WeCom's name changes) leaves verify clean:
// the send entry keeps the name at send, and users.name is no witness of
// the send to compare it with.
func TestRenameIsNotForgery(t *testing.T) {
	f, _ := signedFixture(t, 10)
	ctx := context.Background()
	f.read(t, []uint32{1, 2}, f.clk.t)
	f.exec(t, "UPDATE users SET name = '李四（已改名）' WHERE corp_id = ? AND uid = 3", corp)
	rep, err := f.l.Verify(ctx, corp, "")
	testenv.Check(t, "verify", err)
	if len(rep.Problems) > 0 {
		t.Errorf("verify after a rename: %v; want clean", rep.Problems)
	}
}
