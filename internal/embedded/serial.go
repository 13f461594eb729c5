package embedded

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/sqltypes"
	querypb "github.com/dolthub/vitess/go/vt/proto/query"
)

// serialHandler runs one connection's work at a time on the MySQL server.
//
// go-mysql-server's memory backend gives every session its own copy of a
// table and replaces the shared table on commit, without row locks: two
// connections running `UPDATE uid_seq SET next_uid = LAST_INSERT_ID(next_uid
// + ?)` at once both read the old value and one update is lost (see
// TestLastInsertIDSequence), and SELECT … FOR UPDATE locks nothing. Holding
// one lock per statement, and from START TRANSACTION to COMMIT/ROLLBACK,
// makes every transaction serializable, which is at least as strong as what
// InnoDB gives the same code, so code correct on MySQL stays correct here.
//
// A client that waits on a second connection while its first holds a
// transaction open gets MySQL's lock wait timeout (1205) after lockWait, as
// it would on InnoDB when both touch the same rows.
type serialHandler struct {
	mysql.Handler
	lockWait time.Duration

	sem   chan struct{} // holds one token while a connection owns the lock
	mu    sync.Mutex
	owner uint32          // connection id owning sem; 0 for none
	inTx  map[uint32]bool // connections inside an explicit transaction
}

func newSerialHandler(h mysql.Handler, lockWait time.Duration) *serialHandler {
	return &serialHandler{Handler: h, lockWait: lockWait, sem: make(chan struct{}, 1), inTx: map[uint32]bool{}}
}

func (h *serialHandler) acquire(ctx context.Context, id uint32) error {
	h.mu.Lock()
	owned := h.owner == id
	h.mu.Unlock()
	if owned {
		return nil
	}
	t := time.NewTimer(h.lockWait)
	defer t.Stop()
	select {
	case h.sem <- struct{}{}:
	case <-t.C:
		return mysql.NewSQLError(mysql.ERLockWaitTimeout, mysql.SSUnknownSQLState,
			"Lock wait timeout exceeded; try restarting transaction (embedded server runs one transaction at a time)")
	case <-ctx.Done():
		return ctx.Err()
	}
	h.mu.Lock()
	h.owner = id
	h.mu.Unlock()
	return nil
}

// done records what query did to the connection's transaction and lets the
// lock go unless a transaction is still open.
func (h *serialHandler) done(id uint32, query string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch txVerb(query) {
	case "begin":
		if err == nil {
			h.inTx[id] = true
		}
	case "end":
		delete(h.inTx, id)
	}
	if !h.inTx[id] && h.owner == id {
		h.owner = 0
		<-h.sem
	}
}

// txVerb classifies the statements go-sql-driver/mysql sends for
// BeginTx, Commit and Rollback (and their usual spellings).
func txVerb(query string) string {
	q := strings.ToUpper(strings.TrimSpace(strings.TrimRight(strings.TrimSpace(query), ";")))
	switch {
	case strings.HasPrefix(q, "START TRANSACTION"), q == "BEGIN", q == "BEGIN WORK":
		return "begin"
	case q == "COMMIT", q == "COMMIT WORK", q == "ROLLBACK", q == "ROLLBACK WORK":
		return "end"
	}
	return ""
}

func (h *serialHandler) ComQuery(ctx context.Context, c *mysql.Conn, query string, callback mysql.ResultSpoolFn) error {
	if err := h.acquire(ctx, c.ConnectionID); err != nil {
		return err
	}
	err := h.Handler.ComQuery(ctx, c, rewriteInsertIgnore(query), callback)
	h.done(c.ConnectionID, query, err)
	return err
}

func (h *serialHandler) ComMultiQuery(ctx context.Context, c *mysql.Conn, query string, callback mysql.ResultSpoolFn) (string, error) {
	if err := h.acquire(ctx, c.ConnectionID); err != nil {
		return "", err
	}
	rest, err := h.Handler.ComMultiQuery(ctx, c, query, callback)
	h.done(c.ConnectionID, query, err)
	return rest, err
}

func (h *serialHandler) ComPrepare(ctx context.Context, c *mysql.Conn, query string, prepare *mysql.PrepareData) ([]*querypb.Field, error) {
	if err := h.acquire(ctx, c.ConnectionID); err != nil {
		return nil, err
	}
	fields, err := h.Handler.ComPrepare(ctx, c, rewriteInsertIgnore(query), prepare)
	h.done(c.ConnectionID, "", err)
	return fields, err
}

func (h *serialHandler) ComStmtExecute(ctx context.Context, c *mysql.Conn, prepare *mysql.PrepareData, callback func(*sqltypes.Result) error) error {
	if err := h.acquire(ctx, c.ConnectionID); err != nil {
		return err
	}
	prepare.PrepareStmt = rewriteInsertIgnore(prepare.PrepareStmt)
	err := h.Handler.ComStmtExecute(ctx, c, prepare, callback)
	h.done(c.ConnectionID, prepare.PrepareStmt, err)
	return err
}

func (h *serialHandler) ConnectionClosed(c *mysql.Conn) {
	h.Handler.ConnectionClosed(c)
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.inTx, c.ConnectionID)
	if h.owner == c.ConnectionID {
		h.owner = 0
		<-h.sem
	}
}
