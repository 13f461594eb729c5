package yidu

import (
	"errors"
	"slices"
	"testing"
)

// TestApprovalNames (issue 46): a typed entry names its kind only; a bare
// one (a configuration built without config.Load) any kind, as before.
func TestApprovalNames(t *testing.T) {
	a := Approval{Approvers: []string{"user:admin", "wecom:lisi", "token:ci", "legacy"}}
	tests := []struct {
		kind, name string
		want       bool
	}{
		{ApproverUser, "admin", true},
		{ApproverWeCom, "admin", false}, // the finding: a member named like the user
		{ApproverToken, "admin", false},
		{ApproverWeCom, "lisi", true},
		{ApproverUser, "lisi", false},
		{ApproverToken, "ci", true},
		{ApproverWeCom, "ci", false},
		{ApproverWeCom, "legacy", true},
		{ApproverUser, "legacy", true},
		{ApproverWeCom, "nobody", false},
	}
	for _, tt := range tests {
		if got := a.Names(tt.kind, tt.name); got != tt.want {
			t.Errorf("Names(%s, %s) = %v; want %v", tt.kind, tt.name, got, tt.want)
		}
	}
	if got := a.WeComApprovers(); !slices.Equal(got, []string{"lisi", "legacy"}) {
		t.Errorf("WeComApprovers() = %q; want lisi, legacy (cards go to WeCom members only)", got)
	}
	for _, bad := range []string{"group:hr", "wecom:", "user:"} {
		if err := (Approval{Approvers: []string{bad}}).Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate(approvers [%s]) = %v; want ErrInvalid", bad, err)
		}
	}
}
