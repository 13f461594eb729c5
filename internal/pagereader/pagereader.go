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
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Reader is one member's browser: its own cookies for the receiver
// (session and sign-in nonce), redirects not followed. It speaks to the
// transport directly, with the few cookies it holds in a list, so the
// simulated phones of yidu-bench's page arm cost net/http's own work per
// request (a cookie jar, the client's redirect machinery and a cloned
// request each had made them 0.165 ms of a reader's CPU, now 0.11–0.12:
// docs/benchmarks.md).
type Reader struct {
	base, app, msgID string
	rt               http.RoundTripper
	timeout          time.Duration
	cookies          []*http.Cookie
	header           http.Header
	body             []byte // the last page's body, reused until the page is shown
	// View and Version are what the last Open was shown.
	View    string
	Version int
}

// New returns a reader of app's msgid on the receiver at base
// ("http://host:port"); each request gives up after timeout (0: never).
func New(base, app, msgID string, timeout time.Duration) *Reader {
	return &Reader{base: base, app: app, msgID: msgID, rt: http.DefaultTransport, timeout: timeout}
}

// UseTransport makes the reader's requests through rt (a shared pool of
// keep-alive connections).
func (r *Reader) UseTransport(rt http.RoundTripper) { r.rt = rt }

// SetHeader sends name: value with every request (X-Forwarded-For, as
// an ingress in front of the receiver adds it).
func (r *Reader) SetHeader(name, value string) {
	if r.header == nil {
		r.header = http.Header{}
	}
	r.header.Set(name, value)
}

// SetSession gives the reader a session cookie name=value for the
// receiver, as a member signed in earlier holds.
func (r *Reader) SetSession(name, value string) {
	r.keep(&http.Cookie{Name: name, Value: value})
}

// keep stores c as a browser would (a negative MaxAge, or an empty
// value, deletes it).
func (r *Reader) keep(c *http.Cookie) {
	for i, old := range r.cookies {
		if old.Name == c.Name {
			r.cookies = append(r.cookies[:i], r.cookies[i+1:]...)
			break
		}
	}
	if c.MaxAge >= 0 && c.Value != "" {
		r.cookies = append(r.cookies, &http.Cookie{Name: c.Name, Value: c.Value})
	}
}

// do sends req with the reader's cookies and headers and keeps the
// cookies the answer sets; cancel ends the request's timeout once its
// body is read.
func (r *Reader) do(req *http.Request) (resp *http.Response, cancel func(), err error) {
	cancel = func() {}
	if r.timeout > 0 {
		var ctx context.Context
		ctx, cancel = context.WithTimeout(req.Context(), r.timeout)
		req = req.WithContext(ctx)
	}
	for _, c := range r.cookies {
		req.AddCookie(c)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	resp, err = r.rt.RoundTrip(req)
	if err != nil {
		cancel()
		return nil, func() {}, err
	}
	for _, line := range resp.Header["Set-Cookie"] {
		if c, err := http.ParseSetCookie(line); err == nil {
			r.keep(c)
		}
	}
	return resp, cancel, nil
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

// attr returns the value of the first attribute name="…" in page.
func attr(page []byte, name string) (string, bool) {
	i := bytes.Index(page, []byte(name+`="`))
	if i < 0 {
		return "", false
	}
	rest := page[i+len(name)+2:]
	j := bytes.IndexByte(rest, '"')
	if j <= 0 {
		return "", false
	}
	return string(rest[:j]), true
}

// Open GETs the page; without a session it follows the sign-in with code
// (one use) and GETs the page again. It keeps the view shown.
func (r *Reader) Open(ctx context.Context, code func() string) error {
	return r.open(ctx, code, func() {})
}

// open is Open; signedIn is called before the GET of the page with a
// session.
func (r *Reader) open(ctx context.Context, code func() string, signedIn func()) error {
	page := r.base + "/r/" + url.PathEscape(r.app) + "/" + url.PathEscape(r.msgID)
	code1, loc, err := r.get(ctx, page)
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
		st, _, err := r.get(ctx, back)
		if err != nil {
			return err
		}
		if st != http.StatusFound {
			return &Status{"sign-in", st, string(r.body)}
		}
		signedIn()
		if code1, _, err = r.get(ctx, page); err != nil {
			return err
		}
	}
	if code1 != http.StatusOK {
		return &Status{"page", code1, string(r.body)}
	}
	v, okV := attr(r.body, "data-view")
	n, okN := attr(r.body, "data-version")
	version, err := strconv.Atoi(n)
	if !okV || !okN || err != nil {
		return &Status{"page without a view", code1, ""}
	}
	r.View, r.Version = html.UnescapeString(v), version
	// A phone lets the page go once shown; a storm of readers kept for
	// later phases (yidu-bench) must not hold every page.
	r.body = nil
	return nil
}

// Signal POSTs one event ("read_to_end", "acknowledged") of the view
// shown; nil on 200.
func (r *Reader) Signal(ctx context.Context, signal string) error {
	body := fmt.Sprintf(`{"view":%q,"version":%d,"event":%q}`, r.View, r.Version, signal)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/r/"+url.PathEscape(r.app)+"/"+url.PathEscape(r.msgID)+"/events",
		strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, cancel, err := r.do(req)
	if err != nil {
		return fmt.Errorf("pagereader: %s: %w", signal, err)
	}
	defer cancel()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return &Status{signal, resp.StatusCode, string(b)}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	return nil
}

// get GETs target, its body read into r.body.
func (r *Reader) get(ctx context.Context, target string) (code int, location string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, "", err
	}
	resp, cancel, err := r.do(req)
	if err != nil {
		return 0, "", fmt.Errorf("pagereader: GET: %w", err)
	}
	defer cancel()
	defer resp.Body.Close()
	buf := bytes.NewBuffer(r.body[:0])
	_, err = buf.ReadFrom(io.LimitReader(resp.Body, 4<<20))
	r.body = buf.Bytes()
	if err != nil {
		return 0, "", fmt.Errorf("pagereader: GET: %w", err)
	}
	return resp.StatusCode, resp.Header.Get("Location"), nil
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
