package process

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
)

// csrfMeta is the session's CSRF token in a dashboard page.
var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`)

// csrfOf is the CSRF token of c's session, as the page's script reads
// it from any page.
func csrfOf(t *testing.T, c *http.Client, m *Main) string {
	t.Helper()
	resp, err := c.Get("http://" + m.DashboardAddr + "/")
	testenv.Check(t, "GET /", err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sub := csrfMeta.FindSubmatch(b)
	if resp.StatusCode != http.StatusOK || sub == nil {
		t.Fatalf("GET / = %d without a CSRF token", resp.StatusCode)
	}
	return string(sub[1])
}

// TestApproverKindsKeptApart is finding 7's "approvers names match
// across password users, tokens and WeCom members" on the running
// processes: apps[].approval names "admin", the password user
// (dashboard.users; no WeCom member holds a role of that name), and the
// directory holds a WeCom member whose UserID is admin too. A notice to
// 公司 waits for approval; the member admin is sent no approval card,
// and their press of a card of its version (the signed callback) is
// refused and audited, the notice still pending; the password user
// admin, signed in, approves it and it is sent.
func TestApproverKindsKeptApart(t *testing.T) {
	const pass = "admin's password 审批"
	hash, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
	testenv.Check(t, "bcrypt", err)
	corp := campaignCorp()
	corp.Users = append(corp.Users, fakewecom.User{UserID: "admin", Name: "同名成员", Departments: []int{1}})
	m, fake := mustRunSynced(t, corp, func(c *config.Config) {
		c.Dashboard.PublicURL = "https://yidu.example.com"
		c.Dashboard.Users = []config.User{{Name: "admin", PasswordHash: string(hash), Corps: []string{testCorp}}}
		c.Apps[0].Approval = &config.Approval{Over: 1, Approvers: []string{"admin"}}
	})
	const msg = "kinds-1"
	var n struct {
		State    string `json:"state"`
		Approval string `json:"approval"`
	}
	if code := api(t, m, "POST", "/messages", map[string]any{"msgid": msg, "app": "hr", "title": "全员通知",
		"audience": map[string]any{"departments": []int64{1}}, "send": true}, &n); code != http.StatusAccepted || n.Approval != "pending" {
		t.Fatalf("send to 公司 = %d %+v; want 202, pending", code, n)
	}
	if cards := approvalCardsTo(fake, msg, "admin"); len(cards) != 0 {
		t.Errorf("the WeCom member admin was sent approval cards %v; want none (the approver is the password user)", cards)
	}

	var view struct {
		VersionHash string `json:"version_hash"`
	}
	if code := api(t, m, "GET", "/messages/"+msg+"/approval", nil, &view); code != http.StatusOK || view.VersionHash == "" {
		t.Fatalf("approval view = %d %+v", code, view)
	}
	task := yidu.ApprovalTaskID(yidu.MsgID(msg), view.VersionHash, 1)
	if code := deliver(t, m, approvalPress("admin", task, "approve", time.Now().Unix())); code != http.StatusOK {
		t.Fatalf("callback = %d", code)
	}
	if code := api(t, m, "GET", "/messages/"+msg, nil, &n); code != http.StatusOK || n.Approval != "pending" {
		t.Errorf("after the member admin's press: %d %+v; want still pending", code, n)
	}
	if got := testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM audit_events WHERE msgid = ? AND action = 'approve' AND actor = 'admin' AND actor_kind = 'wecom' AND outcome = 'refused'", msg)[0]; got != 1 {
		t.Errorf("refused approve rows of the member admin = %d; want 1", got)
	}

	admin := signIn(t, m, "admin", pass)
	body, _ := json.Marshal(map[string]any{"approve": true, "version_hash": view.VersionHash})
	req, _ := http.NewRequest("POST", "http://"+m.DashboardAddr+"/api/v1/messages/"+msg+"/approval", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", csrfOf(t, admin, m))
	resp, err := admin.Do(req)
	testenv.Check(t, "approve", err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the password user admin's 批准 = %d %s; want 200", resp.StatusCode, b)
	}
	testenv.WaitFor(t, 20*time.Second, "the approved notice sent", func() bool {
		return api(t, m, "GET", "/messages/"+msg, nil, &n) == http.StatusOK && n.State == "sent"
	})
	if got := testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM audit_events WHERE msgid = ? AND action = 'approve' AND actor = 'admin' AND actor_kind = 'password' AND outcome = 'ok'", msg)[0]; got != 1 {
		t.Errorf("approve rows of the password user admin = %d; want 1", got)
	}
}
