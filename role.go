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
	// Audience limits a sender to part of the directory (issue 41): it
	// may address only these departments' subtrees and these tags. Zero:
	// anyone the app reaches.
	Audience SenderAudience
}

// SenderAudience is the part of the directory a sender may address
// (dashboard.roles[].audience): the subtrees of Departments and the tags
// of Tags. A notice to 全员, to a department outside the subtrees, to a
// tag not listed or to a member outside them is refused, and the picker
// offers only what is inside.
type SenderAudience struct {
	Departments []int64
	Tags        []int64
}

// Limited reports whether a names anything (a zero SenderAudience is no
// limit).
func (a SenderAudience) Limited() bool { return len(a.Departments) > 0 || len(a.Tags) > 0 }

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
	if len(s.Audience.Departments) > MaxScopeItems || len(s.Audience.Tags) > MaxScopeItems {
		return fmt.Errorf("audience: more than %d departments or tags: %w", MaxScopeItems, ErrInvalid)
	}
	for _, d := range s.Audience.Departments {
		if d <= 0 {
			return fmt.Errorf("audience.departments: %d is not a department id: %w", d, ErrInvalid)
		}
	}
	for _, t := range s.Audience.Tags {
		if t <= 0 {
			return fmt.Errorf("audience.tags: %d is not a tag id: %w", t, ErrInvalid)
		}
	}
	if s.Audience.Limited() && r != RoleSender {
		return fmt.Errorf("audience applies to a sender only: %w", ErrInvalid)
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
