package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
)

type listing struct{ l yidu.Listing }

func (d *listing) List(context.Context) (yidu.Listing, error) { return d.l, nil }

// fakeOAuth exchanges a code at the fake WeCom's getuserinfo, as
// wecom.OAuth does at WeCom's.
type fakeOAuth struct{ base string }

func (o fakeOAuth) UserID(ctx context.Context, corpID string, agentID int64, code string) (string, error) {
	get := func(path string, q url.Values) (map[string]any, error) {
		resp, err := http.Get(o.base + path + "?" + q.Encode())
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var out map[string]any
		return out, json.NewDecoder(resp.Body).Decode(&out)
	}
	tok, err := get("/cgi-bin/gettoken", url.Values{"corpid": {corpID}, "corpsecret": {"sec"}})
	if err != nil {
		return "", err
	}
	out, err := get("/cgi-bin/auth/getuserinfo", url.Values{"access_token": {fmt.Sprint(tok["access_token"])}, "code": {code}})
	if err != nil {
		return "", err
	}
	if out["errcode"] != float64(0) {
		return "", fmt.Errorf("getuserinfo: %v", out["errcode"])
	}
	return fmt.Sprint(out["userid"]), nil
}

// TestWeComSignIn signs in through the fake WeCom's web login as an
// admin member, refuses a forged state, a replayed callback, another
// browser's state and a next= to another host, and signs the member out
// once a sync marks them left.
func TestWeComSignIn(t *testing.T) {
	if !testenv.Real() {
		t.Skip("YIDU_TEST_REAL=1 runs it against MariaDB and Redis")
	}
	ctx := context.Background()
	m, err := idmap.New(testenv.MySQL(t), idmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dirl := &listing{l: yidu.Listing{Complete: true, Departments: []yidu.Department{{ID: 1, Name: "总部"}},
		Members: []yidu.Member{{UserID: "boss", Departments: []int64{1}}, {UserID: "clerk", Departments: []int64{1}}}}}
	syncer, err := idmap.NewSyncer(m, map[string]idmap.Directory{"acme": dirl}, idmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := syncer.Sync(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	acc, err := access.New(access.Config{Roles: []access.RoleGrant{{UserID: "boss", Grant: access.Grant{Role: yidu.RoleAdmin, Scope: yidu.Scope{Corp: "acme"}}}}}, m, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	fw := fakewecom.New(fakewecom.Corp{CorpID: "acme", Apps: []fakewecom.App{{AgentID: 1000002, Secret: "sec", RedirectDomain: "yidu.example.com"}},
		Users: []fakewecom.User{{UserID: "boss", Name: "Boss"}, {UserID: "clerk", Name: "Clerk"}}})
	wbase := fakewecom.Start(t, fw)
	rdb, prefix := testenv.Redis(t)
	rec := &recorderFake{}
	f := newFixtureOpts(t, false, func(o *deps) {
		o.Audit = rec
		o.PublicURL = "https://yidu.example.com"
		o.WeCom = &WeComLogin{CorpID: "acme", AgentID: 1000002, Endpoints: access.Endpoints{OAuthBase: wbase, LoginBase: wbase},
			Access: acc, States: access.NewStates(rdb, prefix), OAuth: fakeOAuth{base: wbase}}
	})
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	// start returns the nonce cookie and WeCom's redirect back (code, state).
	start := func(next, ua, as string) (*http.Cookie, url.Values) {
		t.Helper()
		r := httptest.NewRequest("GET", "/login/wecom?next="+url.QueryEscape(next), nil)
		r.Header.Set("User-Agent", ua)
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, r)
		if w.Code != http.StatusFound {
			t.Fatalf("start = %d %s", w.Code, w.Body)
		}
		to, _ := url.Parse(w.Header().Get("Location"))
		wantPath := "/wwlogin/sso/login"
		if access.InWeCom(ua) {
			wantPath = "/connect/oauth2/authorize"
		}
		if to.Path != wantPath || to.Query().Get("redirect_uri") != "https://yidu.example.com/login/wecom/callback" {
			t.Fatalf("start redirects to %s", to)
		}
		q := to.Query()
		q.Set("as", as)
		resp, err := noFollow.Get(wbase + to.Path + "?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		back, _ := url.Parse(resp.Header.Get("Location"))
		return w.Result().Cookies()[0], back.Query()
	}
	callback := func(nonce *http.Cookie, q url.Values) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/login/wecom/callback?"+q.Encode(), nil)
		if nonce != nil {
			r.AddCookie(nonce)
		}
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, r)
		return w
	}
	session := func(w *httptest.ResponseRecorder) *http.Cookie {
		for _, c := range w.Result().Cookies() {
			if c.Name == sessionCookie && c.Value != "" {
				return c
			}
		}
		return nil
	}

	nonce, back := start("//evil.example/x", "Mozilla/5.0 wxwork/4.1", "boss")
	w := callback(nonce, back)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/" || session(w) == nil {
		t.Fatalf("callback = %d to %q (next was another host)", w.Code, w.Header().Get("Location"))
	}
	sess := session(w)
	api := func() int {
		r := httptest.NewRequest("GET", "/api/v1/messages/hello/progress", nil)
		r.AddCookie(sess)
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, r)
		return w.Code
	}
	if got := api(); got != http.StatusOK {
		t.Fatalf("boss's progress = %d, want 200", got)
	}
	if w := callback(nonce, back); w.Code != http.StatusBadRequest || session(w) != nil {
		t.Errorf("replayed callback = %d, want 400 and no session", w.Code)
	}
	n2, b2 := start("/m/hello", "Chrome", "boss")
	forged := url.Values{"code": b2["code"], "state": {"forged"}}
	if w := callback(n2, forged); w.Code != http.StatusBadRequest || session(w) != nil {
		t.Errorf("forged state = %d, want 400", w.Code)
	}
	_, b3 := start("/m/hello", "Chrome", "boss")
	if w := callback(n2, b3); w.Code != http.StatusBadRequest || session(w) != nil {
		t.Errorf("another browser's state = %d, want 400", w.Code)
	}
	n4, b4 := start("/m/hello", "Chrome", "clerk") // a member without a role
	if w := callback(n4, b4); w.Code != http.StatusForbidden || session(w) != nil {
		t.Errorf("a member without a role = %d, want 403", w.Code)
	}
	n5, b5 := start("/m/hello?x=1", "Chrome", "boss")
	if w := callback(n5, b5); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/m/hello?x=1" {
		t.Errorf("next path = %d %q", w.Code, w.Header().Get("Location"))
	}

	// One audit row per sign-in: the UserID as actor once WeCom named one,
	// never the code or the state; a forged, replayed or expired state
	// is anyone's to send and writes none (issue 38).
	var got []string
	for _, e := range rec.events {
		got = append(got, e.Actor+":"+e.ActorKind+":"+e.Role+":"+e.CorpID+":"+string(e.Action)+":"+e.Outcome)
		for _, secret := range []string{back.Get("code"), back.Get("state"), sess.Value} {
			if strings.Contains(e.Actor+e.Detail+e.UserAgent, secret) {
				t.Errorf("audit event %+v carries a code, state or cookie", e)
			}
		}
	}
	want := []string{"boss:wecom:admin:acme:sign_in:ok",
		"clerk:wecom::acme:sign_in_failed:refused", "boss:wecom:admin:acme:sign_in:ok"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("audit events\n%v\nwant\n%v", got, want)
	}

	// A page asked for without a session: inside WeCom's browser straight
	// to WeCom's sign-in and back to it; elsewhere to the sign-in page,
	// which offers WeCom and keeps next for the password form.
	for ua, want := range map[string]string{"Mozilla/5.0 (iPhone) wxwork/4.1.20": "/login/wecom?next=%2Fm%2Fhello", "Chrome": "/login?next=%2Fm%2Fhello"} {
		r := httptest.NewRequest("GET", "/m/hello", nil)
		r.Header.Set("User-Agent", ua)
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, r)
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != want {
			t.Errorf("GET /m/hello as %q = %d %q; want 303 to %s", ua, w.Code, w.Header().Get("Location"), want)
		}
	}
	if w := f.page(nil, "/login?next=%2Fm%2Fhello"); !strings.Contains(w.Body.String(), `href="/login/wecom?next=%2Fm%2Fhello"`) ||
		!strings.Contains(w.Body.String(), `name="next" value="/m/hello"`) {
		t.Errorf("sign-in page: no WeCom link or next field: %s", w.Body)
	}

	// boss leaves; at the next sync the session ends.
	dirl.l.Members = dirl.l.Members[1:]
	if _, err := syncer.Sync(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if got := api(); got != http.StatusUnauthorized {
		t.Errorf("after leaving: progress = %d, want 401", got)
	}
}
