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
	"sync"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/content"
	"github.com/yidu-io/yidu/internal/opt"
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
	// Objects, when set, keeps new uploads' bytes in an S3-compatible
	// bucket instead of MySQL's chunks (attachments.s3); what MySQL
	// already holds stays there and is read from there.
	Objects Objects
}

// Objects is an S3-compatible bucket (s3.Bucket), keys being hashes.
type Objects interface {
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	Presign(ctx context.Context, key, name, contentType string) (u string, expires time.Time, err error)
	Origin() string
}

// Store keeps attachments in MySQL (migration 00020): the rows always,
// the bytes in MySQL's chunks or, with Options.Objects, in a bucket. A
// blob row of one byte or more with no chunks is one whose bytes the
// bucket holds (no upload is empty: content.Sniff refuses it).
type Store struct {
	db      *sql.DB
	log     *slog.Logger
	now     func() time.Time
	spool   string
	objects Objects
	blobs   blobIndex
	links   linkCache
}

// New returns a Store over db.
func New(db *sql.DB, opts Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("attachment: a database is required")
	}
	opt.Logger(&opts.Logger)
	opt.Clock(&opts.Now)
	return &Store{db: db, log: opts.Logger.With("component", "attachment"), now: opts.Now, spool: opts.SpoolDir, objects: opts.Objects}, nil
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
	if s.objects != nil {
		// The bytes first, then the row that says they are there.
		if err := s.objects.Put(ctx, sum.String(), f, up.size, string(up.typ)); err != nil {
			return fmt.Errorf("attachment: write blob %s: %w", sum, err)
		}
		if _, err := s.db.ExecContext(ctx, `INSERT IGNORE INTO attachment_blobs (sha256, type, size, chunks, created_at) VALUES (?, ?, ?, 0, ?)`,
			sum[:], string(up.typ), up.size, s.now().UTC()); err != nil {
			return fmt.Errorf("attachment: write blob %s: %w", sum, err)
		}
		return nil
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

// InBucket reports whether the bucket holds the bytes (no chunks in
// MySQL).
func (b Blob) InBucket() bool { return b.Chunks == 0 && b.Size > 0 }

// Blob returns what is kept of hash sum: its row is read once per
// process (a blob never changes), then answered from memory.
func (s *Store) Blob(ctx context.Context, sum content.Hash) (Blob, error) {
	if b, ok := s.blobs.get(sum); ok {
		return b, nil
	}
	var b Blob
	err := s.db.QueryRowContext(ctx, `SELECT type, size, chunks FROM attachment_blobs WHERE sha256 = ?`, sum[:]).Scan(&b.Type, &b.Size, &b.Chunks)
	if errors.Is(err, sql.ErrNoRows) {
		return b, fmt.Errorf("blob %s: %w", sum, ErrNotFound)
	}
	if err != nil {
		return b, fmt.Errorf("attachment: blob %s: %w", sum, err)
	}
	s.blobs.put(sum, b)
	return b, nil
}

// WriteBlob writes the bytes of hash sum to w, chunk by chunk (or from
// the bucket), and checks their count, size and hash on the way (a blob
// never leaves yidu other than as it came in).
func (s *Store) WriteBlob(ctx context.Context, sum content.Hash, w io.Writer) (Blob, error) {
	b, err := s.Blob(ctx, sum)
	if err != nil {
		return b, err
	}
	if b.InBucket() {
		return b, s.writeObject(ctx, sum, b, w)
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

// writeObject copies the bucket's bytes of sum to w, checked as chunks
// are.
func (s *Store) writeObject(ctx context.Context, sum content.Hash, b Blob, w io.Writer) error {
	if s.objects == nil {
		return fmt.Errorf("attachment: blob %s is kept in object storage, and attachments.s3 is not configured", sum)
	}
	r, err := s.objects.Open(ctx, sum.String())
	if err != nil {
		return fmt.Errorf("attachment: blob %s: %w", sum, err)
	}
	defer r.Close()
	h := newHasher()
	// One byte past the size shows a longer object.
	if _, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(r, b.Size+1)); err != nil {
		return fmt.Errorf("attachment: read %s: %w", sum, err)
	}
	if h.n != b.Size || !bytes.Equal(h.Sum(nil), sum[:]) {
		return fmt.Errorf("attachment: blob %s is damaged in object storage (%d bytes read of %d)", sum, h.n, b.Size)
	}
	return nil
}

// Link returns a short-lived URL of the bucket that serves sum's bytes as
// name and typ, ok false when the bytes are not in a bucket (no
// attachments.s3, or kept in MySQL from before it).
func (s *Store) Link(ctx context.Context, sum content.Hash, name string, typ content.Type) (string, bool, error) {
	if s.objects == nil {
		return "", false, nil
	}
	b, err := s.Blob(ctx, sum)
	if err != nil || !b.InBucket() {
		return "", false, err
	}
	k := linkKey{sum, name, typ}
	now := s.now()
	if u, ok := s.links.get(k, now); ok {
		return u, true, nil
	}
	u, expires, err := s.objects.Presign(ctx, sum.String(), name, string(typ))
	if err != nil {
		return "", false, fmt.Errorf("attachment: link %s: %w", sum, err)
	}
	// Handed out until half its life is gone: every reader opening the
	// notice meanwhile gets the same URL, so a browser that fetched it
	// answers a second open from its cache, and each link still has half
	// its life left when it is handed out.
	s.links.put(k, u, now.Add(expires.Sub(now)/2))
	return u, true, nil
}

// linkKey is what a link is signed for.
type linkKey struct {
	sum  content.Hash
	name string
	typ  content.Type
}

// maxLinks bounds the links a Store keeps.
const maxLinks = 10000

// linkCache is the links handed out, each until its renewal time. Past
// its bound it starts again empty.
type linkCache struct {
	mu sync.Mutex
	m  map[linkKey]cachedLink
}

type cachedLink struct {
	url   string
	until time.Time
}

func (c *linkCache) get(k linkKey, now time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.m[k]
	if !ok || !now.Before(l.until) {
		return "", false
	}
	return l.url, true
}

func (c *linkCache) put(k linkKey, u string, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxLinks {
		c.m = map[linkKey]cachedLink{}
	}
	c.m[k] = cachedLink{u, until}
}

// Origin is the scheme://host of Link's URLs ("" without a bucket).
func (s *Store) Origin() string {
	if s.objects == nil {
		return ""
	}
	return s.objects.Origin()
}

// maxBlobIndex bounds the blob rows a Store keeps in memory.
const maxBlobIndex = 100000

// blobIndex is the blob rows read, by hash. Past its bound it starts
// again empty: rows are small and a re-read costs one query.
type blobIndex struct {
	mu sync.Mutex
	m  map[content.Hash]Blob
}

func (x *blobIndex) get(sum content.Hash) (Blob, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	b, ok := x.m[sum]
	return b, ok
}

func (x *blobIndex) put(sum content.Hash, b Blob) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil || len(x.m) >= maxBlobIndex {
		x.m = map[content.Hash]Blob{}
	}
	x.m[sum] = b
}
