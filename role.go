package yidu

import (
	"fmt"
	"slices"
)

// Role is what a principal may do in a corp. The dashboard's principals
// (password users, bearer tokens, WeCom sign-ins) each hold one per corp;
// package access resolves it and answers "may they" and "whom may they see".
type Role string

const (
	// RoleAdmin may do and see everything in the corp.
	RoleAdmin Role = "admin"
	// RoleSender may compose, schedule, send, remind and recall through
	// the apps of its Scope, and sees the notices of those apps.
	RoleSender Role = "sender"
	// RoleViewer reads only, and only the people of its Scope's
	// department subtrees.
	RoleViewer Role = "viewer"
)

// Roles are the roles in the order of their power.
var Roles = []Role{RoleAdmin, RoleSender, RoleViewer}

// MaxScopeItems bounds the apps and departments of one scope: a grant
// is written by a person in yidu.yaml, not generated.
const MaxScopeItems = 1000

// Scope is the part of a corp a role applies to: Apps for a sender (the
// yidu app names it may send through), Departments for a viewer (the
// roots of the department subtrees it sees). An admin's scope is the
// whole corp and names neither.
type Scope struct {
	Corp        string
	Apps        []string
	Departments []int64
}

// Validate checks that r applies to s: an admin names the corp alone, a
// sender at least one app, a viewer at least one department. Every error
// wraps ErrInvalid and starts with the field.
func (s Scope) Validate(r Role) error {
	if !slices.Contains(Roles, r) {
		return fmt.Errorf("role %q is not one of admin, sender, viewer: %w", r, ErrInvalid)
	}
	if s.Corp == "" {
		return fmt.Errorf("corp is required for role %s: %w", r, ErrInvalid)
	}
	if len(s.Apps) > MaxScopeItems || len(s.Departments) > MaxScopeItems {
		return fmt.Errorf("apps or departments: more than %d: %w", MaxScopeItems, ErrInvalid)
	}
	for _, a := range s.Apps {
		if a == "" {
			return fmt.Errorf("apps has an empty name: %w", ErrInvalid)
		}
	}
	for _, d := range s.Departments {
		if d <= 0 {
			return fmt.Errorf("departments: %d is not a department id: %w", d, ErrInvalid)
		}
	}
	switch r {
	case RoleAdmin:
		if len(s.Apps) > 0 || len(s.Departments) > 0 {
			return fmt.Errorf("apps and departments do not apply to an admin (the whole corp): %w", ErrInvalid)
		}
	case RoleSender:
		if len(s.Apps) == 0 {
			return fmt.Errorf("apps is required for a sender: %w", ErrInvalid)
		}
		if len(s.Departments) > 0 {
			return fmt.Errorf("departments do not apply to a sender: %w", ErrInvalid)
		}
	case RoleViewer:
		if len(s.Departments) == 0 {
			return fmt.Errorf("departments is required for a viewer: %w", ErrInvalid)
		}
		if len(s.Apps) > 0 {
			return fmt.Errorf("apps do not apply to a viewer: %w", ErrInvalid)
		}
	}
	return nil
}
