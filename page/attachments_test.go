package page

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/content"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/notice"
)

// countingNotices counts the reads of every version (MySQL's
// notice_versions in production).
type countingNotices struct {
	*fakeNotices
	mu    sync.Mutex
	lists atomic.Int64
}

func (c *countingNotices) List(ctx context.Context, corp, msgid string) ([]notice.Version, error) {
	c.lists.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fakeNotices.List(ctx, corp, msgid)
}

// add publishes a version (as notice.Store.Update).
func (c *countingNotices) add(v notice.Version) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v.N = len(c.versions) + 1
	c.versions = append(c.versions, v)
}

// fakeLinks links the hashes it holds to an object store.
type fakeLinks struct {
	held map[content.Hash]bool
}

func (f fakeLinks) Link(_ context.Context, sum content.Hash, name string, typ content.Type) (string, bool, error) {
	if !f.held[sum] {
		return "", false, nil
	}
	return "https://objects.example.com/yidu/" + sum.String() + "?X-Amz-Signature=abc", true, nil
}

func (fakeLinks) Origin() string { return "https://objects.example.com" }

type attachmentFixture struct {
	*fixture
	notices *countingNotices
	pdf2    []byte
	sum2    content.Hash
}

// newAttachmentFixture is the reading page of "perf" (one PDF in each of
// its two versions) with links for the hashes in linked.
func newAttachmentFixture(t *testing.T, links Links) *attachmentFixture {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	dir := t.TempDir()
	pdf := []byte("%PDF-1.7\n% the scoring table\n" + strings.Repeat("0123456789abcdef", 4096))
	pdf2 := []byte("%PDF-1.7\n% the appeal form\n")
	for _, b := range [][]byte{pdf, pdf2} {
		if err := os.WriteFile(filepath.Join(dir, content.Sum(b).String()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	att := attachment.Attachment{ID: "att_1", SHA256: content.Sum(pdf).String(), Name: "评分表.pdf", Type: content.TypePDF, Size: int64(len(pdf))}
	ns := &countingNotices{fakeNotices: &fakeNotices{versions: []notice.Version{
		{N: 1, Title: "2026年度绩效考核办法", HTML: "<p>一</p>", Attachments: []attachment.Attachment{att}},
		{N: 2, Title: "2026年度绩效考核办法", HTML: "<p>二</p>", Attachments: []attachment.Attachment{att}},
	}}}
	f := &fixture{reads: &fakeReads{}, archive: &fakeArchive{rows: map[string]bool{}}, rdb: rdb, now: &atomic.Int64{}, audit: &fakeAudit{}, pdf: pdf, pdfAt: att}
	s, err := New(fakeReaders{}, ns, fakeBlobs{dir}, f.reads, fakeOAuth{}, f.audit, Options{
		PublicURL: "https://read.example.com", Apps: []App{{Name: "hr", CorpID: corp, AgentID: 1000002, ViewKey: testViewKey}},
		Endpoints: access.DefaultEndpoints, States: access.NewStates(rdb, prefix), Redis: rdb, Prefix: prefix,
		Archive: f.archive, Links: links,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.h = s.Routes()
	return &attachmentFixture{fixture: f, notices: ns, pdf2: pdf2, sum2: content.Sum(pdf2)}
}

// fetch GETs target with the browser's cookies and the headers given
// (name, value pairs).
func (b *browser) fetch(t *testing.T, target string, hv ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest("GET", target, nil)
	r.Header.Set("User-Agent", b.ua)
	for i := 0; i+1 < len(hv); i += 2 {
		r.Header.Set(hv[i], hv[i+1])
	}
	for _, c := range b.cookies {
		r.AddCookie(c)
	}
	w := httptest.NewRecorder()
	b.f.h.ServeHTTP(w, r)
	return w
}

// TestAttachmentCaching: an attachment's URL names its bytes, so a
// recipient's browser keeps them (ETag the hash, immutable for a year)
// and a repeated fetch is 304 without its bytes; ranges answer as pdf.js
// asks; which attachment a hash is comes from memory after the first
// fetch; the checks of who reads stay before any of it.
func TestAttachmentCaching(t *testing.T) {
	f := newAttachmentFixture(t, nil)
	path := "/r/hr/perf/a/" + f.pdfAt.SHA256
	tag := `"` + f.pdfAt.SHA256 + `"`
	b := &browser{f: f.fixture, ua: wecomUA, cookies: map[string]*http.Cookie{}}
	b.signIn(t, "/r/hr/perf", "zhangsan")

	t.Run("first fetch: the bytes, their ETag, kept a year", func(t *testing.T) {
		w := b.fetch(t, path)
		if w.Code != 200 || w.Body.String() != string(f.pdf) {
			t.Fatalf("GET = %d (%d bytes); want 200 with the PDF", w.Code, w.Body.Len())
		}
		if got := w.Header().Get("ETag"); got != tag {
			t.Errorf("ETag = %q; want %q (strong, the SHA-256)", got, tag)
		}
		if got := w.Header().Get("Cache-Control"); got != "private, max-age=31536000, immutable" {
			t.Errorf("Cache-Control = %q; want private, max-age=31536000, immutable", got)
		}
	})

	t.Run("a repeated fetch with the ETag is 304", func(t *testing.T) {
		for _, inm := range []string{tag, `"other", ` + tag, "W/" + tag} {
			w := b.fetch(t, path, "If-None-Match", inm)
			if w.Code != http.StatusNotModified || w.Body.Len() != 0 {
				t.Errorf("If-None-Match %s = %d (%d bytes); want 304 without a body", inm, w.Code, w.Body.Len())
			}
			if w.Header().Get("ETag") != tag || w.Header().Get("Cache-Control") != attachmentCacheControl {
				t.Errorf("304 headers %v", w.Header())
			}
		}
		if w := b.fetch(t, path, "If-None-Match", `"`+f.sum2.String()+`"`); w.Code != 200 {
			t.Errorf("another hash's ETag = %d; want 200", w.Code)
		}
	})

	t.Run("ranges", func(t *testing.T) {
		w := b.fetch(t, path, "Range", "bytes=65536-")
		if w.Code != http.StatusPartialContent || w.Body.String() != string(f.pdf[65536:]) {
			t.Fatalf("Range = %d (%d bytes); want 206 with the tail", w.Code, w.Body.Len())
		}
		if got, want := w.Header().Get("Content-Range"), "bytes 65536-"+itoa(len(f.pdf)-1)+"/"+itoa(len(f.pdf)); got != want {
			t.Errorf("Content-Range = %q; want %q", got, want)
		}
		if w.Header().Get("ETag") != tag {
			t.Errorf("a range's ETag = %q", w.Header().Get("ETag"))
		}
		// If-Range with the ETag: the range; with another: the whole.
		if w := b.fetch(t, path, "Range", "bytes=0-9", "If-Range", tag); w.Code != 206 || w.Body.String() != string(f.pdf[:10]) {
			t.Errorf("If-Range with the ETag = %d; want 206", w.Code)
		}
		if w := b.fetch(t, path, "Range", "bytes=0-9", "If-Range", `"stale"`); w.Code != 200 || w.Body.Len() != len(f.pdf) {
			t.Errorf("If-Range with another ETag = %d; want 200 with the whole", w.Code)
		}
	})

	t.Run("no MySQL after the first fetch", func(t *testing.T) {
		before := f.notices.lists.Load()
		for range 20 {
			b.fetch(t, path)
			b.fetch(t, path, "If-None-Match", tag)
		}
		if got := f.notices.lists.Load() - before; got != 0 {
			t.Errorf("40 fetches read the versions %d times; want 0 (from memory)", got)
		}
	})

	t.Run("a version published since is found", func(t *testing.T) {
		p2 := "/r/hr/perf/a/" + f.sum2.String()
		if w := b.fetch(t, p2); w.Code != 404 {
			t.Fatalf("an attachment of no version = %d; want 404", w.Code)
		}
		f.notices.add(notice.Version{Title: "2026年度绩效考核办法", HTML: "<p>三</p>", Attachments: []attachment.Attachment{
			f.pdfAt, {ID: "att_2", SHA256: f.sum2.String(), Name: "申诉表.pdf", Type: content.TypePDF, Size: int64(len(f.pdf2))}}})
		if w := b.fetch(t, p2); w.Code != 200 || w.Body.String() != string(f.pdf2) || !strings.Contains(w.Header().Get("Content-Disposition"), "%E7%94%B3%E8%AF%89%E8%A1%A8.pdf") {
			t.Fatalf("the new version's attachment = %d %q; want 200", w.Code, w.Header().Get("Content-Disposition"))
		}
	})

	t.Run("who may not read gets 404, ETag or not", func(t *testing.T) {
		lisi := &browser{f: f.fixture, ua: wecomUA, cookies: map[string]*http.Cookie{}}
		lisi.signIn(t, "/r/hr/perf", "lisi")
		none := &browser{f: f.fixture, ua: wecomUA, cookies: map[string]*http.Cookie{}}
		for name, br := range map[string]*browser{"a non-recipient": lisi, "no session": none} {
			for _, hv := range [][]string{{"If-None-Match", tag}, {"Range", "bytes=0-9"}, nil} {
				w := br.fetch(t, path, hv...)
				if w.Code != 404 || w.Header().Get("ETag") != "" || strings.Contains(w.Body.String(), "PDF") {
					t.Errorf("%s with %v = %d ETag %q; want 404 and nothing of the file", name, hv, w.Code, w.Header().Get("ETag"))
				}
				if cc := w.Header().Get("Cache-Control"); cc != "no-store" {
					t.Errorf("%s's 404 Cache-Control = %q; want no-store", name, cc)
				}
			}
		}
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestAttachmentLinks: with object storage, a recipient is sent to the
// attachment's link (after the same checks), the page allows its
// origin, and an attachment the store lacks is served by the receiver.
func TestAttachmentLinks(t *testing.T) {
	held := map[content.Hash]bool{}
	f := newAttachmentFixture(t, fakeLinks{held: held})
	held[f.pdfAt.Hash()] = true
	b := &browser{f: f.fixture, ua: wecomUA, cookies: map[string]*http.Cookie{}}
	b.signIn(t, "/r/hr/perf", "zhangsan")
	if w := b.fetch(t, "/r/hr/perf/a/"+f.sum2.String()); w.Code != 404 {
		t.Errorf("an attachment of no version = %d; want 404, not a link", w.Code)
	}
	w := b.fetch(t, "/r/hr/perf/a/"+f.pdfAt.SHA256)
	if loc := w.Header().Get("Location"); w.Code != 302 || !strings.HasPrefix(loc, "https://objects.example.com/yidu/"+f.pdfAt.SHA256) {
		t.Fatalf("GET = %d %q; want 302 to the link", w.Code, loc)
	}
	if cc := w.Header().Get("Cache-Control"); cc != "no-store" {
		t.Errorf("the redirect's Cache-Control = %q; want no-store (the link expires)", cc)
	}
	csp := b.fetch(t, "/r/hr/perf").Header().Get("Content-Security-Policy")
	if !strings.Contains(csp, "connect-src 'self' https://objects.example.com") || !strings.Contains(csp, "img-src 'self' https://objects.example.com") {
		t.Errorf("page CSP %q does not allow the store's origin", csp)
	}
	lisi := &browser{f: f.fixture, ua: wecomUA, cookies: map[string]*http.Cookie{}}
	lisi.signIn(t, "/r/hr/perf", "lisi")
	if w := lisi.fetch(t, "/r/hr/perf/a/"+f.pdfAt.SHA256); w.Code != 404 || w.Header().Get("Location") != "" {
		t.Errorf("a non-recipient = %d %q; want 404 and no link", w.Code, w.Header().Get("Location"))
	}
	// Kept by MySQL from before the store: served here.
	delete(held, f.pdfAt.Hash())
	if w := b.fetch(t, "/r/hr/perf/a/"+f.pdfAt.SHA256); w.Code != 200 || w.Body.String() != string(f.pdf) {
		t.Errorf("an attachment the store lacks = %d; want 200 with its bytes", w.Code)
	}
}
