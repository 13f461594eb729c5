package dashboard

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/yidu-io/yidu"
)

// Fuzz targets for every parser of outside input. Seeds are inline; run
// e.g. go test -fuzz FuzzDecodeRegistration ./dashboard to explore.

func FuzzParseListLimit(f *testing.F) {
	for _, s := range []string{"", "1", "1000", "1001", "0", "-5", "99999999999999999999", "1.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseListLimit(s)
		if err == nil && (n < 1 || n > yidu.MaxListLimit) {
			t.Fatalf("parseListLimit(%q) = %d", s, n)
		}
	})
}

func FuzzListCursor(f *testing.F) {
	for _, s := range []string{"", "acme/hello", "a b", "\x00", strings.Repeat("x", 513)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseListCursor(s)
		if err == nil && (c != s || strings.ContainsAny(c, " \x00\n")) {
			t.Fatalf("parseListCursor(%q) = %q", s, c)
		}
	})
}

func FuzzDecodeRegistration(f *testing.F) {
	for _, s := range []string{
		`{"msgid":"n1","app":"hr","title":"年会","audience":{"userids":["zhangsan"]}}`,
		`{"app":"hr","title":"x","audience":{"all":true},"send":true,"sent_at":"2026-01-01T00:00:00Z"}`,
		`{"app":"hr","title":"x","audience":{"departments":[1,2]}}`,
		`{"app":"hr","title":"x","audience":{"departments":[0]}}`,
		`{"app":"hr","title":"x","audience":{"userids":[""]}}`,
		`{"app":"hr","title":"x","audience":{"all":true}}garbage`,
		`{"app":"hr","title":"x","sent_at":"0001-01-01T00:00:00Z","audience":{"all":true}}`,
		`[]`, `null`, ``, `{"msgid":"x@1"}`,
		`{"app":"hr","title":"x","body":"第一行\n第二行","url":"https://intra.example.com/p?a=1","send":true,"audience":{"all":true}}`,
		`{"app":"hr","title":"x","body":"\u0007","url":"javascript:alert(1)","audience":{"all":true}}`,
		`{"app":"hr","title":"x","url":"https://a b","audience":{"all":true}}`,
		`{"app":"hr","title":5,"audience":{"userids":[1]}}`,
		`{"app":"hr","title":"x","audience":{"tags":[7]},"send":true,"send_at":"明天 9:00"}`,
		`{"app":"hr","title":"x","audience":{"all":true},"sent_at":null,"send_at":null}`,
	} {
		f.Add([]byte(s))
	}
	app := yidu.App{Name: "hr", CorpID: "acme", AgentID: 1000002}
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, b []byte) {
		name, reg, err := decodeRegistration(bytes.NewReader(b))
		if err != nil {
			// Both are 400; a value of the wrong type or a time that is
			// not one names its field.
			if errors.Is(err, yidu.ErrInvalid) && fieldOf(err) == "" {
				t.Fatalf("decode error %v names no field", err)
			}
			if !errors.Is(err, errBadParam) && !errors.Is(err, yidu.ErrInvalid) {
				t.Fatalf("decode error %v is not a bad parameter or invalid (400)", err)
			}
			return
		}
		if name == "" {
			t.Fatalf("accepted %q without an app", b)
		}
		r := reg.Registration
		r.App = app
		if err := r.Validate(now); err != nil {
			if !errors.Is(err, yidu.ErrInvalid) {
				t.Fatalf("Validate error %v is not ErrInvalid (400)", err)
			}
			return
		}
		switch {
		case len(r.Audience.UserIDs) == 0 && len(r.Audience.Departments) == 0 && !r.Audience.All:
			t.Fatalf("accepted %q without an audience", b)
		case !yidu.MsgID(r.MsgID).Valid():
			t.Fatalf("accepted msgid %q", r.MsgID)
		case r.Title == "" || !utf8.ValidString(r.Title):
			t.Fatalf("accepted title %q", r.Title)
		case utf8.RuneCountInString(r.Body) > yidu.MaxBody || !utf8.ValidString(r.Body):
			t.Fatalf("accepted body %q", r.Body)
		case r.URL != "" && yidu.CheckURL(r.URL) != nil:
			t.Fatalf("accepted url %q", r.URL)
		case r.Send && yidu.CheckCard(r.Title, r.Body, r.URL) != nil:
			t.Fatalf("accepted a card WeCom would cut: %q", b)
		}
		for _, u := range r.Audience.UserIDs {
			if !yidu.UserID(u).Valid() {
				t.Fatalf("accepted userid %q", u)
			}
		}
		for _, d := range r.Audience.Departments {
			if d < 1 {
				t.Fatalf("accepted department %d", d)
			}
		}
	})
}

// FuzzRecipientsQuery drives the whole recipients and export handlers with
// arbitrary query strings: the answer is 200 or 400, never a 5xx or panic.
func FuzzRecipientsQuery(f *testing.F) {
	for _, s := range []string{"", "state=read&limit=2", "cursor=3&department=2", "q=%E5%BC%A0", "q=%ff", "limit=0", "department=99", "state=x&state=read", "%zz"} {
		f.Add(s)
	}
	fx := newFixture(f)
	f.Fuzz(func(t *testing.T, q string) {
		for _, p := range []string{"recipients", "export.csv"} {
			r := httptest.NewRequest("GET", "/api/v1/messages/hello/"+p, nil)
			r.URL.RawQuery = q
			r.Header.Set("Authorization", "Bearer "+acmeToken)
			w := httptest.NewRecorder()
			fx.h.ServeHTTP(w, r)
			if w.Code != http.StatusOK && w.Code != http.StatusBadRequest {
				t.Fatalf("%s?%s = %d: %s", p, q, w.Code, w.Body)
			}
		}
	})
}

// FuzzListFilter checks ?q= and ?app= of the list: what is accepted is a
// title search of at most maxTitleSearch printable characters and an app
// name of printable ASCII, and parsing never panics.
func FuzzListFilter(f *testing.F) {
	for _, s := range []string{"q=holiday", "q=%E5%81%87&app=hr", "app=a%20b", "q=%00", "q=100%25", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		lf, err := parseListFilter(q)
		if err != nil {
			return
		}
		if utf8.RuneCountInString(lf.title) > maxTitleSearch || !utf8.ValidString(lf.title) || strings.ContainsFunc(lf.title, unicode.IsControl) {
			t.Errorf("parseListFilter(%q) accepted title %q", raw, lf.title)
		}
		if len(lf.app) > 64 || strings.ContainsFunc(lf.app, func(r rune) bool { return r <= ' ' || r > '~' }) {
			t.Errorf("parseListFilter(%q) accepted app %q", raw, lf.app)
		}
	})
}
