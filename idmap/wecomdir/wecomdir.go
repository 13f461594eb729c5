// Package wecomdir reads a corp's WeCom address list for idmap.Syncer
// through silenceper/wechat/v2's work client (work/addresslist):
// department/simplelist, department/list, user/list_id and user/simplelist
// (shared/wecom-protocol.md, Directory).
//
// silenceper's process-wide settings, which this package never changes
// (library code keeps no globals; cmd owns them):
//   - URLs are fixed to https://qyapi.weixin.qq.com. To talk to another
//     origin (a fake WeCom in tests and the demo) the process sets
//     util.SetURIModifier once; cmd does so from config wecom.api_base, tests
//     with fakewecom.URIModifier in TestMain.
//   - Requests go through util.DefaultHTTPClient, which is http.DefaultClient
//     (no timeout) unless the process replaces it.
//
// silenceper takes no context.Context. Client checks ctx before every request
// and fetches the access_token with ctx (gettoken is the one call silenceper
// lets us pass a context to); a request already sent runs to its end, bounded
// only by util.DefaultHTTPClient's timeout.
//
// The corp secret and access_token travel in URL queries, and silenceper puts
// URLs in its errors: every error leaving this package is rewritten without
// them.
package wecomdir

import (
	"context"
	"errors"
	"fmt"

	"github.com/silenceper/wechat/v2/util"
	"github.com/silenceper/wechat/v2/work/addresslist"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/wecom"
)

// Client reads one app's view of one corp's directory. Safe for concurrent use.
type Client struct {
	creds *wecom.Credentials
}

var _ idmap.Directory = (*Client)(nil)

// New returns a Client for the app whose secret is corpSecret. It talks to
// WeCom's origin, or wherever the process's util.SetURIModifier points it.
func New(corpID, corpSecret string) *Client {
	return &Client{creds: wecom.NewCredentials(corpID, corpSecret)}
}

// call runs fn with a valid token. A token WeCom rejects is fetched again,
// once.
func call[T any](ctx context.Context, c *Client, api string, fn func(*addresslist.Client) (T, error)) (T, error) {
	var zero T
	var stale *wecom.Session
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return zero, err
		}
		s := c.creds.Session(stale)
		// Fetched here with ctx; fn's own GetAccessToken then hits the cache.
		if _, err := s.Token.GetAccessTokenContext(ctx); err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return zero, ctxErr
			}
			return zero, c.wrap("gettoken", err)
		}
		if err := ctx.Err(); err != nil {
			return zero, err
		}
		v, err := fn(s.Work.GetAddressList())
		if err == nil {
			return v, nil
		}
		if attempt == 0 && wecom.StaleToken(err) {
			stale = s
			continue
		}
		return zero, c.wrap(api, err)
	}
}

// wrap turns silenceper's errors into ours: errcode answers become
// *idmap.APIError (the Syncer tells refusals from failures by it), anything
// else is wrapped with its URLs and credentials removed.
func (c *Client) wrap(api string, err error) error {
	var ce *util.CommonError
	if errors.As(err, &ce) {
		return &idmap.APIError{API: api, Code: ce.ErrCode, Msg: c.creds.Scrub(ce.ErrMsg)}
	}
	if code, msg, ok := c.creds.TokenError(err); ok {
		return &idmap.APIError{API: "gettoken", Code: code, Msg: msg}
	}
	return fmt.Errorf("wecomdir: %s: %w", api, c.creds.Clean(err))
}

// Departments lists department/simplelist (document/path/95350), the whole
// visible tree. silenceper always sends an id; we send 0 (no department)
// where the document says to leave id out. fakewecom treats 0 as absent;
// that real WeCom does too is not verified here.
func (c *Client) Departments(ctx context.Context) ([]yidu.Department, error) {
	list, err := call(ctx, c, "department/simplelist", func(d *addresslist.Client) ([]*addresslist.DepartmentID, error) {
		return d.DepartmentSimpleList(0)
	})
	if err != nil {
		return nil, err
	}
	depts := make([]yidu.Department, 0, len(list))
	for _, d := range list {
		if d != nil {
			depts = append(depts, yidu.Department{ID: int64(d.ID), ParentID: int64(d.ParentID), Order: int64(d.Order)})
		}
	}
	return depts, nil
}

// DepartmentNames lists department/list (document/path/90208) as id → name.
// Apps created recently are refused (an *idmap.APIError); the Syncer then
// keeps the stored names.
func (c *Client) DepartmentNames(ctx context.Context) (map[int64]string, error) {
	list, err := call(ctx, c, "department/list", func(d *addresslist.Client) ([]*addresslist.Department, error) {
		return d.DepartmentList()
	})
	if err != nil {
		return nil, err
	}
	names := make(map[int64]string, len(list))
	for _, d := range list {
		if d != nil {
			names[int64(d.ID)] = d.Name
		}
	}
	return names, nil
}

// UserIDs pages user/list_id (document/path/96067): limit ≤ 10000 pairs from
// cursor ("" to start).
func (c *Client) UserIDs(ctx context.Context, cursor string, limit int) ([]idmap.DeptUser, string, error) {
	resp, err := call(ctx, c, "user/list_id", func(d *addresslist.Client) (*addresslist.UserListIDResponse, error) {
		return d.UserListID(&addresslist.UserListIDRequest{Cursor: cursor, Limit: limit})
	})
	if err != nil {
		return nil, "", err
	}
	pairs := make([]idmap.DeptUser, 0, len(resp.DeptUser))
	for _, p := range resp.DeptUser {
		if p != nil {
			pairs = append(pairs, idmap.DeptUser{UserID: p.UserID, Department: int64(p.Department)})
		}
	}
	return pairs, resp.NextCursor, nil
}

// DepartmentUsers lists user/simplelist (document/path/90200): direct
// members of deptID with names.
func (c *Client) DepartmentUsers(ctx context.Context, deptID int64) ([]idmap.NamedUser, error) {
	id := int(deptID)
	if int64(id) != deptID {
		return nil, fmt.Errorf("wecomdir: user/simplelist: department %d out of range", deptID)
	}
	list, err := call(ctx, c, "user/simplelist", func(d *addresslist.Client) ([]*addresslist.UserList, error) {
		return d.UserSimpleList(id)
	})
	if err != nil {
		return nil, err
	}
	users := make([]idmap.NamedUser, 0, len(list))
	for _, u := range list {
		if u != nil {
			users = append(users, idmap.NamedUser{UserID: u.UserID, Name: u.Name})
		}
	}
	return users, nil
}
