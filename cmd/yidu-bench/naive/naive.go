// Package naive is the design yidu replaces, built honestly for
// yidu-bench's comparison: every template card callback is verified,
// decrypted and parsed with yidu's own code (callback/wxcrypt,
// callback.ParseEvent), its UserID mapped through the same cached
// idmap.Mapper, and then written to MySQL at once in one transaction:
//
//	UPDATE message_read_record SET is_read = 1, read_time = ?, source = 1
//	  WHERE corp_id = ? AND msgid = ? AND uid = ? AND is_read = 0
//	UPDATE naive_counts SET read_count = read_count + 1     -- only if a row changed
//	  WHERE corp_id = ? AND msgid = ?
//
// The second statement is the hot row every callback of a notice contends
// for. The dashboard of this design reads naive_counts.read_count. The
// schema has no read counter (yidu counts with BITCOUNT), so the table is
// the bench's own, created by Setup in the bench database only.
//
// It is exact without a dedup store: a retry or a second press finds
// is_read = 1, changes no row, and does not count.
//
// It lives under cmd/yidu-bench because it exists only to be measured;
// database/sql is used here for the same reason.
package naive

import (
	"context"
	"database/sql"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/yidu-io/yidu/callback"
	"github.com/yidu-io/yidu/callback/wxcrypt"
	"github.com/yidu-io/yidu/internal/opt"
	"github.com/yidu-io/yidu/internal/rig"
)

// UIDLookup maps a UserID to its uid; idmap.Mapper (with its cache)
// implements it.
type UIDLookup interface {
	Lookup(ctx context.Context, corpID, userID string) (uid uint32, ok bool, err error)
}

// Options configures a Server.
type Options struct {
	App rig.WeComApp
	// DB should interpolate parameters client-side (interpolateParams=true):
	// otherwise every statement costs a server-side prepare and close too,
	// which would make the naive design look worse than it is.
	DB     *sql.DB
	IDs    UIDLookup
	Window time.Duration // timestamp window, as callback's
	// MaxBody bounds a callback body, as callback's.
	MaxBody int64
	Logger  *slog.Logger
}

// Server receives WeCom callbacks the naive way.
type Server struct {
	app   rig.WeComApp
	crypt *wxcrypt.Crypter
	db    *sql.DB
	ids   UIDLookup
	opts  Options
	log   *slog.Logger

	updates      atomic.Int64
	transactions atomic.Int64
	reads        atomic.Int64
}

// New returns a Server for one app.
func New(opts Options) (*Server, error) {
	c, err := wxcrypt.New(opts.App.Token, opts.App.EncodingAESKey, opts.App.CorpID)
	if err != nil {
		return nil, fmt.Errorf("naive: %w", err)
	}
	if opts.Window <= 0 {
		opts.Window = 10 * time.Minute
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = 64 << 10
	}
	opt.Logger(&opts.Logger)
	return &Server{app: opts.App, crypt: c, db: opts.DB, ids: opts.IDs, opts: opts,
		log: opts.Logger.With("component", "naive")}, nil
}

// Stats are the MySQL work the Server has done.
type Stats struct {
	// Updates counts UPDATE statements executed.
	Updates int64
	// Transactions counts committed transactions (each also costs a BEGIN
	// and a COMMIT round trip).
	Transactions int64
	// Reads counts callbacks that flipped a row to read.
	Reads int64
}

// Stats returns the counters so far.
func (s *Server) Stats() Stats {
	return Stats{Updates: s.updates.Load(), Transactions: s.transactions.Load(), Reads: s.reads.Load()}
}

// Routes returns the handler: POST /wecom/callback/{app} and GET /healthz.
func (s *Server) Routes() http.Handler {
	r := chi.NewRouter()
	r.Post("/wecom/callback/{app}", s.handleEvent)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	return r
}

// envelope is the encrypted callback body (doc path 91144).
type envelope struct {
	Encrypt string `xml:"Encrypt"`
}

func (s *Server) handleEvent(w http.ResponseWriter, r *http.Request) {
	if chi.URLParam(r, "app") != s.app.Name {
		http.Error(w, "unknown app", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, s.opts.MaxBody+1))
	if err != nil || int64(len(body)) > s.opts.MaxBody {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	var env envelope
	if err := xml.Unmarshal(body, &env); err != nil || env.Encrypt == "" {
		http.Error(w, "bad xml", http.StatusBadRequest)
		return
	}
	q := r.URL.Query()
	ts := q.Get("timestamp")
	if err := s.crypt.Verify(q.Get("msg_signature"), ts, q.Get("nonce"), env.Encrypt); err != nil {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(t, 0)).Abs() > s.opts.Window {
		http.Error(w, "bad timestamp", http.StatusUnauthorized)
		return
	}
	plain, err := s.crypt.Decrypt(env.Encrypt)
	if err != nil {
		http.Error(w, "bad ciphertext", http.StatusBadRequest)
		return
	}
	ev, err := callback.ParseEvent(string(plain))
	if err != nil {
		http.Error(w, "bad event", http.StatusBadRequest)
		return
	}
	if ev.Kind != callback.KindTemplateCard || (s.app.ReadButtonKey != "" && ev.EventKey != s.app.ReadButtonKey) {
		w.WriteHeader(http.StatusOK)
		return
	}
	if err := s.read(r.Context(), ev); err != nil {
		// WeCom retries anything but 200 (doc path 90238).
		s.log.Warn("read failed", "err", err)
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// read applies one card read in its own transaction.
func (s *Server) read(ctx context.Context, ev callback.Event) error {
	uid, ok, err := s.ids.Lookup(ctx, s.app.CorpID, ev.FromUserName)
	if err != nil || !ok {
		return err // unknown member: nothing to do
	}
	msgID, _, _ := strings.Cut(ev.TaskID, "@")
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("naive: begin: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE message_read_record SET is_read = 1, read_time = ?, source = 1
		WHERE corp_id = ? AND msgid = ? AND uid = ? AND is_read = 0`,
		time.Unix(ev.CreateTime, 0).UTC(), s.app.CorpID, msgID, uid)
	s.updates.Add(1)
	if err != nil {
		return fmt.Errorf("naive: mark: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("naive: mark: %w", err)
	}
	if n == 1 {
		s.updates.Add(1)
		if _, err := tx.ExecContext(ctx, "UPDATE naive_counts SET read_count = read_count + 1 WHERE corp_id = ? AND msgid = ?",
			s.app.CorpID, msgID); err != nil {
			return fmt.Errorf("naive: count: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("naive: commit: %w", err)
	}
	s.transactions.Add(1)
	if n == 1 {
		s.reads.Add(1)
	}
	return nil
}

// Setup creates the naive design's state for one notice to every active
// member of corpID: the messages row, one unread message_read_record row
// per member, and the naive_counts table and row. It returns the number
// of recipients.
func Setup(ctx context.Context, db *sql.DB, app rig.WeComApp, msgID string, sentAt time.Time) (int64, error) {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS naive_counts (
		corp_id    VARCHAR(64) CHARACTER SET ascii NOT NULL,
		msgid      VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
		read_count INT UNSIGNED NOT NULL DEFAULT 0,
		PRIMARY KEY (corp_id, msgid)) ENGINE=InnoDB`); err != nil {
		return 0, fmt.Errorf("naive: create naive_counts: %w", err)
	}
	res, err := db.ExecContext(ctx, `INSERT INTO message_read_record (corp_id, msgid, uid)
		SELECT corp_id, ?, uid FROM users WHERE corp_id = ? AND status = 1`, msgID, app.CorpID)
	if err != nil {
		return 0, fmt.Errorf("naive: recipient rows: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("naive: recipient rows: %w", err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO messages
		(corp_id, msgid, app, agent_id, title, sent_at, recipient_count, audience_hash, state)
		VALUES (?, ?, ?, ?, 'naive', ?, ?, REPEAT('0', 64), 1)`,
		app.CorpID, msgID, app.Name, app.AgentID, sentAt.UTC(), n); err != nil {
		return 0, fmt.Errorf("naive: message row: %w", err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO naive_counts (corp_id, msgid) VALUES (?, ?)", app.CorpID, msgID); err != nil {
		return 0, fmt.Errorf("naive: count row: %w", err)
	}
	return n, nil
}

// ReadCount is the naive dashboard's number: the hot row.
func ReadCount(ctx context.Context, db *sql.DB, corpID, msgID string) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, "SELECT read_count FROM naive_counts WHERE corp_id = ? AND msgid = ?", corpID, msgID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("naive: read count: %w", err)
	}
	return n, nil
}
