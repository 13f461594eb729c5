package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/flushd"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/ledger"
)

// TestEvidenceVerify: `yidu evidence verify` prints the roots and exits 0
// on a clean ledger; after a read_time is changed by hand it names the
// entry and exits 1.
func TestEvidenceVerify(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	db, err := sql.Open("mysql", dsn)
	testenv.Check(t, "open", err)
	defer db.Close()
	for _, q := range []string{
		`INSERT INTO messages (corp_id, msgid, app, agent_id, title, sent_at, recipient_count, audience_hash, state) VALUES
			('wwcmd', 'm1', 'hr', 1, 't', UTC_TIMESTAMP() - INTERVAL 1 HOUR, 3, '', 1)`,
		`INSERT INTO message_read_record (corp_id, msgid, uid) VALUES ('wwcmd', 'm1', 1), ('wwcmd', 'm1', 2), ('wwcmd', 'm1', 3)`,
	} {
		_, err := db.Exec(q)
		testenv.Check(t, q, err)
	}
	skey, vkey, err := note.GenerateKey(rand.Reader, "yidu.test")
	testenv.Check(t, "key", err)
	signer, _, err := ledger.ParseSigningKey(skey)
	testenv.Check(t, "signer", err)
	l, err := ledger.New(db, ledger.Options{Signer: signer})
	testenv.Check(t, "ledger", err)
	w, err := flushd.NewWriter(db, flushd.WriterOptions{Ledger: l})
	testenv.Check(t, "writer", err)
	at := time.Now().Add(-time.Minute).Unix()
	_, _, err = w.Write(context.Background(), "wwcmd", "m1", []flushd.Read{{UID: 1, At: at, Source: delta.SourceCard}, {UID: 3, At: at, Source: delta.SourceLink}})
	testenv.Check(t, "write", err)
	_, err = l.Checkpoint(context.Background(), "wwcmd")
	testenv.Check(t, "checkpoint", err)
	env := map[string]string{"YIDU_MYSQL_DSN": dsn, "YIDU_LEDGER_SIGNING_KEY": skey}

	out, _, err := runCmd(t, env, "", "evidence", "verify", "--corp", "wwcmd")
	if err != nil || !strings.Contains(out, "checkpoint yidu.test/wwcmd: 2 entries, root ") || !strings.Contains(out, "ok: 2 entries agree with 2 records") {
		t.Fatalf("evidence verify (clean) = %q, %v; want the checkpoint and ok", out, err)
	}
	out, _, err = runCmd(t, env, "", "evidence", "key")
	if err != nil || strings.TrimSpace(out) != vkey {
		t.Errorf("evidence key = %q, %v; want %s", out, err, vkey)
	}
	out, _, err = runCmd(t, env, "", "evidence", "consistency", "--corp", "wwcmd", "--from", "2")
	if err != nil || !strings.Contains(out, `"from": 2`) || !strings.Contains(out, `"new_checkpoint": "yidu.test/wwcmd\n2\n`) {
		t.Errorf("evidence consistency = %q, %v", out, err)
	}
	if _, err := db.Exec("UPDATE message_read_record SET read_time = read_time + INTERVAL 1 SECOND WHERE corp_id = 'wwcmd' AND uid = 3"); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCmd(t, env, "", "evidence", "verify", "--corp", "wwcmd")
	if exitCode(err) != 1 || !strings.Contains(out, "FIRST altered: entry 2: message_read_record m1 uid 3") {
		t.Fatalf("evidence verify (tampered) = %q, %v (exit %d); want entry 2 named, exit 1", out, err, exitCode(err))
	}
	if _, _, err := runCmd(t, env, "", "evidence", "verify"); exitCode(err) != 2 {
		t.Errorf("evidence verify without --corp: exit %d; want 2", exitCode(err))
	}
}

// TestEvidenceKey: `yidu evidence key generate NAME` prints a signing key
// and its verifier key, which `yidu evidence key` prints back from the
// configuration; a key that is not a note signing key is refused,
// naming the setting.
func TestEvidenceKey(t *testing.T) {
	out, _, err := runCmd(t, nil, "", "evidence", "key", "generate", "yidu.example.com")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 4 || !strings.HasPrefix(lines[1], "PRIVATE+KEY+yidu.example.com+") || !strings.HasPrefix(lines[3], "yidu.example.com+") {
		t.Fatalf("evidence key generate = %q, %v", out, err)
	}
	env := map[string]string{"YIDU_MYSQL_DSN": "root@tcp(127.0.0.1:1)/none", "YIDU_LEDGER_SIGNING_KEY": lines[1]}
	if got, _, err := runCmd(t, env, "", "evidence", "key"); err != nil || strings.TrimSpace(got) != lines[3] {
		t.Errorf("evidence key = %q, %v; want %s", got, err, lines[3])
	}
	env["YIDU_LEDGER_SIGNING_KEY"] = "PRIVATE+KEY+x+00000000+AAAA"
	if _, errOut, err := runCmd(t, env, "", "evidence", "key"); err == nil || !strings.Contains(errOut+fmt.Sprint(err), "ledger.signing_key") {
		t.Errorf("evidence key with a bad key = %q, %v; want refused naming ledger.signing_key", errOut, err)
	}
}
