package yidu

import (
	"errors"
	"strings"
	"testing"
)

func TestScopeValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		role  Role
		scope Scope
		field string // "" = valid
	}{
		{"admin", RoleAdmin, Scope{Corp: "ww1"}, ""},
		{"sender", RoleSender, Scope{Corp: "ww1", Apps: []string{"hr"}}, ""},
		{"viewer", RoleViewer, Scope{Corp: "ww1", Departments: []int64{4}}, ""},
		{"unknown role", Role("root"), Scope{Corp: "ww1"}, "role"},
		{"empty role", Role(""), Scope{Corp: "ww1"}, "role"},
		{"no corp", RoleAdmin, Scope{}, "corp"},
		{"admin with apps", RoleAdmin, Scope{Corp: "ww1", Apps: []string{"hr"}}, "apps"},
		{"sender without apps", RoleSender, Scope{Corp: "ww1"}, "apps"},
		{"sender with departments", RoleSender, Scope{Corp: "ww1", Apps: []string{"hr"}, Departments: []int64{1}}, "departments"},
		{"viewer without departments", RoleViewer, Scope{Corp: "ww1"}, "departments"},
		{"viewer with apps", RoleViewer, Scope{Corp: "ww1", Apps: []string{"hr"}, Departments: []int64{1}}, "apps"},
		{"department zero", RoleViewer, Scope{Corp: "ww1", Departments: []int64{0}}, "departments"},
		{"negative department", RoleViewer, Scope{Corp: "ww1", Departments: []int64{-3}}, "departments"},
		{"empty app", RoleSender, Scope{Corp: "ww1", Apps: []string{""}}, "apps"},
		{"sender with audience", RoleSender, Scope{Corp: "ww1", Apps: []string{"hr"}, Audience: SenderAudience{Departments: []int64{4}, Tags: []int64{7}}}, ""},
		{"audience department zero", RoleSender, Scope{Corp: "ww1", Apps: []string{"hr"}, Audience: SenderAudience{Departments: []int64{0}}}, "audience.departments"},
		{"audience negative tag", RoleSender, Scope{Corp: "ww1", Apps: []string{"hr"}, Audience: SenderAudience{Tags: []int64{-1}}}, "audience.tags"},
		{"viewer with audience", RoleViewer, Scope{Corp: "ww1", Departments: []int64{4}, Audience: SenderAudience{Departments: []int64{4}}}, "audience"},
		{"admin with audience", RoleAdmin, Scope{Corp: "ww1", Audience: SenderAudience{Tags: []int64{1}}}, "audience"},
		{"too many", RoleViewer, Scope{Corp: "ww1", Departments: make([]int64, MaxScopeItems+1)}, "apps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.scope.Validate(tc.role)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), tc.field) {
				t.Fatalf("Validate = %v, want ErrInvalid starting with %q", err, tc.field)
			}
		})
	}
}
