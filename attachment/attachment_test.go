package attachment

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/content"
	"github.com/yidu-io/yidu/internal/testenv"
)

const corp = "wx5823bf96d3bd56c7"

func newStore(t *testing.T) (*Store, *sql.DB) {
	t.Helper()
	db := testenv.MySQL(t)
	s, err := New(db, Options{Now: func() time.Time { return time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	return s, db
}

// pdf returns n bytes that sniff as a PDF, different for each seed.
func pdf(n int, seed byte) []byte {
	b := bytes.Repeat([]byte{seed}, n)
	copy(b, "%PDF-1.7\n")
	return b
}

func count(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	return testenv.Column[int](t, db, "SELECT COUNT(*) FROM "+table)[0]
}

func TestPut(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	data := pdf(2*ChunkSize+100, 'a')

	a, err := s.Put(ctx, corp, "hr", `C:\制度\评分表.pdf`, bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	want := Attachment{ID: a.ID, SHA256: content.Sum(data).String(), Name: "评分表.pdf", Type: content.TypePDF, Size: int64(len(data))}
	if a != want || !strings.HasPrefix(a.ID, "att_") {
		t.Fatalf("Put = %+v; want %+v", a, want)
	}
	if n := count(t, db, "attachment_chunks"); n != 3 {
		t.Fatalf("chunks = %d; want 3", n)
	}
	// The same bytes again: a new id, no new chunk.
	b, err := s.Put(ctx, corp, "hr", "copy.pdf", bytes.NewReader(data))
	if err != nil || b.ID == a.ID || b.SHA256 != a.SHA256 {
		t.Fatalf("second Put = %+v, %v; want a new id over the same hash", b, err)
	}
	if n := count(t, db, "attachment_chunks"); n != 3 {
		t.Fatalf("chunks after the same upload = %d; want 3", n)
	}

	got, err := s.Get(ctx, corp, []string{b.ID, a.ID})
	if err != nil || len(got) != 2 || got[0] != b || got[1] != a {
		t.Fatalf("Get = %+v, %v; want [b a]", got, err)
	}
	if _, err := s.Get(ctx, "wwothercorp", []string{a.ID}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get from another corp = %v; want ErrNotFound", err)
	}

	var buf bytes.Buffer
	blob, err := s.WriteBlob(ctx, a.Hash(), &buf)
	if err != nil || !bytes.Equal(buf.Bytes(), data) || blob.Type != content.TypePDF || blob.Chunks != 3 {
		t.Fatalf("WriteBlob = %+v, %v (%d bytes); want the upload back", blob, err, buf.Len())
	}
}

// TestPutRefused: every refused upload writes nothing.
func TestPutRefused(t *testing.T) {
	s, db := newStore(t)
	tests := []struct {
		name, file string
		data       []byte
		want       error
	}{
		{"html named pdf", "a.pdf", []byte("<html><script>alert(1)</script>"), yidu.ErrInvalid},
		{"empty", "a.pdf", nil, yidu.ErrInvalid},
		{"no name", "", pdf(10, 'x'), yidu.ErrInvalid},
		{"one byte too large", "big.pdf", pdf(content.MaxAttachmentSize+1, 'x'), ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Put(context.Background(), corp, "hr", tt.file, bytes.NewReader(tt.data))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Put = %v; want %v", err, tt.want)
			}
			for _, table := range []string{"attachments", "attachment_blobs", "attachment_chunks"} {
				if n := count(t, db, table); n != 0 {
					t.Fatalf("%s has %d rows after a refused upload", table, n)
				}
			}
		})
	}
	if _, err := s.Put(context.Background(), corp, "hr", "max.pdf", bytes.NewReader(pdf(content.MaxAttachmentSize, 'm'))); err != nil {
		t.Fatalf("Put of exactly %d bytes: %v", content.MaxAttachmentSize, err)
	}
}

func TestCache(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	data := pdf(ChunkSize+1, 'c')
	a, err := s.Put(ctx, corp, "hr", "c.pdf", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c, err := NewCache(dir, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	read := func() ([]byte, error) {
		f, err := c.Open(ctx, a.Hash())
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(f)
	}
	if got, err := read(); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Open = %d bytes, %v; want the upload", len(got), err)
	}
	// Served from disk now: MySQL is no longer asked.
	if _, err := db.Exec("DELETE FROM attachment_chunks"); err != nil {
		t.Fatal(err)
	}
	if got, err := read(); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Open from disk = %d bytes, %v", len(got), err)
	}

	// A damaged blob is refused and not cached.
	b, err := s.Put(ctx, corp, "hr", "d.pdf", bytes.NewReader(pdf(100, 'd')))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE attachment_chunks SET data = 'x' WHERE sha256 = ?", func() []byte { h := b.Hash(); return h[:] }()); err != nil {
		t.Fatal(err)
	}
	if f, err := c.Open(ctx, b.Hash()); err == nil {
		f.Close()
		t.Fatal("Open of a damaged blob succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, b.SHA256)); !os.IsNotExist(err) {
		t.Fatalf("damaged blob cached: %v", err)
	}
	if _, err := c.Open(ctx, content.Sum([]byte("none"))); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open of an unknown hash = %v; want ErrNotFound", err)
	}
}

// TestCacheBound: the cache keeps its files under its bound by removing
// the least recently opened, serves a removed one again by reading MySQL,
// and a cache opened again on the same directory keeps its bound too.
func TestCacheBound(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	size := ChunkSize + 1
	var atts []Attachment
	for i, name := range []string{"a.pdf", "b.pdf", "c.pdf"} {
		a, err := s.Put(ctx, corp, "hr", name, bytes.NewReader(pdf(size, byte('a'+i))))
		if err != nil {
			t.Fatal(err)
		}
		atts = append(atts, a)
	}
	dir := t.TempDir()
	c, err := NewCache(dir, s, int64(2*size+10))
	if err != nil {
		t.Fatal(err)
	}
	open := func(i int) {
		t.Helper()
		f, err := c.Open(ctx, atts[i].Hash())
		if err != nil {
			t.Fatalf("Open(%s): %v", atts[i].Name, err)
		}
		defer f.Close()
		if got, _ := io.ReadAll(f); !bytes.Equal(got, pdf(size, byte('a'+i))) {
			t.Fatalf("Open(%s) = %d bytes; want the upload", atts[i].Name, len(got))
		}
	}
	onDisk := func() string {
		t.Helper()
		var got []string
		for i, a := range atts {
			if _, err := os.Stat(filepath.Join(dir, a.SHA256)); err == nil {
				got = append(got, string(rune('a'+i)))
			}
		}
		return strings.Join(got, "")
	}
	open(0)
	open(1)
	open(0) // a is the most recently opened now
	open(2) // over the bound: b, the least recently opened, goes
	if got := onDisk(); got != "ac" {
		t.Fatalf("cached after a, b, a, c = %q; want \"ac\" (b removed)", got)
	}
	if c.Size() > int64(2*size+10) {
		t.Fatalf("cache holds %d bytes; bound %d", c.Size(), 2*size+10)
	}
	open(1) // b again: read from MySQL, and a goes
	if got := onDisk(); got != "bc" {
		t.Fatalf("cached after b again = %q; want \"bc\"", got)
	}
	// A leftover temporary file is removed, and a smaller bound is kept
	// at once by a cache opened again on the directory.
	if err := os.WriteFile(filepath.Join(dir, atts[0].SHA256+".123.tmp"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	c2, err := NewCache(dir, s, int64(size+10))
	if err != nil {
		t.Fatal(err)
	}
	if n := c2.Size(); n > int64(size+10) || len(onDisk()) != 1 {
		t.Fatalf("reopened with a bound of one file: %d bytes, files %q", n, onDisk())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("dir holds %d entries; want 1 (the temporary file removed)", len(ents))
	}
}

// FuzzRead: whatever the name and the bytes, an upload is either refused,
// or within the limit, typed by its own first bytes, and named without a
// path or control character.
func FuzzRead(f *testing.F) {
	f.Add("a.pdf", []byte("%PDF-1.4 x"), uint16(0))
	f.Add("../x.png", []byte("\x89PNG\r\n\x1a\n"), uint16(300))
	f.Add("x.jpg", []byte{0xFF, 0xD8, 0xFF, 0xE0}, uint16(1000))
	f.Add("evil.pdf", []byte("<svg onload=alert(1)>"), uint16(5))
	const limit = 1024
	f.Fuzz(func(t *testing.T, name string, head []byte, pad uint16) {
		body := append(append([]byte{}, head...), bytes.Repeat([]byte{0}, int(pad))...)
		clean, typ, data, err := readLimited(name, bytes.NewReader(body), limit)
		if err != nil {
			if !errors.Is(err, yidu.ErrInvalid) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("readLimited: %v is neither ErrInvalid nor ErrTooLarge", err)
			}
			return
		}
		if len(data) > limit || len(body) > limit {
			t.Fatalf("accepted %d bytes over a limit of %d", len(body), limit)
		}
		if !bytes.Equal(data, body) {
			t.Fatal("accepted bytes differ from the upload")
		}
		if sniffed, _ := content.Sniff(data); sniffed != typ || !typ.Valid() {
			t.Fatalf("type %q; the bytes sniff as %q", typ, sniffed)
		}
		if clean == "" || strings.ContainsAny(clean, "/\\\x00\r\n") || len(clean) > content.MaxNameBytes {
			t.Fatalf("name %q kept from %q", clean, name)
		}
	})
}
