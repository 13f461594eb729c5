package webedge_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/internal/webedge"
)

type ids struct{}

var alice = &access.Principal{Name: "alice"}

func (ids) Bearer(tok string) (*access.Principal, bool) { return alice, tok == "good-token" }

func (ids) Lookup(_ context.Context, id string) (*access.SignIn, bool, error) {
	if id != "sid" {
		return nil, false, nil
	}
	return &access.SignIn{Principal: alice, CSRF: "tok"}, true, nil
}

// TestGuard: who the API and the page admit, and that the caller is in
// the context behind them.
func TestGuard(t *testing.T) {
	g := webedge.Guard{IDs: ids{}, Cookie: "s", Log: slog.New(slog.DiscardHandler),
		Strict: func(path string) bool { return path == "/export.csv" },
		SignIn: func(_ *http.Request, next string) string { return "/login?next=" + url.QueryEscape(next) }}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if webedge.Caller(r.Context()) != alice {
			t.Error("no caller behind the guard")
		}
		w.WriteHeader(http.StatusNoContent)
	})
	tests := []struct {
		name, method, path string
		header             map[string]string
		page               bool
		want               int
	}{
		{"bearer", "GET", "/x", map[string]string{"Authorization": "bearer good-token"}, false, 204},
		{"bad bearer", "GET", "/x", map[string]string{"Authorization": "Bearer bad"}, false, 401},
		{"nobody", "GET", "/x", nil, false, 401},
		{"session GET", "GET", "/x", map[string]string{"Cookie": "s=sid"}, false, 204},
		{"session POST without token", "POST", "/x", map[string]string{"Cookie": "s=sid"}, false, 403},
		{"session POST with token", "POST", "/x", map[string]string{"Cookie": "s=sid", webedge.CSRFHeader: "tok"}, false, 204},
		{"session cross-site", "GET", "/x", map[string]string{"Cookie": "s=sid", "Sec-Fetch-Site": "cross-site"}, false, 403},
		{"download without its site", "GET", "/export.csv", map[string]string{"Cookie": "s=sid"}, false, 403},
		{"download from the page", "GET", "/export.csv", map[string]string{"Cookie": "s=sid", "Sec-Fetch-Site": "same-origin"}, false, 204},
		{"page", "GET", "/m/x", map[string]string{"Cookie": "s=sid"}, true, 204},
		{"page without session", "GET", "/m/x", nil, true, 303},
		{"page POST without session", "POST", "/logout", nil, true, 401},
		{"page POST without token", "POST", "/logout", map[string]string{"Cookie": "s=sid"}, true, 403},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, tt.path, nil)
		for k, v := range tt.header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h := g.API(ok)
		if tt.page {
			h = g.Page(ok)
		}
		h.ServeHTTP(w, r)
		if w.Code != tt.want {
			t.Errorf("%s: %d; want %d", tt.name, w.Code, tt.want)
		}
		if tt.want == 303 && w.Header().Get("Location") != "/login?next=%2Fm%2Fx" {
			t.Errorf("%s: to %q; want the sign-in page, back to /m/x", tt.name, w.Header().Get("Location"))
		}
	}
}
