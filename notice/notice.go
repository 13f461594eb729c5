// Package notice keeps the versions of a notice's content (issue 39): the
// text rendered and sanitized (package content), its attachments, and the
// canonical hash of each version. Version 1 is what was sent; a change of
// a sent notice's content makes version N+1, which says whether it is
// material (reacknowledge). No version is ever changed.
package notice

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/yidu-io/yidu/internal/opt"
	"github.com/yidu-io/yidu/ledger"
	"log/slog"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/content"
)

// ErrNotFound: the notice has no content, or no such version.
var ErrNotFound = errors.New("notice: no such version")

// Draft is content as posted: the title, the Markdown and the attachments
// by upload id, in order.
type Draft struct {
	Title       string
	Markdown    string
	Attachments []string
}

// Settings are the notice's, set with version 1.
type Settings struct {
	ReadRule       yidu.ReadRule
	MinReadSeconds int
}

// Version is one version of a notice's content.
type Version struct {
	N             int
	Title         string
	Markdown      string
	HTML          string
	Attachments   []attachment.Attachment
	SHA256        content.Hash
	Reacknowledge bool
	Settings      Settings
	CreatedBy     string
	CreatedAt     time.Time
	// Note is the publisher's change note (修改说明) on a version after
	// the first: what changed, as CheckNote left it; "" for none.
	Note string
}

// MaxNoteRunes is the most characters a change note has.
const MaxNoteRunes = 200

// CheckNote returns note trimmed, or a yidu.FieldError on field
// "change_note" when it is not plain text of at most MaxNoteRunes
// characters: invalid UTF-8, a control character (a line break
// included) or a bidirectional override, which would make the reader
// see other text than the one stored.
func CheckNote(note string) (string, error) {
	note = strings.TrimSpace(note)
	if !utf8.ValidString(note) {
		return "", yidu.Fieldf("change_note", "change_note is not UTF-8")
	}
	if n := utf8.RuneCountInString(note); n > MaxNoteRunes {
		return "", yidu.Fieldf("change_note", "change_note has %d characters; at most %d", n, MaxNoteRunes)
	}
	for _, r := range note {
		if unicode.IsControl(r) || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f {
			return "", yidu.Fieldf("change_note", "change_note is one line of plain text: no control characters (U+%04X)", r)
		}
	}
	return note, nil
}

// Attachments looks uploads up by id (attachment.Store).
type Attachments interface {
	Get(ctx context.Context, corp string, ids []string) ([]attachment.Attachment, error)
}

// Options configures a Store.
type Options struct {
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Ledger, when set, gets a version entry for each version stored, in
	// the transaction that stores it (issue 40).
	Ledger Ledger
}

// Ledger appends evidence entries in the transaction of their facts
// (ledger.Ledger).
type Ledger interface {
	Append(ctx context.Context, tx ledger.Tx, corp string, facts []ledger.Fact) (uint64, error)
}

// Store keeps versions in MySQL (notice_versions, migration 00021).
type Store struct {
	db     *sql.DB
	atts   Attachments
	log    *slog.Logger
	now    func() time.Time
	ledger Ledger
}

// New returns a Store over db, resolving attachments through atts.
func New(db *sql.DB, atts Attachments, opts Options) (*Store, error) {
	if db == nil || atts == nil {
		return nil, errors.New("notice: a database and attachments are required")
	}
	opt.Logger(&opts.Logger)
	opt.Clock(&opts.Now)
	return &Store{db: db, atts: atts, log: opts.Logger.With("component", "notice"), now: opts.Now, ledger: opts.Ledger}, nil
}

// Prepare checks and renders d for corp: the text's limits (content.Render),
// at most content.MaxAttachments attachments, each an upload of corp's,
// none twice. It writes nothing. Errors wrap yidu.ErrInvalid.
func (s *Store) Prepare(ctx context.Context, corp string, d Draft) (Version, error) {
	html, err := content.Render(d.Markdown)
	if err != nil {
		return Version{}, err
	}
	if len(d.Attachments) > content.MaxAttachments {
		return Version{}, yidu.Fieldf("content.attachments", "content.attachments has %d; at most %d", len(d.Attachments), content.MaxAttachments)
	}
	seen := map[string]bool{}
	for _, id := range d.Attachments {
		if seen[id] {
			return Version{}, yidu.Fieldf("content.attachments", "content.attachments lists %q twice", yidu.Truncate(id, 40))
		}
		seen[id] = true
	}
	atts, err := s.atts.Get(ctx, corp, d.Attachments)
	if errors.Is(err, attachment.ErrNotFound) {
		return Version{}, yidu.Fieldf("content.attachments", "content.attachments: %v", err)
	}
	if err != nil {
		return Version{}, fmt.Errorf("notice: attachments: %w", err)
	}
	hashes := make([]content.Hash, len(atts))
	for i, a := range atts {
		hashes[i] = a.Hash()
	}
	return Version{Title: d.Title, Markdown: d.Markdown, HTML: html, Attachments: atts,
		SHA256: content.VersionHash(d.Title, html, hashes)}, nil
}

// Create stores v (from Prepare) as version 1 of corp's msgid with the
// notice's settings. Creating the same content again is a no-op that
// answers the stored version; other content is yidu.ErrConflict.
func (s *Store) Create(ctx context.Context, corp, msgid string, v Version, set Settings, by string) (Version, error) {
	if err := yidu.CheckMinReadSeconds(set.MinReadSeconds); err != nil {
		return Version{}, err
	}
	if set.ReadRule == "" {
		set.ReadRule = yidu.ReadRuleApp
	}
	v.N, v.Reacknowledge, v.Settings, v.CreatedBy, v.CreatedAt, v.Note = 1, false, set, yidu.Truncate(by, 128), s.now().UTC().Truncate(time.Millisecond), ""
	err := s.create(ctx, corp, msgid, v)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1062 {
		old, gerr := s.Get(ctx, corp, msgid, 1)
		if gerr != nil {
			return Version{}, gerr
		}
		if old.SHA256 != v.SHA256 || old.Settings != set {
			return Version{}, fmt.Errorf("notice %s: version 1 has other content: %w", msgid, yidu.ErrConflict)
		}
		return old, nil
	}
	if err != nil {
		return Version{}, err
	}
	return v, nil
}

// Update makes v (from Prepare) version N+1 of corp's msgid, material
// when reacknowledge, with v.Note as its change note (CheckNote).
// Content equal to the current version's makes no version: it answers
// the current one and false.
func (s *Store) Update(ctx context.Context, corp, msgid string, v Version, reacknowledge bool, by string) (Version, bool, error) {
	note, err := CheckNote(v.Note)
	if err != nil {
		return Version{}, false, err
	}
	v.Note = note
	for try := 1; ; try++ {
		out, made, err := s.update(ctx, corp, msgid, v, reacknowledge, by)
		var me *mysql.MySQLError
		// Editors at once may deadlock on the gap after the last version;
		// the victim runs again.
		if errors.As(err, &me) && me.Number == 1213 && try < 5 {
			continue
		}
		return out, made, err
	}
}

func (s *Store) update(ctx context.Context, corp, msgid string, v Version, reacknowledge bool, by string) (Version, bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Version{}, false, fmt.Errorf("notice: update %s: %w", msgid, err)
	}
	defer tx.Rollback()
	// Version 1's row is the notice's lock: a record lock on a row that
	// exists, so editors queue on it instead of deadlocking on the gap
	// after the last version.
	var one int
	err = tx.QueryRowContext(ctx, `SELECT version FROM notice_versions WHERE corp_id = ? AND msgid = ? AND version = 1 FOR UPDATE`,
		corp, msgid).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return Version{}, false, fmt.Errorf("notice %s has no content: %w", msgid, ErrNotFound)
	}
	if err != nil {
		return Version{}, false, fmt.Errorf("notice: update %s: %w", msgid, err)
	}
	var n int
	var sum []byte
	var set Settings
	err = tx.QueryRowContext(ctx, `SELECT version, sha256, read_rule, min_read_seconds FROM notice_versions
		WHERE corp_id = ? AND msgid = ? ORDER BY version DESC LIMIT 1`, corp, msgid).Scan(&n, &sum, &set.ReadRule, &set.MinReadSeconds)
	if err != nil {
		return Version{}, false, fmt.Errorf("notice: update %s: %w", msgid, err)
	}
	if string(sum) == string(v.SHA256[:]) {
		cur, err := s.Get(ctx, corp, msgid, n)
		return cur, false, err
	}
	v.N, v.Reacknowledge, v.Settings, v.CreatedBy, v.CreatedAt = n+1, reacknowledge, set, yidu.Truncate(by, 128), s.now().UTC().Truncate(time.Millisecond)
	if err := s.insert(ctx, tx, corp, msgid, v); err != nil {
		return Version{}, false, err
	}
	if err := s.ledgerVersion(ctx, tx, corp, msgid, v); err != nil {
		return Version{}, false, err
	}
	if err := tx.Commit(); err != nil {
		return Version{}, false, fmt.Errorf("notice: update %s: %w", msgid, err)
	}
	return v, true, nil
}

// create inserts version 1, with its ledger entry in one transaction when
// the Store has a ledger.
func (s *Store) create(ctx context.Context, corp, msgid string, v Version) error {
	if s.ledger == nil {
		return s.insert(ctx, s.db, corp, msgid, v)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("notice: create %s: %w", msgid, err)
	}
	defer tx.Rollback()
	if err := s.insert(ctx, tx, corp, msgid, v); err != nil {
		return err
	}
	if err := s.ledgerVersion(ctx, tx, corp, msgid, v); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("notice: create %s: %w", msgid, err)
	}
	return nil
}

// ledgerVersion appends v's entry in tx (the one that stores v).
func (s *Store) ledgerVersion(ctx context.Context, tx *sql.Tx, corp, msgid string, v Version) error {
	if s.ledger == nil {
		return nil
	}
	f := ledger.Version{MsgID: msgid, Number: v.N, SHA256: hex.EncodeToString(v.SHA256[:]), Reacknowledge: v.Reacknowledge,
		At: v.CreatedAt, By: v.CreatedBy, Note: v.Note}.Fact()
	if _, err := s.ledger.Append(ctx, tx, corp, []ledger.Fact{f}); err != nil {
		return fmt.Errorf("notice: ledger %s v%d: %w", msgid, v.N, err)
	}
	return nil
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func (s *Store) insert(ctx context.Context, db execer, corp, msgid string, v Version) error {
	atts := v.Attachments
	if atts == nil {
		atts = []attachment.Attachment{}
	}
	js, err := json.Marshal(atts)
	if err != nil {
		return fmt.Errorf("notice: attachments: %w", err)
	}
	note := sql.NullString{String: v.Note, Valid: v.Note != ""}
	_, err = db.ExecContext(ctx, `INSERT INTO notice_versions (corp_id, msgid, version, title, markdown, html, attachments,
		sha256, reacknowledge, read_rule, min_read_seconds, created_by, created_at, change_note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		corp, msgid, v.N, v.Title, v.Markdown, v.HTML, string(js), v.SHA256[:], v.Reacknowledge,
		string(v.Settings.ReadRule), v.Settings.MinReadSeconds, v.CreatedBy, v.CreatedAt, note)
	if err != nil {
		return fmt.Errorf("notice: insert %s v%d: %w", msgid, v.N, err)
	}
	return nil
}

const columns = `version, title, markdown, html, attachments, sha256, reacknowledge, read_rule, min_read_seconds, created_by, created_at, change_note`

func scan(row interface{ Scan(...any) error }) (Version, error) {
	var v Version
	var js string
	var sum []byte
	var note sql.NullString
	if err := row.Scan(&v.N, &v.Title, &v.Markdown, &v.HTML, &js, &sum, &v.Reacknowledge,
		&v.Settings.ReadRule, &v.Settings.MinReadSeconds, &v.CreatedBy, &v.CreatedAt, &note); err != nil {
		return Version{}, err
	}
	v.Note = note.String
	if err := json.Unmarshal([]byte(js), &v.Attachments); err != nil {
		return Version{}, fmt.Errorf("notice: attachments of v%d: %w", v.N, err)
	}
	copy(v.SHA256[:], sum)
	v.CreatedAt = v.CreatedAt.UTC()
	return v, nil
}

// Get returns version n of corp's msgid; n 0 is the current (latest) one.
func (s *Store) Get(ctx context.Context, corp, msgid string, n int) (Version, error) {
	q := `SELECT ` + columns + ` FROM notice_versions WHERE corp_id = ? AND msgid = ? AND version = ?`
	args := []any{corp, msgid, n}
	if n == 0 {
		q = `SELECT ` + columns + ` FROM notice_versions WHERE corp_id = ? AND msgid = ? ORDER BY version DESC LIMIT 1`
		args = args[:2]
	}
	v, err := scan(s.db.QueryRowContext(ctx, q, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return Version{}, fmt.Errorf("notice %s v%d: %w", msgid, n, ErrNotFound)
	}
	if err != nil {
		return Version{}, fmt.Errorf("notice: get %s v%d: %w", msgid, n, err)
	}
	return v, nil
}

// List returns every version of corp's msgid, oldest first (none: nil).
func (s *Store) List(ctx context.Context, corp, msgid string) ([]Version, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+columns+` FROM notice_versions WHERE corp_id = ? AND msgid = ? ORDER BY version`, corp, msgid)
	if err != nil {
		return nil, fmt.Errorf("notice: list %s: %w", msgid, err)
	}
	defer rows.Close()
	var out []Version
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("notice: list %s: %w", msgid, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("notice: list %s: %w", msgid, err)
	}
	return out, nil
}

// Material returns the version whose acknowledgements count under an
// acknowledging rule: the latest version that asked to be acknowledged
// again, or 1. A reader who acknowledged an older one is asked again.
func Material(versions []Version) int {
	m := 1
	for _, v := range versions {
		if v.Reacknowledge && v.N > m {
			m = v.N
		}
	}
	return m
}

// VersionCounts is how many recipients gave each of the reading page's
// signals on one version (page_signals, issue 39): progress per version.
type VersionCounts struct {
	Version      int   `json:"version"`
	Link         int64 `json:"link"`
	ReadToEnd    int64 `json:"read_to_end"`
	Acknowledged int64 `json:"acknowledged"`
}

// PageCounts returns the notice's VersionCounts, oldest version first,
// one per version that has any.
func (s *Store) PageCounts(ctx context.Context, corp, msgid string) ([]VersionCounts, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT version, SUM(source = 3), SUM(source = 5), SUM(source = 6)
		FROM page_signals WHERE corp_id = ? AND msgid = ? GROUP BY version ORDER BY version`, corp, msgid)
	if err != nil {
		return nil, fmt.Errorf("notice: page counts of %s: %w", msgid, err)
	}
	defer rows.Close()
	var out []VersionCounts
	for rows.Next() {
		var c VersionCounts
		if err := rows.Scan(&c.Version, &c.Link, &c.ReadToEnd, &c.Acknowledged); err != nil {
			return nil, fmt.Errorf("notice: page counts of %s: %w", msgid, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("notice: page counts of %s: %w", msgid, err)
	}
	return out, nil
}
