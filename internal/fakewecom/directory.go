package fakewecom

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// simpleList answers user/simplelist: department_id's members the caller sees.
func simpleList(c *Corp, g grant, q url.Values) reply {
	id, err := strconv.Atoi(q.Get("department_id"))
	if err != nil || !hasDept(c, id) {
		return fail(ErrDepartmentMissing, "department not found")
	}
	if !g.seesDept(id) {
		return fail(ErrNoPrivilege, "no privilege to access/modify contact/party/agent")
	}
	list := []reply{}
	for _, u := range c.Users {
		if !slices.Contains(u.Departments, id) {
			continue
		}
		// Only the departments the caller sees (user/get, doc path
		// 90196: 仅返回该应用有查看权限的部门id).
		e := reply{"userid": u.UserID, "department": slices.DeleteFunc(slices.Clone(u.Departments), func(d int) bool { return !g.seesDept(d) })}
		if g.contacts || !g.app.NoMemberNames {
			e["name"] = u.Name
		}
		list = append(list, e)
	}
	return reply{"userlist": list}
}

// departments answers department/simplelist and, with names, department/list:
// the subtree of id (0: all) the caller sees.
func departments(c *Corp, g grant, q url.Values, names bool) reply {
	id, _ := strconv.Atoi(q.Get("id"))
	if id != 0 && !hasDept(c, id) {
		return fail(ErrDepartmentMissing, "department not found")
	}
	if id != 0 && !g.seesDept(id) {
		return fail(ErrNoPrivilege, "no privilege to access/modify contact/party/agent")
	}
	list := []reply{}
	for _, d := range subtree(c, id) {
		if !g.seesDept(d.ID) {
			continue
		}
		e := reply{"id": d.ID, "parentid": d.ParentID, "order": d.Order}
		if names {
			e["department_leader"] = append([]string{}, d.Leaders...)
			if g.contacts || !g.app.NoDepartmentNames {
				e["name"] = d.Name
			}
		}
		list = append(list, e)
	}
	if names {
		return reply{"department": list}
	}
	return reply{"department_id": list}
}

// tagList answers tag/list.
func tagList(c *Corp) reply {
	list := []reply{}
	for _, t := range c.Tags {
		list = append(list, reply{"tagid": t.ID, "tagname": t.Name})
	}
	return reply{"taglist": list}
}

// tagGet answers tag/get: the tag's members and departments the caller sees.
func tagGet(c *Corp, g grant, q url.Values) reply {
	id, err := strconv.Atoi(q.Get("tagid"))
	i := slices.IndexFunc(c.Tags, func(t Tag) bool { return t.ID == id })
	if err != nil || i < 0 {
		return fail(ErrInvalidTagID, "invalid tagid")
	}
	t := c.Tags[i]
	users := []reply{}
	for _, uid := range t.UserIDs {
		j := slices.IndexFunc(c.Users, func(u User) bool { return u.UserID == uid })
		if j >= 0 && g.seesUser(c.Users[j]) {
			users = append(users, reply{"userid": uid, "name": c.Users[j].Name})
		}
	}
	parties := []int{}
	for _, d := range t.Departments {
		if g.seesDept(d) {
			parties = append(parties, d)
		}
	}
	return reply{"tagname": t.Name, "userlist": users, "partylist": parties}
}

// agentGet answers agent/get: the app's own details (doc path 90227); another
// app's need that app's token.
func agentGet(g grant, q url.Values) reply {
	id, err := strconv.ParseInt(q.Get("agentid"), 10, 64)
	if err != nil || id != g.app.AgentID {
		return fail(ErrAnotherAgent, "not allow operate another agent with this accesstoken")
	}
	parties := g.app.VisibleDepartments
	if parties == nil {
		parties = []int{1}
	}
	users := []reply{}
	for _, u := range g.app.VisibleUsers {
		users = append(users, reply{"userid": u})
	}
	report := 0
	if g.app.ReportEnter {
		report = 1
	}
	return reply{"agentid": id, "name": "app", "allow_partys": reply{"partyid": parties},
		"allow_userinfos": reply{"user": users}, "allow_tags": reply{"tagid": []int{}},
		"isreportenter": report, "redirect_domain": g.app.RedirectDomain}
}

// getUserInfo answers auth/getuserinfo: the member an OAuth2 code names.
func (s *Server) getUserInfo(c *Corp, q url.Values) reply {
	id, ok := c.Codes[q.Get("code")]
	if !ok {
		id, ok = s.useCode(c.CorpID, q.Get("code"))
	}
	if !ok {
		return fail(ErrInvalidCode, "invalid code")
	}
	return reply{"userid": id}
}

func hasDept(c *Corp, id int) bool {
	return slices.ContainsFunc(c.Departments, func(d Department) bool { return d.ID == id })
}

// subtree returns department id and its descendants (all for id 0), in
// seeded order.
func subtree(c *Corp, id int) []Department {
	if id == 0 {
		return c.Departments
	}
	in := map[int]bool{id: true}
	for changed := true; changed; {
		changed = false
		for _, d := range c.Departments {
			if in[d.ParentID] && !in[d.ID] {
				in[d.ID] = true
				changed = true
			}
		}
	}
	var out []Department
	for _, d := range c.Departments {
		if in[d.ID] {
			out = append(out, d)
		}
	}
	return out
}

// listID pages the user-department pairs; the cursor is the next pair's
// offset (opaque to clients, as WeCom's is).
func (s *Server) listID(c *Corp, r *http.Request) reply {
	var req struct {
		Cursor string `json:"cursor"`
		Limit  int    `json:"limit"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		return fail(ErrBadParameter, "bad json")
	}
	if req.Limit == 0 {
		req.Limit = 10000
	}
	if req.Limit < 1 || req.Limit > 10000 {
		return fail(ErrBadParameter, "invalid limit")
	}
	type pair struct {
		UserID     string `json:"userid"`
		Department int    `json:"department"`
	}
	var pairs []pair
	for _, u := range c.Users {
		for _, d := range u.Departments {
			pairs = append(pairs, pair{u.UserID, d})
		}
	}
	start := 0
	if req.Cursor != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(req.Cursor, "c"))
		if err != nil || !strings.HasPrefix(req.Cursor, "c") || n < 0 || n > len(pairs) {
			return fail(ErrBadParameter, "invalid cursor")
		}
		start = n
	}
	end := min(start+req.Limit, len(pairs))
	next := ""
	if end < len(pairs) {
		next = "c" + strconv.Itoa(end)
	}
	return reply{"next_cursor": next, "dept_user": pairs[start:end]}
}
