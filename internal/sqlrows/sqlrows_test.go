package sqlrows_test

import (
	"context"
	"database/sql"
	"maps"
	"slices"
	"testing"

	"github.com/yidu-io/yidu/internal/sqlrows"
	"github.com/yidu-io/yidu/internal/testenv"
)

func TestList(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	scan := func(rows *sql.Rows, v *int) error { return rows.Scan(v) }
	got, err := sqlrows.List(ctx, db, scan, "SELECT 3 UNION ALL SELECT ? UNION ALL SELECT 1", 2)
	if err != nil || !slices.Equal(got, []int{3, 2, 1}) {
		t.Errorf("List = %v, %v; want [3 2 1] in order", got, err)
	}
	got, err = sqlrows.List(ctx, db, scan, "SELECT 1 FROM DUAL WHERE 1 = 0")
	if err != nil || got != nil {
		t.Errorf("List of no rows = %v, %v; want nil", got, err)
	}
	if _, err := sqlrows.List(ctx, db, scan, "SELECT 'x'"); err == nil {
		t.Error("List with a failing scan: no error")
	}
	if _, err := sqlrows.List(ctx, db, scan, "SELECT FROM"); err == nil {
		t.Error("List of a bad query: no error")
	}
	// The rows are closed: the one connection of a Conn is free again.
	conn, err := db.Conn(ctx)
	testenv.Check(t, "conn", err)
	defer conn.Close()
	for range 2 {
		if _, err := sqlrows.List(ctx, conn, scan, "SELECT 1"); err != nil {
			t.Fatalf("List on a Conn: %v", err)
		}
	}
}

func TestMap(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	got, err := sqlrows.Map[uint32, string](ctx, db, "SELECT 3, 'c' UNION ALL SELECT ?, 'b' UNION ALL SELECT 3, 'last'", 2)
	if err != nil || !maps.Equal(got, map[uint32]string{2: "b", 3: "last"}) {
		t.Errorf("Map = %v, %v; want map[2:b 3:last]", got, err)
	}
	got, err = sqlrows.Map[uint32, string](ctx, db, "SELECT 1, 'a' FROM DUAL WHERE 1 = 0")
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("Map of no rows = %#v, %v; want an empty map", got, err)
	}
	if _, err := sqlrows.Map[uint32, string](ctx, db, "SELECT 'x', 'a'"); err == nil {
		t.Error("Map with a failing scan: no error")
	}
	if _, err := sqlrows.Map[uint32, string](ctx, db, "SELECT 1"); err == nil {
		t.Error("Map of one column: no error")
	}
	if _, err := sqlrows.Map[uint32, string](ctx, db, "SELECT FROM"); err == nil {
		t.Error("Map of a bad query: no error")
	}
	// The rows are closed: the one connection of a Conn is free again.
	conn, err := db.Conn(ctx)
	testenv.Check(t, "conn", err)
	defer conn.Close()
	for range 2 {
		if _, err := sqlrows.Map[int, int](ctx, conn, "SELECT 1, 2"); err != nil {
			t.Fatalf("Map on a Conn: %v", err)
		}
	}
}
