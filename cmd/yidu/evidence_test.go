package main

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

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
	l, err := ledger.New(db, ledger.Options{})
	testenv.Check(t, "ledger", err)
	w, err := flushd.NewWriter(db, flushd.WriterOptions{Ledger: l})
	testenv.Check(t, "writer", err)
	at := time.Now().Add(-time.Minute).Unix()
	_, _, err = w.Write(context.Background(), "wwcmd", "m1", []flushd.Read{{UID: 1, At: at, Source: delta.SourceCard}, {UID: 3, At: at, Source: delta.SourceLink}})
	testenv.Check(t, "write", err)
	env := map[string]string{"YIDU_MYSQL_DSN": dsn}

	out, _, err := runCmd(t, env, "", "evidence", "verify", "--corp", "wwcmd")
	if err != nil || !strings.Contains(out, "2 entries from seq 1, root ") || !strings.Contains(out, "ok: 2 entries agree with 2 records") {
		t.Fatalf("evidence verify (clean) = %q, %v; want the day's root and ok", out, err)
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
