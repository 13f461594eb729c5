package embedded

import "testing"

func TestRewriteInsertIgnore(t *testing.T) {
	tests := []struct{ name, query, want string }{
		{"values", "INSERT IGNORE INTO message_read_record (corp_id, msgid, uid) VALUES (?,?,?),(?,?,?)",
			"INSERT INTO message_read_record (corp_id, msgid, uid) VALUES (?,?,?),(?,?,?) ON DUPLICATE KEY UPDATE corp_id = corp_id"},
		{"lower case, newline, semicolon", "insert ignore into users (corp_id, uid)\n VALUES (?, ?);",
			"INSERT INTO users (corp_id, uid)\n VALUES (?, ?) ON DUPLICATE KEY UPDATE corp_id = corp_id"},
		{"select", "INSERT IGNORE INTO uid_seq (corp_id, next_uid) SELECT ?, 0 FROM users", ""},
		{"own upsert", "INSERT IGNORE INTO t (a, b) VALUES (?, ?) ON DUPLICATE KEY UPDATE b = 1", ""},
		{"plain insert", "INSERT INTO t (a) VALUES (1)", ""},
		{"no columns", "INSERT IGNORE INTO t VALUES (1)", ""},
		{"select 1", "SELECT 1", ""},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			if want == "" {
				want = tt.query
			}
			if got := rewriteInsertIgnore(tt.query); got != want {
				t.Errorf("rewriteInsertIgnore(%q) = %q; want %q", tt.query, got, want)
			}
		})
	}
}

// TestInsertIgnoreRewrite checks, through the server, that a rewritten
// INSERT IGNORE keeps existing rows untouched (a read stays read), skips a
// duplicate of a secondary UNIQUE key and counts only new rows.
func TestInsertIgnoreRewrite(t *testing.T) {
	_, db := startDB(t)
	insertRecipients(t, db, "c", "m", 0, 10, 10)
	mustExec(t, db, "UPDATE message_read_record SET is_read = 1, source = 1 WHERE corp_id = 'c' AND msgid = 'm' AND uid = 3")
	if n := insertRecipients(t, db, "c", "m", 0, 20, 20); n != 10 {
		t.Errorf("INSERT IGNORE of 10 old + 10 new rows: RowsAffected = %d; want 10", n)
	}
	if n := queryInt(t, db, "SELECT COUNT(*) FROM message_read_record WHERE corp_id = 'c' AND msgid = 'm' AND uid = 3 AND is_read = 1 AND source = 1"); n != 1 {
		t.Errorf("read row after INSERT IGNORE: %d rows still read; want 1", n)
	}
	mustExec(t, db, "INSERT INTO users (corp_id, uid, userid) VALUES ('c', 1, 'alice')")
	res, err := db.Exec("INSERT IGNORE INTO users (corp_id, uid, userid) VALUES ('c', 2, 'alice'), ('c', 3, 'bob')")
	if err != nil {
		t.Fatalf("INSERT IGNORE with a duplicate UserID: %v", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Errorf("INSERT IGNORE of a duplicate UserID and a new one: RowsAffected = %d; want 1", n)
	}
	if n := queryInt(t, db, "SELECT COUNT(*) FROM users WHERE corp_id = 'c'"); n != 2 {
		t.Errorf("users = %d; want 2 (alice once, bob)", n)
	}
}
