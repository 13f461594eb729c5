package noticedel

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
)

type fakeExec struct {
	query string
	args  []any
	err   error
}

type rows int64

func (r rows) LastInsertId() (int64, error) { return 0, nil }
func (r rows) RowsAffected() (int64, error) { return int64(r), nil }

func (f *fakeExec) ExecContext(_ context.Context, query string, args ...any) (sql.Result, error) {
	f.query, f.args = query, args
	return rows(3), f.err
}

func TestBatch(t *testing.T) {
	deletes := map[string]string{"t": "DELETE FROM t WHERE corp_id = ? AND msgid = ? ORDER BY uid LIMIT ?"}
	db := &fakeExec{}
	n, err := Batch(context.Background(), db, "owner", deletes, "t", "c", "m", 10)
	if err != nil || n != 3 {
		t.Fatalf("Batch = %d, %v; want 3, nil", n, err)
	}
	if db.query != deletes["t"] || len(db.args) != 3 || db.args[0] != "c" || db.args[1] != "m" || db.args[2] != 10 {
		t.Errorf("ran %q %v; want the table's statement with corp, msgid, limit", db.query, db.args)
	}
	db = &fakeExec{}
	if _, err := Batch(context.Background(), db, "owner", deletes, "users", "c", "m", 10); err == nil || !strings.Contains(err.Error(), "not a table of owner's") || db.query != "" {
		t.Errorf("another owner's table: err %v, ran %q; want refused, nothing run", err, db.query)
	}
	boom := errors.New("boom")
	db = &fakeExec{err: boom}
	if _, err := Batch(context.Background(), db, "owner", deletes, "t", "c", "m", 10); !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "owner: delete from t: ") {
		t.Errorf("failed statement: err %v; want it wrapped with owner and table", err)
	}
}

func TestBlank(t *testing.T) {
	const q = "UPDATE t SET ip = '' WHERE corp_id = ? AND msgid = ? AND ip <> ''"
	boom := errors.New("boom")
	tests := []struct {
		name    string
		err     error
		want    int64
		wantErr string
	}{
		{"blanked", nil, 3, ""},
		{"failed statement", boom, 0, "owner: anonymise rows of m: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := &fakeExec{err: tt.err}
			n, err := Blank(context.Background(), db, "owner", "rows", q, "c", "m")
			if n != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && (err.Error() != tt.wantErr || !errors.Is(err, tt.err))) {
				t.Errorf("Blank = %d, %v; want %d, %q", n, err, tt.want, tt.wantErr)
			}
			if db.query != q || len(db.args) != 2 || db.args[0] != "c" || db.args[1] != "m" {
				t.Errorf("ran %q %v; want the owner's statement with corp and msgid", db.query, db.args)
			}
		})
	}
}
