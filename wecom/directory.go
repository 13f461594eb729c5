package wecom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"

	"github.com/silenceper/wechat/v2/util"

	"github.com/yidu-io/yidu"
)

// The address-list APIs, on WeCom's origin (util.SetURIModifier points
// them elsewhere).
const (
	apiOrigin          = "https://qyapi.weixin.qq.com/cgi-bin/"
	apiDeptSimpleList  = "department/simplelist"
	apiDeptList        = "department/list"
	apiUserSimpleList  = "user/simplelist"
	apiUserListID      = "user/list_id"
	apiTagList         = "tag/list"
	apiTagGet          = "tag/get"
	listIDLimit        = 10000 // user/list_id's largest page (doc path 96067)
	sourceAppSecret    = "app secret: department/simplelist, department/list, user/simplelist (the app's visible range)"
	sourceContactsSync = "contacts-sync secret: department/simplelist, user/list_id; names with the app secret (its visible range)"
)

// DirectoryOptions configure a Directory.
type DirectoryOptions struct {
	// ContactsSecret is the corp's contacts-sync secret (通讯录同步
	// Secret, 管理工具 → 通讯录同步); empty: the app's secret alone. It
	// lists the whole corp, which no app secret may (user/list_id, doc path
	// 96067).
	ContactsSecret string
}

// Directory reads one corp's WeCom directory for idmap's sync
// (idmap.Directory), with what the app may read:
//
//   - The app's secret alone (the default): department/simplelist (doc
//     path 95350) for the departments in the app's visible range
//     (可见范围), department/list (doc path 90208) for their names, and
//     user/simplelist (doc path 90200) per department for its direct
//     members with names and departments. A member in several departments
//     is listed once with all of them. The read is complete only when the
//     visible range holds the root department; members made visible one by
//     one, outside any visible department, cannot be listed this way.
//   - With the contacts-sync secret: department/simplelist and user/list_id
//     (doc path 96067, which takes no other secret) with its token for the
//     whole tree and every member and department; names with the app's
//     token, where its visible range reaches. Since 2022-08-15 the
//     contacts-sync secret may not read details (department/list,
//     user/list) from new IPs (doc paths 90208, 96260), so it is used for
//     ids only.
//
// Each secret has its own token cache (Credentials), and a token is used
// only for the calls listed for it. Safe for concurrent use.
type Directory struct {
	corpID   string
	app      *Credentials
	contacts *Credentials // nil: the app's secret alone
}

// NewDirectory returns the Directory of app's corp, read with app's secret
// and, when opts has one, the contacts-sync secret. It talks to WeCom's
// origin, or wherever the process's util.SetURIModifier points it.
func NewDirectory(app App, opts DirectoryOptions) (*Directory, error) {
	switch {
	case app.CorpID == "":
		return nil, errors.New("wecom: directory: a corp_id is required")
	case app.Secret == "":
		return nil, errors.New("wecom: directory: the app's secret is required")
	case opts.ContactsSecret == app.Secret:
		return nil, errors.New("wecom: directory: the contacts-sync secret given is the app's secret; " +
			"it is another one (管理工具 → 通讯录同步 → Secret)")
	}
	d := &Directory{corpID: app.CorpID, app: NewCredentials(app.CorpID, app.Secret)}
	if opts.ContactsSecret != "" {
		d.contacts = NewCredentials(app.CorpID, opts.ContactsSecret)
	}
	return d, nil
}

// List reads the corp's directory (see Directory). A refusal is an
// *APIError saying which API refused, the errcode and, where yidu knows,
// what to fix (e.g. user/list_id called with a secret that is not the
// contacts-sync one: 48002).
func (d *Directory) List(ctx context.Context) (yidu.Listing, error) {
	if d.contacts != nil {
		return d.listContacts(ctx)
	}
	return d.listApp(ctx)
}

// listApp reads the app's visible range with the app's secret alone.
func (d *Directory) listApp(ctx context.Context) (yidu.Listing, error) {
	l := yidu.Listing{Source: sourceAppSecret}
	if err := d.listDepartments(ctx, d.app, &l); err != nil {
		return l, err
	}
	var ms memberSet
	for _, dept := range l.Departments {
		users, err := d.departmentUsers(ctx, dept.ID)
		if err != nil {
			return l, err
		}
		for _, u := range users {
			// user/simplelist lists the departments the app sees the
			// member in (doc path 90200); the one asked about is one.
			if m, first := ms.add(u.UserID, append([]int64{dept.ID}, u.Department...)...); first {
				m.Name = u.Name
			}
		}
	}
	l.Members = ms.list()
	if err := d.readTags(ctx, &l); err != nil {
		return l, err
	}
	// The root department (parentid 0) in the visible range: the app sees
	// every department, so every member.
	l.Complete = slices.ContainsFunc(l.Departments, func(d yidu.Department) bool { return d.ParentID == 0 })
	return l, nil
}

// listContacts reads the whole corp with the contacts-sync secret, and
// names with the app's.
func (d *Directory) listContacts(ctx context.Context) (yidu.Listing, error) {
	l := yidu.Listing{Source: sourceContactsSync, Complete: true}
	if err := d.listDepartments(ctx, d.contacts, &l); err != nil {
		return l, err
	}
	var ms memberSet
	cursor := ""
	for page := 0; ; page++ {
		res, err := d.listID(ctx, cursor)
		if err != nil {
			return l, fmt.Errorf("%w (page %d)", err, page)
		}
		for _, p := range res.DeptUser {
			ms.add(p.UserID, p.Department)
		}
		if res.NextCursor == "" || res.NextCursor == cursor {
			break
		}
		cursor = res.NextCursor
	}

	// Names: user/simplelist with the app's token, per department it sees.
	visible, err := d.departmentIDs(ctx, d.app)
	if err != nil {
		return l, err
	}
	for _, dept := range visible {
		users, err := d.departmentUsers(ctx, dept.ID)
		if refused(err) {
			continue // the range changed meanwhile: names are optional
		}
		if err != nil {
			return l, err
		}
		for _, u := range users {
			if m := ms.byID[u.UserID]; m != nil && m.Name == "" {
				m.Name = u.Name
			}
		}
	}
	l.Members = ms.list()
	if err := d.readTags(ctx, &l); err != nil {
		return l, err
	}
	return l, nil
}

// listDepartments fills l's departments, read with c's token, and their
// names (nameDepartments).
func (d *Directory) listDepartments(ctx context.Context, c *Credentials, l *yidu.Listing) error {
	depts, err := d.departmentIDs(ctx, c)
	if err != nil {
		return err
	}
	if l.DepartmentNames, err = d.nameDepartments(ctx, depts, l); err != nil {
		return err
	}
	l.Departments = depts
	return nil
}

// memberSet collects the members a listing names, in the order first
// listed, each with every department it was listed in.
type memberSet struct {
	order []string
	byID  map[string]*yidu.Member
}

// add records userID in departments and returns its member; first is
// whether userID was listed for the first time.
func (s *memberSet) add(userID string, departments ...int64) (m *yidu.Member, first bool) {
	m = s.byID[userID]
	if m == nil {
		first = true
		if s.byID == nil {
			s.byID = map[string]*yidu.Member{}
		}
		m = &yidu.Member{UserID: userID}
		s.byID[userID] = m
		s.order = append(s.order, userID)
	}
	for _, id := range departments {
		if !slices.Contains(m.Departments, id) {
			m.Departments = append(m.Departments, id)
		}
	}
	return m, first
}

// list returns the members in the order first listed.
func (s *memberSet) list() []yidu.Member {
	out := make([]yidu.Member, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, *s.byID[id])
	}
	return out
}

// refused reports whether err is WeCom refusing the app a read it may
// simply not be allowed (48002) or outside its visible range (60011):
// where names are optional, such a read is skipped.
func refused(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && (ae.Code == ErrNoPermission || ae.Code == ErrNoPrivilege)
}

// nameDepartments fills depts' names from department/list with the app's
// token (doc path 90208: the app's visible range; names may be missing),
// and l's leaders from its department_leader (doc path 90208: a list of
// UserIDs per department, returned to a self-built app for the
// departments in its visible range; the contacts-sync secret may no
// longer read department/list from new IPs, so the app's token it is).
// It reports whether any name came; a refusal leaves names and leaders
// out (the stored ones stand).
func (d *Directory) nameDepartments(ctx context.Context, depts []yidu.Department, l *yidu.Listing) (bool, error) {
	var res struct {
		util.CommonError
		Department []struct {
			ID     int64    `json:"id"`
			Name   string   `json:"name"`
			Leader []string `json:"department_leader"`
		} `json:"department"`
	}
	err := d.get(ctx, d.app, apiDeptList, nil, &res)
	if refused(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	l.LeadersListed = true
	l.Leaders = map[int64][]string{}
	for _, dept := range res.Department {
		if len(dept.Leader) > 0 {
			l.Leaders[dept.ID] = dept.Leader
		}
	}
	names := make(map[int64]string, len(res.Department))
	for _, dept := range res.Department {
		names[dept.ID] = dept.Name
	}
	named := false
	for i := range depts {
		if n := names[depts[i].ID]; n != "" {
			depts[i].Name, named = n, true
		}
	}
	return named, nil
}

// departmentIDs lists department/simplelist (doc path 95350) with c's
// token: without id, the whole tree c may see.
func (d *Directory) departmentIDs(ctx context.Context, c *Credentials) ([]yidu.Department, error) {
	var res struct {
		util.CommonError
		DepartmentID []struct {
			ID       int64 `json:"id"`
			ParentID int64 `json:"parentid"`
			Order    int64 `json:"order"`
		} `json:"department_id"`
	}
	if err := d.get(ctx, c, apiDeptSimpleList, nil, &res); err != nil {
		return nil, err
	}
	depts := make([]yidu.Department, 0, len(res.DepartmentID))
	for _, x := range res.DepartmentID {
		depts = append(depts, yidu.Department{ID: x.ID, ParentID: x.ParentID, Order: x.Order})
	}
	return depts, nil
}

// simpleUser is one row of user/simplelist.
type simpleUser struct {
	UserID     string  `json:"userid"`
	Name       string  `json:"name"`
	Department []int64 `json:"department"`
}

// departmentUsers lists user/simplelist (doc path 90200) with the app's
// token: the direct members of dept (WeCom dropped fetch_child; a subtree
// is read department by department).
func (d *Directory) departmentUsers(ctx context.Context, dept int64) ([]simpleUser, error) {
	var res struct {
		util.CommonError
		UserList []simpleUser `json:"userlist"`
	}
	q := url.Values{"department_id": {strconv.FormatInt(dept, 10)}}
	if err := d.get(ctx, d.app, apiUserSimpleList, q, &res); err != nil {
		return nil, err
	}
	return res.UserList, nil
}

// listIDPage is one answer of user/list_id.
type listIDPage struct {
	util.CommonError
	NextCursor string `json:"next_cursor"`
	DeptUser   []struct {
		UserID     string `json:"userid"`
		Department int64  `json:"department"`
	} `json:"dept_user"`
}

// listID pages user/list_id (doc path 96067) with the contacts-sync
// token: member-department pairs from cursor ("" to start).
func (d *Directory) listID(ctx context.Context, cursor string) (listIDPage, error) {
	var res listIDPage
	body, err := json.Marshal(struct {
		Cursor string `json:"cursor,omitempty"`
		Limit  int    `json:"limit"`
	}{cursor, listIDLimit})
	if err != nil {
		return res, fmt.Errorf("wecom: %s: %w", apiUserListID, err)
	}
	err = call(ctx, d.contacts, apiUserListID, &res, func(ctx context.Context, tok string) ([]byte, error) {
		return util.HTTPPostContext(ctx, apiOrigin+apiUserListID+"?access_token="+url.QueryEscape(tok), body,
			map[string]string{"Content-Type": "application/json; charset=utf-8"})
	})
	return res, d.hint(err, true)
}

// get GETs api with c's token and the query q.
func (d *Directory) get(ctx context.Context, c *Credentials, api string, q url.Values, out any) error {
	err := call(ctx, c, api, out, func(ctx context.Context, tok string) ([]byte, error) {
		v := url.Values{"access_token": {tok}}
		for k, vs := range q {
			v[k] = vs
		}
		return util.HTTPGetContext(ctx, apiOrigin+api+"?"+v.Encode())
	})
	return d.hint(err, c == d.contacts)
}

// hint adds what to fix to the refusals an operator can cause: a wrong
// secret, or the wrong one of the two.
func (d *Directory) hint(err error, contacts bool) error {
	var ae *APIError
	if !errors.As(err, &ae) {
		return err
	}
	secret := "the app's secret"
	if contacts {
		secret = "the contacts-sync secret"
	}
	switch {
	case ae.API == "gettoken" && ae.Code == ErrInvalidCredential:
		ae.Hint = fmt.Sprintf("WeCom refused %s of corp %s (doc path 91039): check it", secret, d.corpID)
	case ae.API == apiUserListID && ae.Code == ErrNoPermission:
		ae.Hint = "user/list_id needs the contacts-sync secret (通讯录同步 Secret, doc path 96067), " +
			"and the contacts secret configured is not it (an app's secret?)"
	case ae.Code == ErrNoPermission:
		ae.Hint = fmt.Sprintf("%s may not call %s", secret, ae.API)
	case ae.Code == ErrNoPrivilege:
		ae.Hint = "outside the app's visible range (可见范围)"
	case ae.Code == ErrUntrustedIP:
		ae.Hint = "this server's IP is not among the app's trusted IPs (企业可信IP)"
	}
	return err
}

// readTags fills l's tags with the app's token: tag/list (doc path 90216)
// lists every tag of the corp to a self-built app (or the contacts-sync
// assistant), and tag/get (doc path 90213) each tag's users and
// departments, "无限制，但返回列表仅包含应用可见范围的成员": only members
// inside the app's visible range, which is whom the app can send to. A
// refusal of tag/list (48002) leaves tags out and the stored ones stand;
// a tag deleted between the two calls (40068, invalid tagid) is skipped.
func (d *Directory) readTags(ctx context.Context, l *yidu.Listing) error {
	var list struct {
		util.CommonError
		TagList []struct {
			TagID   int64  `json:"tagid"`
			TagName string `json:"tagname"`
		} `json:"taglist"`
	}
	err := d.get(ctx, d.app, apiTagList, nil, &list)
	if refused(err) {
		return nil
	}
	if err != nil {
		return err
	}
	tags := make([]yidu.Tag, 0, len(list.TagList))
	for _, t := range list.TagList {
		var res struct {
			util.CommonError
			TagName  string `json:"tagname"`
			UserList []struct {
				UserID string `json:"userid"`
			} `json:"userlist"`
			PartyList []int64 `json:"partylist"`
		}
		err := d.get(ctx, d.app, apiTagGet, url.Values{"tagid": {strconv.FormatInt(t.TagID, 10)}}, &res)
		var ae *APIError
		if errors.As(err, &ae) && ae.Code == ErrInvalidTagID {
			continue
		}
		if err != nil {
			return err
		}
		tag := yidu.Tag{ID: t.TagID, Name: t.TagName, Departments: res.PartyList}
		if tag.Name == "" {
			tag.Name = res.TagName
		}
		for _, u := range res.UserList {
			tag.UserIDs = append(tag.UserIDs, u.UserID)
		}
		tags = append(tags, tag)
	}
	l.Tags, l.TagsListed = tags, true
	return nil
}
