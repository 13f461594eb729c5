package access

import (
	"fmt"
	"strings"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
)

// actRoles are the callers of TestDecideActsByRole, in the order of its
// table's columns: an admin of acme, a sender of acme's app hr, a sender
// of acme's other app, a viewer of a department of acme (configured), a
// department leader (the directory's grant), a principal holding no role
// in acme (a sender of another corp), and nobody (nil).
func actRoles() []struct {
	name string
	p    *Principal
} {
	acme := func(r yidu.Role, apps []string, depts []int64) Grant {
		return Grant{Role: r, Scope: yidu.Scope{Corp: "acme", Apps: apps, Departments: depts}}
	}
	return []struct {
		name string
		p    *Principal
	}{
		{"admin", NewPrincipal("ann", KindUser, false, []Grant{acme(yidu.RoleAdmin, nil, nil)})},
		{"sender", &Principal{Name: "sam", Kind: KindWeCom, UserID: "sam", Corp: "acme", grants: []Grant{acme(yidu.RoleSender, []string{"hr"}, nil)}}},
		{"other sender", NewPrincipal("olga", KindToken, false, []Grant{acme(yidu.RoleSender, []string{"ops"}, nil)})},
		{"viewer", NewPrincipal("vic", KindToken, false, []Grant{acme(yidu.RoleViewer, nil, []int64{4})})},
		{"leader", &Principal{Name: "lee", Kind: KindWeCom, UserID: "lee", Corp: "acme", grants: []Grant{{Role: yidu.RoleViewer, Scope: yidu.Scope{Corp: "acme", Departments: []int64{4}}, led: true}}}},
		{"no role", NewPrincipal("nora", KindUser, false, []Grant{{Role: yidu.RoleAdmin, Scope: yidu.Scope{Corp: "globex"}}})},
		{"nil", nil},
	}
}

// TestDecideActsByRole is issue 47's table of every act × role: the
// decision access.Decide gives, and the audit row it says the act is due
// (actor, kind, role, act, corp, app, msgid; outcome ok, or refused
// with the reason). Each row's want reads one letter per column of
// actRoles: Y allowed, n refused.
func TestDecideActsByRole(t *testing.T) {
	notice := Target{Corp: "acme", App: "hr", MsgID: "m1"}
	withRule := func(t Target, rule yidu.Approval, author string) Target {
		t.Approval, t.Author = &rule, author
		return t
	}
	standing := notice
	standing.Standing = true
	tests := []struct {
		act    yidu.Action
		target Target
		want   string // admin sender other viewer leader none nil
	}{
		{yidu.ActionSend, notice, "YYnnnnn"},
		{yidu.ActionCompose, notice, "YYnnnnn"},
		{yidu.ActionSchedule, notice, "YYnnnnn"},
		{yidu.ActionEdit, notice, "YYnnnnn"},
		{yidu.ActionCancel, notice, "YYnnnnn"},
		{yidu.ActionRemind, notice, "YYnnYnn"},
		{yidu.ActionRecall, notice, "YYnnnnn"},
		{yidu.ActionFollowUpChange, notice, "YYnnnnn"},
		{yidu.ActionUpload, Target{Corp: "acme", App: "hr"}, "YYnnnnn"},
		{yidu.ActionTemplate, Target{Corp: "acme", App: "hr"}, "Ynnnnnn"},
		{yidu.ActionExport, notice, "YYnYYnn"},
		{yidu.ActionRecipients, notice, "YYnYYnn"},
		{yidu.ActionEvidence, notice, "YYnYYnn"},
		{yidu.ActionApprovalRequest, notice, "YYnnnnn"},
		{yidu.ActionApprovalNudge, notice, "YYnnnnn"},
		{yidu.ActionApprovalWithdraw, notice, "YYnnnnn"},
		{yidu.ActionApprove, withRule(notice, yidu.Approval{Role: yidu.RoleAdmin}, "sam"), "Ynnnnnn"},
		{yidu.ActionReject, withRule(notice, yidu.Approval{Role: yidu.RoleAdmin}, "sam"), "Ynnnnnn"},
		// Approvers by role sender: the author (sam) may not approve.
		{yidu.ActionApprove, withRule(notice, yidu.Approval{Role: yidu.RoleSender}, "sam"), "Ynnnnnn"},
		{yidu.ActionApprove, withRule(notice, yidu.Approval{Role: yidu.RoleSender}, "ann"), "nYnnnnn"},
		// Named approvers, by kind: wecom:lee is the leader, user:vic is
		// no token called vic.
		{yidu.ActionApprove, withRule(notice, yidu.Approval{Approvers: []string{"wecom:lee", "user:vic"}}, "sam"), "nnnnYnn"},
		{yidu.ActionApprove, notice, "nnnnnnn"}, // no rule: nobody
		{yidu.ActionEdit, standing, "Ynnnnnn"},
		{yidu.ActionSignIn, Target{}, "YYYYYYn"},
		{yidu.ActionSignOut, Target{}, "YYYYYYn"},
		// Fail-closed: acts nobody does by hand, and unknown ones.
		{yidu.ActionHold, notice, "nnnnnnn"},
		{yidu.ActionLedgerRoot, notice, "nnnnnnn"},
		{yidu.ActionRoleChange, notice, "nnnnnnn"},
		{yidu.Action("drop_tables"), notice, "nnnnnnn"},
		// Fail-closed: a target without its corp or app.
		{yidu.ActionSend, Target{App: "hr", MsgID: "m1"}, "nnnnnnn"},
		{yidu.ActionSend, Target{Corp: "acme", MsgID: "m1"}, "nnnnnnn"},
		{yidu.ActionRemind, Target{Corp: "acme"}, "nnnnnnn"},
		{yidu.ActionExport, Target{MsgID: "m1"}, "nnnnnnn"},
	}
	roles := actRoles()
	for _, tt := range tests {
		if len(tt.want) != len(roles) {
			t.Fatalf("%s: want %q has %d letters; want %d", tt.act, tt.want, len(tt.want), len(roles))
		}
		for i, role := range roles {
			t.Run(fmt.Sprintf("%s/%+v/%s", tt.act, tt.target, role.name), func(t *testing.T) {
				d := Decide(role.p, tt.act, tt.target)
				if want := tt.want[i] == 'Y'; d.Allowed != want {
					t.Fatalf("Decide(%s, %s, %+v).Allowed = %v (%q); want %v", role.name, tt.act, tt.target, d.Allowed, d.Reason, want)
				}
				name, kind := role.p.Actor()
				want := audit.Event{Actor: name, ActorKind: kind, Action: tt.act, CorpID: tt.target.Corp, App: tt.target.App,
					MsgID: tt.target.MsgID, Outcome: "ok"}
				if role.p != nil && tt.target.Corp != "" {
					want.Role = string(role.p.Role(tt.target.Corp))
				}
				if !d.Allowed {
					want.Outcome, want.Detail = "refused", d.Reason
					if d.Reason == "" {
						t.Error("refused without a reason")
					}
					if err := d.Err(); err == nil || !strings.Contains(err.Error(), d.Reason) {
						t.Errorf("Err() = %v; want the refusal", err)
					}
				} else if d.Reason != "" || d.Err() != nil {
					t.Errorf("allowed with reason %q, err %v", d.Reason, d.Err())
				}
				if d.Event != want {
					t.Errorf("Event = %+v;\nwant %+v", d.Event, want)
				}
			})
		}
	}
}

// TestActorNamesThePrincipal: the audit actor of a WeCom member is its
// UserID, of a password user its name with kind "password", of a token
// its name; the role is the principal's in the act's corp.
func TestActorNamesThePrincipal(t *testing.T) {
	for _, tc := range []struct {
		p          *Principal
		name, kind string
	}{
		{&Principal{Name: "张三", Kind: KindWeCom, UserID: "zhangsan"}, "zhangsan", "wecom"},
		{NewPrincipal("alice", KindUser, true, nil), "alice", "password"},
		{NewPrincipal("ci", KindToken, true, nil), "ci", "token"},
		{nil, "", ""},
	} {
		if name, kind := tc.p.Actor(); name != tc.name || kind != tc.kind {
			t.Errorf("Actor() = %q, %q; want %q, %q", name, kind, tc.name, tc.kind)
		}
	}
	e := NewPrincipal("alice", KindUser, true, nil).Event(yidu.ActionRecall, "acme", "hr", "m1")
	if e.Role != "admin" || e.Actor != "alice" || e.Outcome != "" {
		t.Errorf("Event = %+v; want alice, admin, no outcome", e)
	}
}

// TestDecideOwnNotice: the author's approval of their own notice is
// refused as such (campaign answers ErrOwnNotice for it).
func TestDecideOwnNotice(t *testing.T) {
	p := NewPrincipal("ann", KindUser, false, []Grant{{Role: yidu.RoleAdmin, Scope: yidu.Scope{Corp: "acme"}}})
	d := Decide(p, yidu.ActionApprove, Target{Corp: "acme", App: "hr", MsgID: "m1", Approval: &yidu.Approval{Role: yidu.RoleAdmin}, Author: "ann"})
	if d.Allowed || !d.Own() {
		t.Fatalf("own notice: %+v; want refused as own", d)
	}
	if d := Decide(p, yidu.ActionApprove, Target{Corp: "acme", App: "hr", Approval: &yidu.Approval{Role: yidu.RoleSender}}); d.Own() {
		t.Errorf("not the author: Own() = true (%q)", d.Reason)
	}
}

// TestDecideFailsClosed: even an admin of every corp ("*") is refused an
// act whose target names no corp, or no app where the act goes through
// one, and any act access does not know.
func TestDecideFailsClosed(t *testing.T) {
	all := NewPrincipal("root", KindUser, true, nil)
	for _, tc := range []struct {
		act    yidu.Action
		target Target
	}{
		{yidu.ActionSend, Target{App: "hr", MsgID: "m1"}},
		{yidu.ActionRemind, Target{MsgID: "m1"}},
		{yidu.ActionExport, Target{App: "hr", MsgID: "m1"}},
		{yidu.ActionTemplate, Target{App: "hr"}},
		{yidu.ActionEdit, Target{MsgID: "m1", Standing: true}},
		{yidu.ActionRecall, Target{Corp: "acme", MsgID: "m1"}},
		{yidu.ActionUpload, Target{Corp: "acme"}},
		{yidu.Action(""), Target{Corp: "acme", App: "hr"}},
		{yidu.ActionEnrol, Target{Corp: "acme", App: "hr"}},
	} {
		if d := Decide(all, tc.act, tc.target); d.Allowed || d.Event.Outcome != "refused" {
			t.Errorf("Decide(admin of every corp, %q, %+v) = %+v; want refused", tc.act, tc.target, d)
		}
	}
	if d := Decide(all, yidu.ActionRecall, Target{Corp: "acme", App: "hr", MsgID: "m1"}); !d.Allowed {
		t.Errorf("admin of every corp recalling: %+v; want allowed", d)
	}
}
