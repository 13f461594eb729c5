package migrations_test

import (
	"context"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/migrations"
)

// TestDirectoryMigration: 00002 runs on users written before it, twins
// (UserIDs differing only in case) included; userid_key is
// yidu.UserID.Fold and bad_userid yidu.UserID.Valid's verdict for them.
func TestDirectoryMigration(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	p, err := migrations.NewProvider(db)
	testenv.Check(t, "provider", err)
	_, err = p.DownTo(ctx, 1)
	testenv.Check(t, "down to 1", err)
	ids := []string{"Alice", "alice", "Zhang.San@Corp", "ÉMILE", "张三", "-dash", "a b", "fine"}
	for i, id := range ids {
		_, err := db.ExecContext(ctx, "INSERT INTO users (corp_id, uid, userid) VALUES ('c', ?, ?)", i, id)
		testenv.Check(t, "insert "+id, err)
	}
	_, err = p.Up(ctx)
	testenv.Check(t, "up", err)
	for _, id := range ids {
		var key string
		var bad bool
		testenv.Check(t, "select "+id, db.QueryRowContext(ctx,
			"SELECT userid_key, bad_userid FROM users WHERE corp_id = 'c' AND userid = ?", id).Scan(&key, &bad))
		if want := yidu.UserID(id).Fold(); key != want {
			t.Errorf("userid_key of %q = %q; want %q", id, key, want)
		}
		if want := !yidu.UserID(id).Valid(); bad != want {
			t.Errorf("bad_userid of %q = %v; want %v", id, bad, want)
		}
	}
}
