// Package pagereader plays one member on the reading page (issue 39) as
// the page's own script does, without a browser: open /r/<app>/<msgid>,
// sign in through WeCom's OAuth2 (the state of the redirect and a code the
// fake WeCom maps to the member), read the view token off the page, then
// POST read_to_end and acknowledged. The fault tests and yidu-bench's page
// arm use it; it holds no decision of yidu's.
package pagereader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"time"
)

// Reader is one member's browser: its own cookie jar (session and
// sign-in nonce), redirects not followed.
type Reader struct {
	base, app, msgID string
	c                *http.Client
	// View and Version are what the last Open was shown.
	View    string
	Version int
}

// New returns a reader of app's msgid on the receiver at base
// ("http://host:port").
func New(base, app, msgID string, timeout time.Duration) *Reader {
	jar, _ := cookiejar.New(nil)
	return &Reader{base: base, app: app, msgID: msgID, c: &http.Client{Jar: jar, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// UseTransport makes the reader's requests through rt (a shared pool of
// keep-alive connections, or a proxy adding X-Forwarded-For).
func (r *Reader) UseTransport(rt http.RoundTripper) { r.c.Transport = rt }

// SetSession gives the reader a session cookie name=value for the
// receiver, as a member signed in earlier holds.
func (r *Reader) SetSession(name, value string) {
	u, err := url.Parse(r.base + "/r/")
	if err != nil {
		return
	}
	r.c.Jar.SetCookies(u, []*http.Cookie{{Name: name, Value: value, Path: "/r/"}})
}

// Status is an answer that was not the one wanted.
type Status struct {
	Step string
	Code int
	Body string
}

func (s *Status) Error() string {
	return fmt.Sprintf("pagereader: %s = %d %.120s", s.Step, s.Code, s.Body)
}

// CodeOf returns the HTTP status of err (0 when no answer came).
func CodeOf(err error) int {
	var s *Status
	if errors.As(err, &s) {
		return s.Code
	}
	return 0
}

var (
	viewRe    = regexp.MustCompile(`data-view="([^"]+)"`)
	versionRe = regexp.MustCompile(`data-version="([0-9]+)"`)
)

// Open GETs the page; without a session it follows the sign-in with code
// (one use) and GETs the page again. It keeps the view shown.
func (r *Reader) Open(ctx context.Context, code func() string) error {
	return r.open(ctx, code, func() {})
}

// open is Open; signedIn is called before the GET of the page with a
// session.
func (r *Reader) open(ctx context.Context, code func() string, signedIn func()) error {
	page := r.base + "/r/" + url.PathEscape(r.app) + "/" + url.PathEscape(r.msgID)
	code1, loc, body, err := r.get(ctx, page)
	if err != nil {
		return err
	}
	if code1 == http.StatusFound {
		u, err := url.Parse(loc)
		if err != nil {
			return fmt.Errorf("pagereader: sign-in redirect %q: %w", loc, err)
		}
		state := u.Query().Get("state")
		back := r.base + "/r/" + url.PathEscape(r.app) + "/signin?" + url.Values{"code": {code()}, "state": {state}}.Encode()
		st, _, b, err := r.get(ctx, back)
		if err != nil {
			return err
		}
		if st != http.StatusFound {
			return &Status{"sign-in", st, b}
		}
		signedIn()
		if code1, _, body, err = r.get(ctx, page); err != nil {
			return err
		}
	}
	if code1 != http.StatusOK {
		return &Status{"page", code1, body}
	}
	v, n := viewRe.FindStringSubmatch(body), versionRe.FindStringSubmatch(body)
	if v == nil || n == nil {
		return &Status{"page without a view", code1, ""}
	}
	r.View = html.UnescapeString(v[1])
	r.Version, _ = strconv.Atoi(n[1])
	return nil
}

// Signal POSTs one event ("read_to_end", "acknowledged") of the view
// shown; nil on 200.
func (r *Reader) Signal(ctx context.Context, signal string) error {
	body := fmt.Sprintf(`{"view":%q,"version":%d,"event":%q}`, r.View, r.Version, signal)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/r/"+url.PathEscape(r.app)+"/"+url.PathEscape(r.msgID)+"/events",
		bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.c.Do(req)
	if err != nil {
		return fmt.Errorf("pagereader: %s: %w", signal, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return &Status{signal, resp.StatusCode, string(b)}
	}
	return nil
}

func (r *Reader) get(ctx context.Context, target string) (code int, location, body string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, "", "", err
	}
	resp, err := r.c.Do(req)
	if err != nil {
		return 0, "", "", fmt.Errorf("pagereader: GET: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, resp.Header.Get("Location"), string(b), nil
}

// Steps are how long the parts of an Open took.
type Steps struct {
	// SignIn is the GET that was sent to sign in and the sign-in's
	// return (the code's exchange with WeCom), 0 with a session; Page the
	// GET of the page once signed in.
	SignIn, Page time.Duration
}

// OpenTimed is Open, timing its steps.
func (r *Reader) OpenTimed(ctx context.Context, code func() string) (Steps, error) {
	var st Steps
	start := time.Now()
	var pageAt time.Time
	err := r.open(ctx, code, func() { pageAt = time.Now() })
	if !pageAt.IsZero() {
		st.SignIn, st.Page = pageAt.Sub(start), time.Since(pageAt)
	} else if err == nil {
		st.Page = time.Since(start) // a session: the page at once
	}
	return st, err
}
