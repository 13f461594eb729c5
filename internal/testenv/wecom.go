package testenv

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/silenceper/wechat/v2/util"

	"github.com/yidu-io/yidu/internal/fakewecom"
)

// RunWithWeCom runs m's tests with h (a fakewecom.Server, or a handler in
// front of one) serving as WeCom's API, and returns m.Run's code for
// os.Exit. silenceper/wechat/v2's URI modifier is process-wide, so it is
// pointed at h once, from TestMain, for every test of the binary.
func RunWithWeCom(m *testing.M, h http.Handler) int {
	srv := httptest.NewServer(h)
	defer srv.Close()
	util.SetURIModifier(fakewecom.URIModifier(srv.URL))
	return m.Run()
}

// Outages is an http.Handler that serves through h, except while a test
// has set an outage.
type Outages struct {
	h      http.Handler
	outage atomic.Pointer[http.HandlerFunc]
}

// NewOutages returns Outages serving through h.
func NewOutages(h http.Handler) *Outages { return &Outages{h: h} }

// ServeHTTP answers with the outage if one is set, else through h.
func (o *Outages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f := o.outage.Load(); f != nil {
		(*f)(w, r)
		return
	}
	o.h.ServeHTTP(w, r)
}

// Set makes o answer with h until the test ends. o serves every test of
// the binary, so tests that set an outage must not run in parallel.
func (o *Outages) Set(tb testing.TB, h http.HandlerFunc) {
	tb.Helper()
	o.outage.Store(&h)
	tb.Cleanup(func() { o.outage.Store(nil) })
}
