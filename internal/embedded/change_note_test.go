package embedded

import (
	"database/sql"
	"strings"
	"testing"
	"time"
)

// TestVersionChangeNote: migration 00061's change_note runs on the
// embedded server, NULL for a version without one.
func TestVersionChangeNote(t *testing.T) {
	_, db := startDB(t)
	at := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	q := `INSERT INTO notice_versions (corp_id, msgid, version, title, markdown, html, attachments, sha256, created_at, change_note)
		VALUES ('c', 'm', ?, 't', '', '', '[]', ?, ?, ?)`
	mustExec(t, db, q, 1, strings.Repeat("a", 32), at, nil)
	mustExec(t, db, q, 2, strings.Repeat("b", 32), at, strings.Repeat("改", 200))
	for n, want := range map[int]sql.NullString{1: {}, 2: {String: strings.Repeat("改", 200), Valid: true}} {
		var got sql.NullString
		if err := db.QueryRow("SELECT change_note FROM notice_versions WHERE corp_id = 'c' AND msgid = 'm' AND version = ?", n).Scan(&got); err != nil || got != want {
			t.Errorf("v%d change_note = %+v, %v; want %+v", n, got, err, want)
		}
	}
}
