package attachment

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/yidu-io/yidu/attachment/s3"
	"github.com/yidu-io/yidu/content"
	"github.com/yidu-io/yidu/internal/testenv"
)

// newS3Bucket is a bucket of its own on the S3 server of the tests
// (s3proxy in CI).
func newS3Bucket(t *testing.T) (*s3.Bucket, testenv.S3Server) {
	t.Helper()
	srv := testenv.S3(t)
	b, err := s3.New(s3.Options{Endpoint: srv.Endpoint, Bucket: srv.Bucket, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, PresignTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	return b, srv
}

// TestS3Store: with attachments.s3 an upload's bytes go to the bucket
// under its hash (MySQL keeps its rows, no chunk), are read back from
// there checked, and a presigned URL serves them to a plain HTTP GET,
// ranges too; blobs MySQL kept from before stay readable and are not
// linked.
func TestS3Store(t *testing.T) {
	bucket, srv := newS3Bucket(t)
	db := testenv.MySQL(t)
	ctx := context.Background()

	// Kept by MySQL before the bucket was configured.
	plain, err := New(db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	old := pdf(1000, 'o')
	oa, err := plain.Put(ctx, corp, "hr", "old.pdf", bytes.NewReader(old))
	if err != nil {
		t.Fatal(err)
	}

	s, err := New(db, Options{Objects: bucket})
	if err != nil {
		t.Fatal(err)
	}
	data := pdf(2*ChunkSize+100, 's')
	a, err := s.Put(ctx, corp, "hr", "评分表.pdf", bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	sum := a.Hash()

	t.Run("the bytes are in the bucket, not in MySQL", func(t *testing.T) {
		if n := count(t, db, "attachment_chunks"); n != 1 {
			t.Errorf("chunks = %d; want 1 (the old upload's only)", n)
		}
		o, err := srv.Client.GetObject(ctx, srv.Bucket, "attachments/"+a.SHA256, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(o)
		o.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("object = %d bytes, %v; want the upload", len(got), err)
		}
		info, _ := srv.Client.StatObject(ctx, srv.Bucket, "attachments/"+a.SHA256, minio.StatObjectOptions{})
		if info.ContentType != "application/pdf" {
			t.Errorf("object type = %q", info.ContentType)
		}
		// The same bytes again: a new id, nothing written twice.
		if _, err := s.Put(ctx, corp, "hr", "again.pdf", bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		n := 0
		for o := range srv.Client.ListObjects(ctx, srv.Bucket, minio.ListObjectsOptions{Recursive: true}) {
			// (s3proxy's filesystem store lists its folder too.)
			if o.Err == nil && !strings.HasSuffix(o.Key, "/") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("objects = %d; want 1", n)
		}
	})

	t.Run("read back through the cache, checked", func(t *testing.T) {
		c, err := NewCache(t.TempDir(), s, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range [][]byte{data, old} {
			f, err := c.Open(ctx, content.Sum(want))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(f)
			f.Close()
			if !bytes.Equal(got, want) {
				t.Errorf("Open = %d bytes; want %d", len(got), len(want))
			}
		}
	})

	t.Run("a presigned URL serves the bytes", func(t *testing.T) {
		u, ok, err := s.Link(ctx, sum, "评分表.pdf", content.TypePDF)
		if err != nil || !ok {
			t.Fatalf("Link = %q, %v, %v", u, ok, err)
		}
		if !strings.HasPrefix(u, s.Origin()+"/") || s.Origin() != "http://"+srv.Endpoint {
			t.Errorf("link %s, origin %s; want under http://%s", u, s.Origin(), srv.Endpoint)
		}
		if strings.Contains(u, srv.SecretKey) {
			t.Fatal("the link carries the secret key")
		}
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Equal(got, data) || resp.Header.Get("Content-Type") != "application/pdf" {
			t.Fatalf("GET link = %d %q, %d bytes; want 200 with the PDF", resp.StatusCode, resp.Header.Get("Content-Type"), len(got))
		}
		if cc := resp.Header.Get("Cache-Control"); cc != "private, max-age=31536000, immutable" {
			t.Errorf("the link's Cache-Control = %q; want private, max-age=31536000, immutable", cc)
		}
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("Range", "bytes=65536-131071")
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 206 || !bytes.Equal(got, data[65536:131072]) {
			t.Errorf("a range of the link = %d, %d bytes; want 206 with 64 KiB", resp.StatusCode, len(got))
		}
		// Another key under the same signature is refused.
		forged, _ := url.Parse(u)
		forged.Path = strings.Replace(forged.Path, a.SHA256, oa.SHA256, 1)
		if resp, err := http.Get(forged.String()); err != nil || resp.StatusCode != 403 {
			t.Errorf("a link edited to another key = %v %v; want 403", resp.StatusCode, err)
		}
		if _, ok, err := s.Link(ctx, oa.Hash(), "old.pdf", content.TypePDF); ok || err != nil {
			t.Errorf("Link of a blob MySQL keeps = %v, %v; want not linked", ok, err)
		}
	})

	t.Run("a damaged object is refused", func(t *testing.T) {
		bad := pdf(300, 'b')
		ba, err := s.Put(ctx, corp, "hr", "b.pdf", bytes.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		damaged := pdf(300, 'x')
		if _, err := srv.Client.PutObject(ctx, srv.Bucket, "attachments/"+ba.SHA256, bytes.NewReader(damaged), int64(len(damaged)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		var w bytes.Buffer
		if _, err := s.WriteBlob(ctx, ba.Hash(), &w); err == nil || !strings.Contains(err.Error(), "damaged") {
			t.Errorf("WriteBlob of a damaged object = %v; want damaged", err)
		}
		if _, err := srv.Client.StatObject(ctx, srv.Bucket, "attachments/"+ba.SHA256, minio.StatObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := srv.Client.RemoveObject(ctx, srv.Bucket, "attachments/"+ba.SHA256, minio.RemoveObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.WriteBlob(ctx, ba.Hash(), &w); err == nil {
			t.Error("WriteBlob of a missing object succeeded")
		}
	})

	t.Run("without the bucket configured, a clear error", func(t *testing.T) {
		var w bytes.Buffer
		if _, err := plain.WriteBlob(ctx, sum, &w); err == nil || !strings.Contains(err.Error(), "attachments.s3 is not configured") {
			t.Errorf("WriteBlob = %v; want attachments.s3 is not configured", err)
		}
	})
}

// TestS3Options: what cannot work is refused before any request, and no
// error quotes a key.
func TestS3Options(t *testing.T) {
	good := s3.Options{Endpoint: "oss-cn-hangzhou.aliyuncs.com", Bucket: "yidu", AccessKey: "AKID", SecretKey: "s3cr3t-value", UseSSL: true}
	for _, tc := range []struct {
		name string
		edit func(*s3.Options)
	}{
		{"no endpoint", func(o *s3.Options) { o.Endpoint = "" }},
		{"a URL for an endpoint", func(o *s3.Options) { o.Endpoint = "https://oss-cn-hangzhou.aliyuncs.com/" }},
		{"no bucket", func(o *s3.Options) { o.Bucket = "" }},
		{"no secret key", func(o *s3.Options) { o.SecretKey = "" }},
		{"no access key", func(o *s3.Options) { o.AccessKey = "" }},
		{"a TTL past 7 days", func(o *s3.Options) { o.PresignTTL = 8 * 24 * time.Hour }},
		{"a TTL under a minute", func(o *s3.Options) { o.PresignTTL = time.Second }},
		{"an unknown addressing", func(o *s3.Options) { o.Addressing = "dns" }},
	} {
		o := good
		tc.edit(&o)
		_, err := s3.New(o)
		if err == nil {
			t.Errorf("%s: New succeeded", tc.name)
		} else if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "AKID") {
			t.Errorf("%s: error %q quotes a key", tc.name, err)
		}
	}
	b, err := s3.New(good)
	if err != nil {
		t.Fatal(err)
	}
	if b.Origin() != "https://yidu.oss-cn-hangzhou.aliyuncs.com" {
		t.Errorf("Origin = %q; want the bucket's virtual host on OSS", b.Origin())
	}
	good.Addressing = s3.AddressingPath
	if b, _ := s3.New(good); b.Origin() != "https://oss-cn-hangzhou.aliyuncs.com" {
		t.Errorf("path-style Origin = %q", b.Origin())
	}
}

// countingObjects counts the links signed.
type countingObjects struct {
	Objects
	signed int
}

func (c *countingObjects) Presign(ctx context.Context, key, name, contentType string) (string, time.Time, error) {
	c.signed++
	return c.Objects.Presign(ctx, key, name, contentType)
}

// TestS3LinkReused: a link is handed to every reader until half its life
// is gone (so a browser that fetched it finds it in its cache on a second
// open), then a fresh one is signed.
func TestS3LinkReused(t *testing.T) {
	bucket, _ := newS3Bucket(t)
	db := testenv.MySQL(t)
	objs := &countingObjects{Objects: bucket}
	now := time.Now()
	s, err := New(db, Options{Objects: objs, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Put(t.Context(), corp, "hr", "a.pdf", bytes.NewReader(pdf(1000, 'l')))
	if err != nil {
		t.Fatal(err)
	}
	first, _, err := s.Link(t.Context(), a.Hash(), "a.pdf", content.TypePDF)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(25 * time.Second) // the TTL is a minute
	if again, _, _ := s.Link(t.Context(), a.Hash(), "a.pdf", content.TypePDF); again != first || objs.signed != 1 {
		t.Errorf("within half the TTL: %d signed, same URL %v; want 1, the same", objs.signed, again == first)
	}
	if _, _, _ = s.Link(t.Context(), a.Hash(), "b.pdf", content.TypePDF); objs.signed != 2 {
		t.Errorf("another name: %d signed; want its own link", objs.signed)
	}
	now = now.Add(10 * time.Second)
	if _, _, _ = s.Link(t.Context(), a.Hash(), "a.pdf", content.TypePDF); objs.signed != 3 {
		t.Errorf("past half the TTL: %d signed; want a fresh link", objs.signed)
	}
}
