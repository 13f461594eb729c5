package dashboard

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
)

// Scoped tokens (issue 31) until every endpoint answers through an
// access.View: a viewer of department 4 and a sender of another app get
// nothing of hr's notice through any message route, see an empty list,
// and cannot send, remind or recall through hr. A corps-only token is
// still an admin.
func TestScopedTokensGetNothingYet(t *testing.T) {
	const viewerTok, senderTok = "viewer-token-0123456789", "sender-token-0123456789"
	f := newFixtureOpts(t, false, func(o *deps) {
		o.Tokens = append(o.Tokens,
			access.Token{Name: "v4", Token: viewerTok, Grant: access.Grant{Role: yidu.RoleViewer, Scope: yidu.Scope{Corp: "acme", Departments: []int64{4}}}},
			access.Token{Name: "sops", Token: senderTok, Grant: access.Grant{Role: yidu.RoleSender, Scope: yidu.Scope{Corp: "acme", Apps: []string{"ops"}}}},
		)
	})
	routes := []struct{ method, path, body string }{
		{"GET", "/api/v1/messages/hello", ""},
		{"GET", "/api/v1/messages/hello/progress", ""},
		{"GET", "/api/v1/messages/hello/departments", ""},
		{"GET", "/api/v1/messages/hello/recipients", ""},
		{"GET", "/api/v1/messages/hello/recipients?q=u", ""},
		{"GET", "/api/v1/messages/hello/export.csv", ""},
		{"GET", "/api/v1/messages/hello/events", ""},
		{"POST", "/api/v1/messages/hello/remind", "{}"},
		{"POST", "/api/v1/messages/hello/recall", "{}"},
		{"POST", "/api/v1/messages", `{"app":"hr","msgid":"x1","title":"t","audience":{"userids":["u1"]},"send":true}`},
	}
	for _, tok := range []string{viewerTok, senderTok} {
		for _, rt := range routes {
			code := 0
			if rt.body != "" {
				code = f.do(t, rt.method, rt.path, tok, strings.NewReader(rt.body)).Code
			} else {
				code = f.do(t, rt.method, rt.path, tok, nil).Code
			}
			if code < 400 {
				t.Errorf("%s %s as a scoped token = %d, want refused", rt.method, rt.path, code)
			}
		}
		w := f.do(t, "GET", "/api/v1/messages", tok, nil)
		var list struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.NewDecoder(w.Body).Decode(&list); err != nil || w.Code != http.StatusOK || len(list.Messages) != 0 {
			t.Errorf("list as a scoped token = %d, %d messages (%v), want 200 and none", w.Code, len(list.Messages), err)
		}
	}
	if w := f.do(t, "GET", "/api/v1/messages/hello/progress", acmeToken, nil); w.Code != http.StatusOK {
		t.Errorf("corps-only token: progress = %d, want 200", w.Code)
	}
}

func TestScopedTokenConfigRefused(t *testing.T) {
	for _, tok := range []access.Token{
		{Name: "both", Token: "both-token-0123456789", Corps: []string{"acme"}, Grant: access.Grant{Role: yidu.RoleAdmin, Scope: yidu.Scope{Corp: "acme"}}},
		{Name: "nodept", Token: "nodept-token-0123456789", Grant: access.Grant{Role: yidu.RoleViewer, Scope: yidu.Scope{Corp: "acme"}}},
		{Name: "badrole", Token: "badrole-token-0123456789", Grant: access.Grant{Role: "owner", Scope: yidu.Scope{Corp: "acme"}}},
	} {
		f := newFixture(t)
		if _, err := newServer(f.arch, f.bms, f.mapper, deps{Tokens: []access.Token{tok}}); err == nil || !strings.Contains(err.Error(), tok.Name) {
			t.Errorf("New with token %s = %v, want an error naming it", tok.Name, err)
		}
	}
}
