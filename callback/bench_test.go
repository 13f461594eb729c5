package callback

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// BenchmarkVerifyDecryptParse measures the hot path of one realistic
// template_card_event: envelope parse, signature, timestamp, AgentID,
// base64 + AES-CBC decrypt, event parse.
func BenchmarkVerifyDecryptParse(b *testing.B) {
	h := newHarness(b, nil)
	q, body := signedPost(b, "hr", cardXML, h.now)
	sig, ts, nonce := q.Get("msg_signature"), q.Get("timestamp"), q.Get("nonce")
	a := h.rc.apps["hr"]
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		dec := getBuf()
		ev, err := h.rc.open(a, sig, ts, nonce, body, dec)
		putBuf(dec)
		if err != nil || ev.Kind != KindTemplateCard {
			b.Fatalf("open = %v, %v", ev.Kind, err)
		}
	}
}

type nopReads struct{}

func (nopReads) CardPress(context.Context, string, int64, string, string, time.Time) (int, bool, error) {
	return 1, true, nil
}

func (nopReads) EnterAgent(context.Context, string, int64, string, time.Time) (int, error) {
	return 1, nil
}

func (nopReads) LinkRead(context.Context, string, int64, string, string, time.Time) (int, error) {
	return 1, nil
}

// BenchmarkHandler measures a template_card_event through the chi router
// with a no-op recorder and no dedup (the request and recorder allocations
// of httptest are included). Each request's context is cancelable, as
// net/http's server gives every request.
func BenchmarkHandler(b *testing.B) {
	h := newHarnessReads(b, nopReads{}, func(o *Options) { o.Dedup = nil })
	q, body := signedPost(b, "hr", cardXML, h.now)
	target := "/wecom/callback/hr?" + q.Encode()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(string(body)))
		w := httptest.NewRecorder()
		h.h.ServeHTTP(w, req)
		cancel()
		if w.Code != http.StatusOK {
			b.Fatalf("status %d %q", w.Code, w.Body)
		}
	}
}
