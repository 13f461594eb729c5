package store_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
)

// The tests of this package run the store's SQL against a fresh migrated
// MariaDB/MySQL database (testenv.MySQL) and read back the rows it wrote.

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

var testApp = yidu.App{Name: "hr", CorpID: "ww1", AgentID: 1000002}

// newStore returns a Store over a fresh database, without a Directory
// (audiences are not counted).
func newStore(t *testing.T) (*sql.DB, *store.Store, *clock) {
	t.Helper()
	db := testenv.MySQL(t)
	c := newClock()
	s, err := store.New(db, store.Options{Apps: []yidu.App{testApp}, Now: c.now})
	testenv.Check(t, "store.New", err)
	return db, s, c
}

// createNotice stores a notice msgID scheduled an hour ahead.
func createNotice(t *testing.T, s *store.Store, c *clock, msgID string) yidu.Notice {
	t.Helper()
	n, err := s.Create(context.Background(), yidu.Draft{MsgID: msgID, App: testApp, Title: "新考勤制度", Body: "请阅读",
		Audience: yidu.Audience{UserIDs: []string{"zhangsan"}}, Schedule: yidu.Schedule{SendAt: c.now().Add(time.Hour)}, By: "hr-admin"})
	testenv.Check(t, "Create "+msgID, err)
	return n
}

// exec runs a statement that sets up rows.
func exec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	_, err := db.ExecContext(context.Background(), q, args...)
	testenv.Check(t, q, err)
}

// count is SELECT COUNT(*) FROM table WHERE where.
func count(t *testing.T, db *sql.DB, table, where string, args ...any) int {
	t.Helper()
	return testenv.Column[int](t, db, "SELECT COUNT(*) FROM "+table+" WHERE "+where, args...)[0]
}
