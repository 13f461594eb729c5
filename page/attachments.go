package page

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/go-chi/chi/v5"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/content"
)

// An attachment's URL, /r/<app>/<msgid>/a/<sha256>, names its bytes: the
// same URL never answers other bytes, so a recipient's browser keeps them
// (attachmentCacheControl) and asks again only with If-None-Match, answered
// 304 after the session and recipient checks without opening the bytes.
const (
	// attachmentCacheControl lets the reader's own browser keep the bytes
	// a year and never revalidate them (private: no shared cache holds a
	// recipient's file).
	attachmentCacheControl = "private, max-age=31536000, immutable"
	// DefaultAttachmentIndex is how many attachments of notices a Server
	// keeps in memory (Options.AttachmentIndex's default).
	DefaultAttachmentIndex = 10000
)

// Links answers where a browser fetches an attachment's bytes from when
// they are not served by the receiver (attachment.Cache over an
// S3-compatible store: a short-lived presigned URL). ok false: the
// receiver serves them itself.
type Links interface {
	Link(ctx context.Context, sum content.Hash, name string, typ content.Type) (u string, ok bool, err error)
	// Origin is the scheme://host the links point at, allowed in the
	// page's Content-Security-Policy ("" for none).
	Origin() string
}

// etag is an attachment's strong entity tag: its SHA-256.
func etag(sum content.Hash) string { return `"` + sum.String() + `"` }

// notModified reports whether r's If-None-Match names tag (or is "*").
func notModified(r *http.Request, tag string) bool {
	inm := r.Header.Get("If-None-Match")
	if inm == "" {
		return false
	}
	for _, t := range strings.Split(inm, ",") {
		t = strings.TrimSpace(t)
		t = strings.TrimPrefix(t, "W/") // If-None-Match compares weakly (RFC 9110 13.1.2)
		if t == "*" || t == tag {
			return true
		}
	}
	return false
}

// attachmentIndex answers which attachment of a notice a hash is,
// from memory: a notice's versions never change once published (new
// ones are added), so what was found once stays true, and MySQL is read
// once per notice and process, and again only for a hash not found
// (a version published since, or a hash the notice never had). It keeps
// the most recently asked max entries.
type attachmentIndex struct {
	load  func(ctx context.Context, corp, msgid string) (map[content.Hash]attachment.Attachment, error)
	fill  singleflight.Group
	items *lru.Cache[indexKey, attachment.Attachment]
}

type indexKey struct {
	corp, msgid string
	sum         content.Hash
}

func newAttachmentIndex(max int, load func(ctx context.Context, corp, msgid string) (map[content.Hash]attachment.Attachment, error)) *attachmentIndex {
	if max <= 0 {
		max = DefaultAttachmentIndex
	}
	items, _ := lru.New[indexKey, attachment.Attachment](max) // max > 0: no error
	return &attachmentIndex{load: load, items: items}
}

// find returns the attachment sum of corp's msgid, ok false if no version
// of it has one.
func (x *attachmentIndex) find(ctx context.Context, corp, msgid string, sum content.Hash) (attachment.Attachment, bool, error) {
	k := indexKey{corp, msgid, sum}
	if a, ok := x.items.Get(k); ok {
		return a, true, nil
	}
	if err := x.read(ctx, k); err != nil {
		return attachment.Attachment{}, false, err
	}
	a, ok := x.items.Get(k)
	return a, ok, nil
}

// read fills the index with k's notice after a miss of k. Concurrent
// misses of one notice share one read; a miss whose read starts after
// another's filled the index finds k there and reads nothing.
func (x *attachmentIndex) read(ctx context.Context, k indexKey) error {
	_, err, _ := x.fill.Do(k.corp+"\x00"+k.msgid, func() (any, error) {
		if _, ok := x.items.Get(k); ok {
			return nil, nil
		}
		all, err := x.load(context.WithoutCancel(ctx), k.corp, k.msgid)
		if err != nil {
			return nil, err
		}
		for s, a := range all {
			x.items.Add(indexKey{k.corp, k.msgid, s}, a)
		}
		return nil, nil
	})
	return err
}

// loadAttachments reads every version of corp's msgid and returns their
// attachments by hash (a later version's name for a hash wins).
func (s *Server) loadAttachments(ctx context.Context, corp, msgid string) (map[content.Hash]attachment.Attachment, error) {
	all, err := s.notices.List(ctx, corp, msgid)
	if err != nil {
		return nil, err
	}
	out := map[content.Hash]attachment.Attachment{}
	for _, v := range all {
		for _, a := range v.Attachments {
			if sum, err := content.ParseHash(a.SHA256); err == nil {
				out[sum] = a
			}
		}
	}
	return out, nil
}

// objectOrigin is the origin of Options.Links ("" without).
func (s *Server) objectOrigin() string {
	if s.opts.Links == nil {
		return ""
	}
	return s.opts.Links.Origin()
}

// handleAttachment serves an attachment of one of the notice's versions to
// a recipient: after the session and recipient checks, 304 to a browser
// that has its bytes (If-None-Match, the hash), a 302 to object storage
// when Options.Links serves it, else the bytes from the disk cache
// (ranges answered, for pdf.js). Which attachment a hash is comes from
// memory (attachmentIndex), not MySQL.
func (s *Server) handleAttachment(w http.ResponseWriter, r *http.Request) {
	a, msgID, ok := s.noticeOf(w, r)
	if !ok {
		return
	}
	sum, err := content.ParseHash(chi.URLParam(r, "sha"))
	if err != nil {
		notFound(w)
		return
	}
	if _, _, ok := s.reader(w, r, a, msgID, false); !ok {
		return
	}
	att, found, err := s.attachments.find(r.Context(), a.CorpID, msgID, sum)
	if err != nil {
		s.log.ErrorContext(r.Context(), "page: versions", "err", err)
		http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
		return
	}
	if !found {
		notFound(w)
		return
	}
	h := w.Header()
	tag := etag(sum)
	if notModified(r, tag) {
		h.Set("ETag", tag)
		h.Set("Cache-Control", attachmentCacheControl)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if s.opts.Links != nil {
		to, ok, err := s.opts.Links.Link(r.Context(), sum, att.Name, att.Type)
		if err != nil {
			s.log.ErrorContext(r.Context(), "page: attachment link", "err", err)
			http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
			return
		}
		if ok {
			// The link expires: the redirect is not kept (no-store
			// stays); the bytes behind it are the store's to cache.
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
	}
	f, err := s.blobs.Open(r.Context(), sum)
	if err != nil {
		s.log.ErrorContext(r.Context(), "page: attachment", "err", err)
		http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
		return
	}
	defer f.Close()
	h.Set("Content-Type", string(att.Type))
	h.Set("Content-Disposition", "inline; filename*=UTF-8''"+url.PathEscape(att.Name))
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; plugin-types application/pdf")
	h.Set("ETag", tag)
	h.Set("Cache-Control", attachmentCacheControl)
	http.ServeContent(w, r, "", time.Time{}, f)
}
