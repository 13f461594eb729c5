package testenv

import (
	"context"
	"testing"
	"time"
)

// TestWaitEverySeesANewLockWait: a transaction that starts waiting for a
// row lock after the polling began is found in information_schema's
// innodb_lock_waits by WaitEvery at 250 ms (MariaDB refreshes that cache
// only when it has not been read for 100 ms; TestLedgerFlushdKill9
// polled at 20 ms and kept reading its first snapshot).
func TestWaitEverySeesANewLockWait(t *testing.T) {
	db := MySQL(t)
	ctx := context.Background()
	_, err := db.Exec("CREATE TABLE wait_probe (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
	Check(t, "create", err)
	_, err = db.Exec("INSERT INTO wait_probe VALUES (1, 0)")
	Check(t, "insert", err)
	holder, err := db.BeginTx(ctx, nil)
	Check(t, "begin holder", err)
	defer holder.Rollback()
	var v, holderID int
	Check(t, "hold", holder.QueryRow("SELECT v FROM wait_probe WHERE id = 1 FOR UPDATE").Scan(&v))
	Check(t, "holder id", holder.QueryRow("SELECT CONNECTION_ID()").Scan(&holderID))
	waits := func() int {
		var n int
		Check(t, "lock waits", db.QueryRow(`SELECT COUNT(*) FROM information_schema.innodb_lock_waits w
			JOIN information_schema.innodb_trx b ON b.trx_id = w.blocking_trx_id
			WHERE b.trx_mysql_thread_id = ?`, holderID).Scan(&n))
		return n
	}
	if n := waits(); n != 0 {
		t.Fatalf("%d lock waits before the waiter started", n)
	}
	waiterCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	started := make(chan struct{})
	go func() {
		<-started
		tx, err := db.BeginTx(waiterCtx, nil)
		if err != nil {
			return
		}
		defer tx.Rollback()
		_, _ = tx.ExecContext(waiterCtx, "UPDATE wait_probe SET v = v + 1 WHERE id = 1")
	}()
	once := false
	WaitEvery(t, 20*time.Second, 250*time.Millisecond, "the waiter in innodb_lock_waits", func() bool {
		if !once {
			once = true
			close(started)
		}
		return waits() > 0
	})
}
