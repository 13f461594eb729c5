package wecom

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/silenceper/wechat/v2/util"

	"github.com/yidu-io/yidu"
)

// CheckStatus is a check's verdict.
type CheckStatus string

// Verdicts of a Check.
const (
	CheckOK      CheckStatus = "ok"
	CheckWarn    CheckStatus = "warn" // works, with a limit worth knowing
	CheckFail    CheckStatus = "FAIL" // yidu cannot do its job until fixed
	CheckSkipped CheckStatus = "skip" // not configured
)

// Check is one finding of Doctor.
type Check struct {
	Name   string
	Status CheckStatus
	// Detail says what was seen and, for a refusal, what the errcode means
	// and what to fix. It names counts, never members.
	Detail string
}

// codeMeanings explains the errcodes an operator causes (global error
// codes, doc path 90313).
var codeMeanings = map[int64]string{
	ErrInvalidCredential: "the secret is wrong, or another app's (应用管理 → the app → Secret)",
	40013:                "the corp_id is wrong (我的企业 → 企业信息 → 企业ID)",
	40014:                "the access token is invalid",
	41001:                "no access token was sent",
	42001:                "the access token expired",
	45009:                "WeCom's frequency limit for this API: wait a minute",
	45033:                "too many concurrent calls to this API",
	48001:                "the app is not authorised for this API",
	ErrNoPermission:      "this secret may not call this API (the contacts-sync secret and an app's secret each have their own)",
	ErrNoPrivilege:       "outside the app's visible range (可见范围): widen it in the app's settings",
	ErrUntrustedIP:       "this server's IP is not among the app's 企业可信IP (apps created since 2022-06-20 must list every egress IP)",
	82001:                "nobody valid to send to: every member outside the app's visible range or unknown",
	301002:               "the access token belongs to another app (agent_id and secret of different apps)",
}

// Explain returns what an errcode means and what to fix, or "" when yidu
// has nothing to add to WeCom's errmsg.
func Explain(code int64) string { return codeMeanings[code] }

// Doctor checks, without changing or sending anything, what app's secret
// and (when given) the contacts-sync secret can do for yidu: a token each
// (gettoken, doc path 91039), the departments and members the app sees
// (department/simplelist 95350, department/list 90208, user/simplelist
// 90200), the callback IPs (getcallbackip, which also shows whether this
// server's IP is trusted: 60020), and with the contacts-sync secret a
// first page of user/list_id (96067).
//
// trusted are the URLs whose host must be the app's trusted domain
// (可信域名): the OAuth2 redirect_uri of tracked links and of sign-in
// with WeCom is refused otherwise ("redirect_uri需使用应用可信域名"). WeCom
// asks the domain to equal the URL's host exactly, port included
// (构造网页授权链接, doc path 91022).
func Doctor(ctx context.Context, app App, contactsSecret string, trusted ...TrustedURL) []Check {
	d, err := NewDirectory(app, DirectoryOptions{ContactsSecret: contactsSecret})
	if err != nil {
		return []Check{{Name: "configuration", Status: CheckFail, Detail: err.Error()}}
	}
	c := &doctor{ctx: ctx, d: d}
	if !c.add("gettoken (app secret)", d.hint(c.token(d.app), false), "a token for the app's secret", CheckOK) {
		return append(c.out, skipped(contactsSecret)...)
	}
	c.agent(app.AgentID, trusted)
	c.callbackIPs()
	c.directory()
	if d.contacts == nil {
		return append(c.out, skipped(contactsSecret)...)
	}
	if !c.add("gettoken (contacts-sync secret)", d.hint(c.token(d.contacts), true), "a token for the contacts-sync secret", CheckOK) {
		return c.out
	}
	page, err := d.listID(ctx, "")
	c.add("user/list_id (contacts-sync secret)", err, fmt.Sprintf("%d member-department pairs on the first page", len(page.DeptUser)), CheckOK)
	return c.out
}

// doctor is one run of Doctor: the checks so far.
type doctor struct {
	ctx context.Context
	d   *Directory
	out []Check
}

// add adds the check name: failed with err, else okStatus with detail ok.
// It reports whether it passed.
func (c *doctor) add(name string, err error, ok string, okStatus CheckStatus) bool {
	if err != nil {
		c.out = append(c.out, failure(name, err))
		return false
	}
	c.out = append(c.out, Check{Name: name, Status: okStatus, Detail: ok})
	return true
}

// token gets a token for cr.
func (c *doctor) token(cr *Credentials) error {
	var res struct{ util.CommonError }
	return call(c.ctx, cr, "gettoken", &res, func(ctx context.Context, tok string) ([]byte, error) {
		return []byte(`{"errcode":0}`), nil // the token itself is the check
	})
}

// agent checks the app's details: its secret is its own, whether it
// reports app entries, and its trusted domain against trusted.
func (c *doctor) agent(agentID int64, trusted []TrustedURL) {
	var agent struct {
		util.CommonError
		AllowPartys struct {
			PartyID []int64 `json:"partyid"`
		} `json:"allow_partys"`
		AllowUserinfos struct {
			User []struct {
				UserID string `json:"userid"`
			} `json:"user"`
		} `json:"allow_userinfos"`
		IsReportEnter  int    `json:"isreportenter"`
		RedirectDomain string `json:"redirect_domain"`
	}
	err := c.d.get(c.ctx, c.d.app, "agent/get", url.Values{"agentid": {fmt.Sprint(agentID)}}, &agent)
	if !c.add("agent/get (app secret)", err, fmt.Sprintf("agent %d is this secret's app; visible range: %d departments, %d single members",
		agentID, len(agent.AllowPartys.PartyID), len(agent.AllowUserinfos.User)), CheckOK) {
		return
	}
	c.out = append(c.out, Check{Name: "上报进入应用事件", Status: CheckOK, Detail: fmt.Sprintf("isreportenter=%d (needed only when enter_agent is one of the app's read_signals)", agent.IsReportEnter)})
	if agent.IsReportEnter == 0 {
		c.out[len(c.out)-1].Status = CheckWarn
		c.out[len(c.out)-1].Detail = "off: no enter_agent events (fine unless enter_agent is one of the app's read_signals)"
	}
	dom := Check{Name: "OAuth2 trusted domain", Status: CheckOK, Detail: "redirect_domain " + agent.RedirectDomain}
	if agent.RedirectDomain == "" {
		dom = Check{Name: "OAuth2 trusted domain", Status: CheckWarn, Detail: "none set (可信域名): tracked links cannot identify members"}
	}
	c.out = append(c.out, dom)
	for _, t := range trusted {
		c.out = append(c.out, trustedCheck(t, agent.RedirectDomain))
	}
}

// callbackIPs checks that this server's IP is trusted (getcallbackip).
func (c *doctor) callbackIPs() {
	var ips struct {
		util.CommonError
		IPList []string `json:"ip_list"`
	}
	err := c.d.get(c.ctx, c.d.app, "getcallbackip", nil, &ips)
	c.add("getcallbackip (app secret)", err, fmt.Sprintf("%d WeCom callback source ranges; this server's IP is trusted", len(ips.IPList)), CheckOK)
}

// directory checks what the app's secret sees of the directory: its
// departments, their names and the first one's members.
func (c *doctor) directory() {
	d := c.d
	depts, err := d.departmentIDs(c.ctx, d.app)
	root := false
	for _, dp := range depts {
		root = root || dp.ParentID == 0
	}
	switch {
	case err != nil:
		c.add("department/simplelist (app secret)", err, "", CheckOK)
	case len(depts) == 0:
		c.out = append(c.out, Check{Name: "department/simplelist (app secret)", Status: CheckFail,
			Detail: "the app sees no department: set its visible range (可见范围) to the departments that receive notices"})
	case root:
		c.add("department/simplelist (app secret)", nil, fmt.Sprintf("%d departments; the visible range holds the root: a complete directory", len(depts)), CheckOK)
	default:
		c.add("department/simplelist (app secret)", nil, fmt.Sprintf("%d departments, not the root: a partial directory "+
			"(members outside the visible range are reported by the sync, not marked left; set contacts_secret or widen the range for a complete one)", len(depts)), CheckWarn)
	}
	if err != nil || len(depts) == 0 {
		return
	}
	named, err := d.nameDepartments(c.ctx, depts, &yidu.Listing{})
	switch {
	case err != nil:
		c.add("department/list (app secret)", err, "", CheckOK)
	case named:
		c.add("department/list (app secret)", nil, "department names", CheckOK)
	default:
		c.add("department/list (app secret)", nil, "no department names for this app: the dashboard shows department ids", CheckWarn)
	}
	users, err := d.departmentUsers(c.ctx, depts[0].ID)
	if err != nil {
		c.add("user/simplelist (app secret)", err, "", CheckOK)
		return
	}
	names := 0
	for _, u := range users {
		if u.Name != "" && u.Name != u.UserID {
			names++
		}
	}
	status := CheckOK
	if len(users) > 0 && names == 0 {
		status = CheckWarn
	}
	c.add("user/simplelist (app secret)", nil, fmt.Sprintf("department %d: %d direct members, %d with a name", depts[0].ID, len(users), names), status)
}

func skipped(contactsSecret string) []Check {
	if contactsSecret != "" {
		return nil
	}
	return []Check{{Name: "contacts-sync secret", Status: CheckSkipped,
		Detail: "contacts_secret not set: the directory is read with the app's secret within its visible range (optional, doc path 96067)"}}
}

// failure turns a failed call into a FAIL with its errcode explained.
func failure(name string, err error) Check {
	var ae *APIError
	if errors.As(err, &ae) {
		detail := fmt.Sprintf("errcode %d: %s", ae.Code, ae.Msg)
		if m := Explain(ae.Code); m != "" {
			detail += " — " + m
		}
		if ae.Hint != "" {
			detail += " (" + ae.Hint + ")"
		}
		return Check{Name: name, Status: CheckFail, Detail: detail}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // the URL carries the token
	}
	return Check{Name: name, Status: CheckFail, Detail: "WeCom unreachable: " + err.Error()}
}

// TrustedURL is a URL whose host must be the app's trusted domain, and
// what yidu needs it for ("sign-in with WeCom (dashboard.public_url)").
type TrustedURL struct {
	For string
	URL string
	// Required makes a mismatch FAIL (sign-in cannot work); otherwise
	// it is a warning (tracked links fall back to the card's button).
	Required bool
}

// trustedCheck compares t's host with the app's redirect_domain: equal,
// case aside, port included, a default port left out as browsers do.
func trustedCheck(t TrustedURL, domain string) Check {
	c := Check{Name: "trusted domain for " + t.For}
	u, err := url.Parse(t.URL)
	if err != nil || u.Host == "" {
		c.Status, c.Detail = CheckFail, fmt.Sprintf("%q is not a URL with a host", t.URL)
		return c
	}
	host := strings.ToLower(u.Host)
	if p := u.Port(); (u.Scheme == "https" && p == "443") || (u.Scheme == "http" && p == "80") {
		host = strings.ToLower(u.Hostname())
	}
	bad := CheckWarn
	if t.Required {
		bad = CheckFail
	}
	switch {
	case domain == "":
		c.Status, c.Detail = bad, "no trusted domain (可信域名) is set; set it to "+host+" (应用管理 → the app → 网页授权及JS-SDK)"
	case !strings.EqualFold(domain, host):
		c.Status, c.Detail = bad, fmt.Sprintf("%s is not the trusted domain %s: WeCom refuses the redirect (redirect_uri需使用应用可信域名); the domain must be exactly the host, port included", host, domain)
	default:
		c.Status, c.Detail = CheckOK, host+" is the trusted domain"
	}
	return c
}
