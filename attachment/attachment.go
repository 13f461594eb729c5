// Package attachment keeps a notice's attachments (issue 39): uploads
// checked against content's limits and typed by their bytes, stored once
// per SHA-256 in MySQL in chunks (so no statement nears max_allowed_packet),
// and a disk cache by hash for the process that serves them.
package attachment

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/content"
)

// ChunkSize is the most bytes one attachment_chunks row holds: far below
// the 1 MiB max_allowed_packet of the smallest server defaults.
const ChunkSize = 256 << 10

// ErrTooLarge is an upload above content.MaxAttachmentSize; nothing was
// written.
var ErrTooLarge = fmt.Errorf("an attachment is at most %d MB", content.MaxAttachmentSize>>20)

// ErrNotFound is an attachment id or hash yidu does not have (for this
// corp).
var ErrNotFound = errors.New("attachment not found")

// Attachment is one upload as the API answers it.
type Attachment struct {
	ID     string       `json:"id"`
	SHA256 string       `json:"sha256"`
	Name   string       `json:"name"`
	Type   content.Type `json:"type"`
	Size   int64        `json:"size"`
}

// Hash returns a's SHA-256.
func (a Attachment) Hash() content.Hash {
	h, _ := content.ParseHash(a.SHA256)
	return h
}

// Options configures a Store.
type Options struct {
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// SpoolDir holds uploads while they are checked and written (default
	// os.TempDir()).
	SpoolDir string
}

// Store keeps attachments in MySQL (migration 00020).
type Store struct {
	db    *sql.DB
	log   *slog.Logger
	now   func() time.Time
	spool string
}

// New returns a Store over db.
func New(db *sql.DB, opts Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("attachment: a database is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{db: db, log: opts.Logger.With("component", "attachment"), now: opts.Now, spool: opts.SpoolDir}, nil
}

// Read reads one upload into memory: at most content.MaxAttachmentSize
// bytes (more is ErrTooLarge), typed by its first bytes (content.Sniff),
// named by content.CleanName. Nothing the client claims about the type is
// used. Put applies the same checks while spooling to disk.
func Read(name string, r io.Reader) (clean string, typ content.Type, data []byte, err error) {
	return readLimited(name, r, content.MaxAttachmentSize)
}

// readLimited is Read with the size limit given, so the fuzz target can
// cross it cheaply.
func readLimited(name string, r io.Reader, limit int) (clean string, typ content.Type, data []byte, err error) {
	var buf bytes.Buffer
	up, err := check(name, r, int64(limit), &buf)
	if err != nil {
		return "", "", nil, err
	}
	return up.name, up.typ, buf.Bytes(), nil
}

// cutShort is an upload whose body broke off (a malformed multipart
// body, a client gone, a body over the request's bound): the client's
// doing, so it wraps yidu.ErrInvalid, and the cause (an
// *http.MaxBytesError stays findable).
func cutShort(err error) error {
	return fmt.Errorf("%w: the upload was cut short: %w", yidu.ErrInvalid, err)
}

// upload is what check found.
type upload struct {
	name string
	typ  content.Type
	sum  content.Hash
	size int64
}

// check is the one reading of an upload: its name cleaned, its type
// sniffed from its first bytes, then every byte copied to w while counted
// against limit and hashed. On an error w holds part of the upload at most.
func check(name string, r io.Reader, limit int64, w io.Writer) (upload, error) {
	clean, err := content.CleanName(name)
	if err != nil {
		return upload{}, err
	}
	head := make([]byte, 512)
	n, err := io.ReadFull(r, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return upload{}, cutShort(err)
	}
	head = head[:n]
	typ, err := content.Sniff(head)
	if err != nil {
		return upload{}, err
	}
	h := newHasher()
	copied, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(io.MultiReader(bytes.NewReader(head), r), limit+1))
	if err != nil {
		return upload{}, cutShort(err)
	}
	if copied > limit {
		return upload{}, ErrTooLarge
	}
	var sum content.Hash
	copy(sum[:], h.Sum(nil))
	return upload{name: clean, typ: typ, sum: sum, size: copied}, nil
}

// Put stores an upload for corp: check's checks, the bytes once per hash,
// and a new id naming them with the uploader's file name. The upload is
// spooled to a temporary file, not held in memory: a 20 MB upload costs
// one chunk of memory.
func (s *Store) Put(ctx context.Context, corp, by, name string, r io.Reader) (Attachment, error) {
	if !yidu.CorpID(corp).Valid() {
		return Attachment{}, yidu.Invalidf("corp_id is not valid")
	}
	tmp, err := os.CreateTemp(s.spool, "yidu-upload-*")
	if err != nil {
		return Attachment{}, fmt.Errorf("attachment: spool: %w", err)
	}
	defer func() { tmp.Close(); os.Remove(tmp.Name()) }()
	up, err := check(name, r, content.MaxAttachmentSize, tmp)
	if err != nil {
		return Attachment{}, err
	}
	if err := s.putBlob(ctx, up, tmp); err != nil {
		return Attachment{}, err
	}
	var idb [12]byte
	_, _ = rand.Read(idb[:])
	a := Attachment{ID: "att_" + hex.EncodeToString(idb[:]), SHA256: up.sum.String(), Name: up.name, Type: up.typ, Size: up.size}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO attachments (id, corp_id, sha256, name, type, size, created_by, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, a.ID, corp, up.sum[:], a.Name, string(a.Type), a.Size, yidu.Truncate(by, 128), s.now().UTC()); err != nil {
		return Attachment{}, fmt.Errorf("attachment: insert %s: %w", a.ID, err)
	}
	return a, nil
}

// putBlob writes the spooled upload's chunks, then its blob row (the mark
// that every chunk is there). Bytes already kept are not written again.
func (s *Store) putBlob(ctx context.Context, up upload, f *os.File) error {
	sum := up.sum
	var one int
	switch err := s.db.QueryRowContext(ctx, `SELECT 1 FROM attachment_blobs WHERE sha256 = ?`, sum[:]).Scan(&one); {
	case err == nil:
		return nil
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("attachment: look up blob %s: %w", sum, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("attachment: spool: %w", err)
	}
	chunk := make([]byte, ChunkSize)
	n := 0
	for {
		k, err := io.ReadFull(f, chunk)
		if k > 0 {
			if _, err := s.db.ExecContext(ctx, `INSERT IGNORE INTO attachment_chunks (sha256, seq, data) VALUES (?, ?, ?)`,
				sum[:], n, chunk[:k]); err != nil {
				return fmt.Errorf("attachment: write chunk %d of %s: %w", n, sum, err)
			}
			n++
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("attachment: spool: %w", err)
		}
	}
	if _, err := s.db.ExecContext(ctx, `INSERT IGNORE INTO attachment_blobs (sha256, type, size, chunks, created_at) VALUES (?, ?, ?, ?, ?)`,
		sum[:], string(up.typ), up.size, n, s.now().UTC()); err != nil {
		return fmt.Errorf("attachment: write blob %s: %w", sum, err)
	}
	return nil
}

// Get returns corp's attachments by id, in the order asked. An id that is
// not corp's is ErrNotFound (wrapped with the id).
func (s *Store) Get(ctx context.Context, corp string, ids []string) ([]Attachment, error) {
	out := make([]Attachment, 0, len(ids))
	for _, id := range ids {
		var a Attachment
		var sum []byte
		err := s.db.QueryRowContext(ctx, `SELECT id, sha256, name, type, size FROM attachments WHERE id = ? AND corp_id = ?`, id, corp).
			Scan(&a.ID, &sum, &a.Name, &a.Type, &a.Size)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("attachment %q: %w", yidu.Truncate(id, 40), ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("attachment: get %q: %w", yidu.Truncate(id, 40), err)
		}
		a.SHA256 = hex.EncodeToString(sum)
		out = append(out, a)
	}
	return out, nil
}

// Blob is the kept bytes' type and size.
type Blob struct {
	Type   content.Type
	Size   int64
	Chunks int
}

// WriteBlob writes the bytes of hash sum to w, chunk by chunk, and checks
// their count, size and hash on the way (a blob never leaves yidu other
// than as it came in).
func (s *Store) WriteBlob(ctx context.Context, sum content.Hash, w io.Writer) (Blob, error) {
	var b Blob
	err := s.db.QueryRowContext(ctx, `SELECT type, size, chunks FROM attachment_blobs WHERE sha256 = ?`, sum[:]).Scan(&b.Type, &b.Size, &b.Chunks)
	if errors.Is(err, sql.ErrNoRows) {
		return b, fmt.Errorf("blob %s: %w", sum, ErrNotFound)
	}
	if err != nil {
		return b, fmt.Errorf("attachment: blob %s: %w", sum, err)
	}
	h := newHasher()
	for seq := 0; seq < b.Chunks; seq++ {
		var chunk []byte
		if err := s.db.QueryRowContext(ctx, `SELECT data FROM attachment_chunks WHERE sha256 = ? AND seq = ?`, sum[:], seq).Scan(&chunk); err != nil {
			return b, fmt.Errorf("attachment: chunk %d of %s: %w", seq, sum, err)
		}
		h.Write(chunk)
		if _, err := w.Write(chunk); err != nil {
			return b, fmt.Errorf("attachment: write %s: %w", sum, err)
		}
	}
	if h.n != b.Size || !bytes.Equal(h.Sum(nil), sum[:]) {
		return b, fmt.Errorf("attachment: blob %s is damaged (%d bytes read of %d)", sum, h.n, b.Size)
	}
	return b, nil
}
