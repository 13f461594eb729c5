// Package wecomdir reads a corp's WeCom address list over HTTP for
// idmap.Syncer: gettoken, department/simplelist, department/list,
// user/list_id and user/simplelist (shared/wecom-protocol.md, Directory).
//
// It stands in for silenceper/wechat/v2's work/addresslist client, which
// cannot be built from this module's go.sum (its cache package needs
// gomemcache and go-redis/v8). Unlike silenceper it takes a context per call,
// a base URL per client (tests point it at internal/fakewecom without the
// process-wide util.SetURIModifier) and never puts the secret or token in
// its errors.
package wecomdir

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/yidu-io/yidu/idmap"
)

// DefaultBaseURL is WeCom's server API origin.
const DefaultBaseURL = "https://qyapi.weixin.qq.com"

// maxBody bounds one answer; user/list_id's 10000 pairs are well under it.
const maxBody = 32 << 20

// WeCom errcodes meaning the access_token must be fetched again
// (document/path/90313): 40014 invalid, 42001 expired.
const (
	errInvalidToken = 40014
	errExpiredToken = 42001
)

// Client reads one app's view of one corp's directory. Safe for concurrent use.
type Client struct {
	base   string
	corpID string
	secret string
	hc     *http.Client

	mu      sync.Mutex
	token   string
	expires time.Time
}

var _ idmap.Directory = (*Client)(nil)

// New returns a Client for the app with corpSecret. baseURL "" is WeCom;
// hc nil is a client with a 30 s timeout.
func New(corpID, corpSecret, baseURL string, hc *http.Client) *Client {
	if baseURL == "" {
		baseURL = DefaultBaseURL
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{base: baseURL, corpID: corpID, secret: corpSecret, hc: hc}
}

// accessToken returns a cached token, fetching one when none is valid.
// WeCom's tokens last expires_in (7200) seconds (document/path/91039); the
// token is renewed five minutes early.
func (c *Client) accessToken(ctx context.Context, refresh bool) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !refresh && c.token != "" && time.Now().Before(c.expires) {
		return c.token, nil
	}
	var out struct {
		Errcode     int64  `json:"errcode"`
		Errmsg      string `json:"errmsg"`
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
	}
	q := url.Values{"corpid": {c.corpID}, "corpsecret": {c.secret}}
	if err := c.do(ctx, "gettoken", http.MethodGet, "/cgi-bin/gettoken?"+q.Encode(), nil, &out); err != nil {
		return "", err
	}
	if out.Errcode != 0 {
		return "", &idmap.APIError{API: "gettoken", Code: out.Errcode, Msg: out.Errmsg}
	}
	if out.AccessToken == "" {
		return "", errors.New("wecomdir: gettoken: empty access_token")
	}
	c.token = out.AccessToken
	c.expires = time.Now().Add(time.Duration(max(out.ExpiresIn-300, 60)) * time.Second)
	return c.token, nil
}

// call sends one authenticated request and decodes the answer into out,
// which must embed status. A rejected token is fetched again once.
func (c *Client) call(ctx context.Context, api, method, path string, q url.Values, body any, out interface{ apiStatus() *status }) error {
	for attempt := 0; ; attempt++ {
		tok, err := c.accessToken(ctx, attempt > 0)
		if err != nil {
			return err
		}
		qq := url.Values{"access_token": {tok}}
		for k, v := range q {
			qq[k] = v
		}
		if err := c.do(ctx, api, method, path+"?"+qq.Encode(), body, out); err != nil {
			return err
		}
		st := out.apiStatus()
		if (st.Errcode == errInvalidToken || st.Errcode == errExpiredToken) && attempt == 0 {
			*st = status{}
			continue
		}
		if st.Errcode != 0 {
			return &idmap.APIError{API: api, Code: st.Errcode, Msg: st.Errmsg}
		}
		return nil
	}
}

// do performs the HTTP exchange. Errors name the API, never the URL: its
// query holds the secret or the token.
func (c *Client) do(ctx context.Context, api, method, pathQuery string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("wecomdir: %s: %w", api, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+pathQuery, rd)
	if err != nil {
		return fmt.Errorf("wecomdir: %s: bad request", api)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // drop the URL
		}
		return fmt.Errorf("wecomdir: %s: %w", api, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("wecomdir: %s: http status %d", api, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(out); err != nil {
		return fmt.Errorf("wecomdir: %s: decode: %w", api, err)
	}
	return nil
}

type status struct {
	Errcode int64  `json:"errcode"`
	Errmsg  string `json:"errmsg"`
}

func (s *status) apiStatus() *status { return s }

// Departments lists department/simplelist (document/path/95350); without an
// id WeCom lists the whole visible tree.
func (c *Client) Departments(ctx context.Context) ([]idmap.Department, error) {
	var out struct {
		status
		DepartmentID []struct {
			ID       int64 `json:"id"`
			ParentID int64 `json:"parentid"`
			Order    int64 `json:"order"`
		} `json:"department_id"`
	}
	if err := c.call(ctx, "department/simplelist", http.MethodGet, "/cgi-bin/department/simplelist", nil, nil, &out); err != nil {
		return nil, err
	}
	depts := make([]idmap.Department, 0, len(out.DepartmentID))
	for _, d := range out.DepartmentID {
		depts = append(depts, idmap.Department{ID: d.ID, ParentID: d.ParentID, Order: d.Order})
	}
	return depts, nil
}

// DepartmentNames lists department/list (document/path/90208) as id → name.
func (c *Client) DepartmentNames(ctx context.Context) (map[int64]string, error) {
	var out struct {
		status
		Department []struct {
			ID   int64  `json:"id"`
			Name string `json:"name"`
		} `json:"department"`
	}
	if err := c.call(ctx, "department/list", http.MethodGet, "/cgi-bin/department/list", nil, nil, &out); err != nil {
		return nil, err
	}
	names := make(map[int64]string, len(out.Department))
	for _, d := range out.Department {
		names[d.ID] = d.Name
	}
	return names, nil
}

// UserIDs pages user/list_id (document/path/96067).
func (c *Client) UserIDs(ctx context.Context, cursor string, limit int) ([]idmap.DeptUser, string, error) {
	var out struct {
		status
		NextCursor string `json:"next_cursor"`
		DeptUser   []struct {
			UserID     string `json:"userid"`
			Department int64  `json:"department"`
		} `json:"dept_user"`
	}
	req := struct {
		Cursor string `json:"cursor,omitempty"`
		Limit  int    `json:"limit"`
	}{cursor, limit}
	if err := c.call(ctx, "user/list_id", http.MethodPost, "/cgi-bin/user/list_id", nil, req, &out); err != nil {
		return nil, "", err
	}
	pairs := make([]idmap.DeptUser, 0, len(out.DeptUser))
	for _, p := range out.DeptUser {
		pairs = append(pairs, idmap.DeptUser{UserID: p.UserID, Department: p.Department})
	}
	return pairs, out.NextCursor, nil
}

// DepartmentUsers lists user/simplelist (document/path/90200): direct
// members of deptID with names.
func (c *Client) DepartmentUsers(ctx context.Context, deptID int64) ([]idmap.NamedUser, error) {
	var out struct {
		status
		UserList []struct {
			UserID string `json:"userid"`
			Name   string `json:"name"`
		} `json:"userlist"`
	}
	q := url.Values{"department_id": {strconv.FormatInt(deptID, 10)}}
	if err := c.call(ctx, "user/simplelist", http.MethodGet, "/cgi-bin/user/simplelist", q, nil, &out); err != nil {
		return nil, err
	}
	users := make([]idmap.NamedUser, 0, len(out.UserList))
	for _, u := range out.UserList {
		users = append(users, idmap.NamedUser{UserID: u.UserID, Name: u.Name})
	}
	return users, nil
}
