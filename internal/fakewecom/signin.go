package fakewecom

import (
	"crypto/rand"
	"encoding/hex"
	"html"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// The sign-in pages of WeCom, so a test or the demo can sign in "as" a
// member (issue 31):
//
//	GET /connect/oauth2/authorize?appid=&redirect_uri=&response_type=code&scope=snsapi_base&state=&agentid=
//	    OAuth2 web authorization inside WeCom's browser (doc path 91022)
//	GET /wwlogin/sso/login?login_type=CorpApp&appid=&agentid=&redirect_uri=&state=
//	    the web login of a self-built app (doc path 98152)
//
// Without as= each answers a page (in Chinese) listing the corp's members,
// each a link (a[data-userid]) that signs in as them, leaders marked
// with the departments they lead; with as=<UserID> it redirects to
// redirect_uri?code=&state=. A code so issued is good once, for 5
// minutes, as WeCom's are (doc path 91023); getuserinfo answers 40029
// for it after that. (Corp.Codes, seeded by tests, stay reusable.)

// codeTTL is how long an issued code is good (doc path 91023).
const codeTTL = 5 * time.Minute

// issuedCode is a code a sign-in page handed out.
type issuedCode struct {
	corpID, userID string
	expires        time.Time
}

// signIn serves the two sign-in pages; ok is false for another path.
func (s *Server) signIn(w http.ResponseWriter, r *http.Request) (ok bool) {
	q := r.URL.Query()
	switch r.URL.Path {
	case "/connect/oauth2/authorize":
		if q.Get("response_type") != "code" || q.Get("scope") != "snsapi_base" {
			http.Error(w, "fakewecom: response_type must be code and scope snsapi_base", http.StatusBadRequest)
			return true
		}
	case "/wwlogin/sso/login":
		if q.Get("login_type") != "CorpApp" {
			http.Error(w, "fakewecom: login_type must be CorpApp", http.StatusBadRequest)
			return true
		}
	default:
		return false
	}
	c := s.corps[q.Get("appid")]
	agentID, _ := strconv.ParseInt(q.Get("agentid"), 10, 64)
	var app *App
	if c != nil {
		for i := range c.Apps {
			if c.Apps[i].AgentID == agentID {
				app = &c.Apps[i]
			}
		}
	}
	if app == nil {
		http.Error(w, "fakewecom: unknown appid or agentid", http.StatusBadRequest)
		return true
	}
	back, err := url.Parse(q.Get("redirect_uri"))
	// WeCom refuses a redirect_uri outside the app's trusted domain
	// ("redirect_uri 与配置的授权完成回调域名不一致").
	if err != nil || back.Host == "" || !app.trusts(back) {
		http.Error(w, "fakewecom: redirect_uri is not in the app's trusted domain", http.StatusBadRequest)
		return true
	}
	as := q.Get("as")
	if as == "" {
		// WeCom's own pages are Chinese; so is the fake's. Each member
		// is a link (data-userid), and a department's leader says which
		// departments they lead, so a test or a demo user finds one.
		title := "企业微信登录（模拟）"
		if r.URL.Path == "/connect/oauth2/authorize" {
			title = "企业微信网页授权（模拟）"
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<!doctype html><html lang="zh-CN"><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>` +
			title + `</title><h1>` + title + `</h1><p>选择登录的成员：</p><ul id="members">`))
		for _, u := range c.Users {
			v := url.Values{}
			for k, vs := range q {
				v[k] = vs
			}
			v.Set("as", u.UserID)
			led := ""
			for _, d := range c.Departments {
				if slices.Contains(d.Leaders, u.UserID) {
					led += " · " + d.Name + "负责人"
				}
			}
			_, _ = w.Write([]byte(`<li><a data-userid="` + html.EscapeString(u.UserID) + `" href="` + html.EscapeString(r.URL.Path+"?"+v.Encode()) + `">` +
				html.EscapeString(u.Name+" ("+u.UserID+")") + `</a>` + html.EscapeString(led)))
		}
		_, _ = w.Write([]byte("</ul>"))
		return true
	}
	known := false
	for _, u := range c.Users {
		known = known || u.UserID == as
	}
	if !known {
		http.Error(w, "fakewecom: no such member", http.StatusBadRequest)
		return true
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	code := hex.EncodeToString(b[:])
	if s.codes == nil {
		s.codes = map[string]issuedCode{}
	}
	s.codes[code] = issuedCode{corpID: c.CorpID, userID: as, expires: s.now().Add(codeTTL)}
	bq := back.Query()
	bq.Set("code", code)
	bq.Set("state", q.Get("state"))
	back.RawQuery = bq.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
	return true
}

// useCode spends an issued code of corpID: ok is false for a code never
// issued, of another corp, used already or expired.
func (s *Server) useCode(corpID, code string) (userID string, ok bool) {
	ic, found := s.codes[code]
	if !found || ic.corpID != corpID {
		return "", false
	}
	delete(s.codes, code)
	if !s.now().Before(ic.expires) {
		return "", false
	}
	return ic.userID, true
}

// trusts reports whether u is in the app's trusted domain: any u without
// a RedirectDomain; else u's host and port when RedirectDomain has a port,
// or u's host on any port when it has none (the demo's dashboard and
// receiver sit on two ports of 127.0.0.1).
func (a *App) trusts(u *url.URL) bool {
	if a.RedirectDomain == "" {
		return true
	}
	if _, _, err := net.SplitHostPort(a.RedirectDomain); err == nil {
		return u.Host == a.RedirectDomain
	}
	return u.Hostname() == a.RedirectDomain
}
