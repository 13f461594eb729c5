package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/cmd/internal/yidu"
	"github.com/yidu-io/yidu/internal/embedded"
	"github.com/yidu-io/yidu/migrations"
)

func TestTmpUnion(t *testing.T) {
	ctx := context.Background()
	s, err := embedded.Start(ctx, embedded.Options{LockWait: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db, _ := yidu.OpenDB(s.MySQLDSN)
	if _, err := migrations.Up(ctx, db); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{5, 10, 20, 40, 80} {
		var b strings.Builder
		args := []any{}
		b.WriteString("UPDATE message_read_record r JOIN (")
		for i := range n {
			if i == 0 {
				b.WriteString("SELECT CAST(? AS UNSIGNED) AS uid, CAST(? AS DATETIME) AS read_time, CAST(? AS UNSIGNED) AS source")
			} else {
				b.WriteString(" UNION ALL SELECT ?,?,?")
			}
			args = append(args, i, "2026-01-01 00:00:00", 1)
		}
		b.WriteString(") d ON d.uid = r.uid SET r.is_read = 1, r.read_time = d.read_time, r.source = d.source WHERE r.corp_id = ? AND r.msgid = ? AND r.is_read = 0")
		args = append(args, "c", "m")
		t0 := time.Now()
		_, err := db.ExecContext(ctx, b.String(), args...)
		fmt.Println(n, time.Since(t0), err)
		if time.Since(t0) > 30*time.Second {
			break
		}
	}
}
