package yidu

import (
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
)

// Bounds on one audience. They keep a single request from holding MySQL
// for minutes, and fit the API's 8 MiB body (100,000 UserIDs of 64 bytes,
// quoted).
const (
	MaxUserIDs     = 100_000
	MaxDepartments = 1_000
	// MaxTags bounds audience.tags like departments (WeCom's totag takes
	// 100 per message/send call, doc path 90236; yidu expands tags to
	// UserIDs, so more is fine).
	MaxTags = 1_000
	// MaxRecipients bounds the expanded audience.
	MaxRecipients = 1_000_000
)

// Audience is who receives a message: the union of UserIDs, every member of
// Departments and their sub-departments, and (All) every active member, as
// message/send's touser and toparty combine (doc path 90236). It is
// snapshotted at registration: later directory changes do not move it.
type Audience struct {
	UserIDs     []string
	Departments []int64
	// Tags are WeCom tag ids (标签, message/send's totag): each adds its
	// users and every member of its departments' subtrees.
	Tags []int64
	All  bool
}

// Validate checks a and puts it in canonical form: UserIDs, Departments
// and Tags sorted and unique. It is the audience part of
// Registration.Validate, and the one rule for an audience wherever one is
// checked (a stored notice, the compose page's preview). Every error wraps
// ErrInvalid and starts with the field.
func (a *Audience) Validate() error {
	if len(a.UserIDs) == 0 && len(a.Departments) == 0 && len(a.Tags) == 0 && !a.All {
		return Fieldf("audience", "audience needs userids, departments, tags or all")
	}
	if len(a.UserIDs) > MaxUserIDs || len(a.Departments) > MaxDepartments || len(a.Tags) > MaxTags {
		return Fieldf("audience", "audience too large (at most %d userids, %d departments, %d tags)", MaxUserIDs, MaxDepartments, MaxTags)
	}
	for _, t := range a.Tags {
		if t < 0 { // tagid is a non-negative integer (tag/create, doc path 90210)
			return Fieldf("audience.tags", "audience.tags: %d is not a tag id", t)
		}
	}
	for _, u := range a.UserIDs {
		if !UserID(u).Valid() {
			return &FieldError{Field: "audience.userids", Value: u, Echo: 70, Reason: "audience.userids: %q is not a WeCom UserID"}
		}
	}
	for _, d := range a.Departments {
		if d <= 0 {
			return Fieldf("audience.departments", "audience.departments: %d is not a department id", d)
		}
	}
	a.UserIDs = slices.Compact(slices.Sorted(slices.Values(a.UserIDs)))
	a.Departments = slices.Compact(slices.Sorted(slices.Values(a.Departments)))
	if a.Tags != nil {
		a.Tags = slices.Compact(slices.Sorted(slices.Values(a.Tags)))
	}
	return nil
}

// Expansion is an audience expanded against the synced directory.
type Expansion struct {
	// Recipients are the active members the audience reaches: the union
	// of its UserIDs, its departments' subtrees, its tags (users and
	// departments' subtrees) and, with All, every active member.
	Recipients *roaring.Bitmap
	// Unknown are the audience's UserIDs that name no member at all, as
	// given; Left those naming members who left. Neither is a recipient.
	Unknown, Left []string
}

// CheckRecipients is the rule for an audience's expansion (n active
// members, idmap.Mapper.Expand): it must reach someone and at most
// MaxRecipients. The tracker applies it when a registration snapshots the
// audience and campaign when a notice is stored, so a notice that would
// not register is refused when it is written, not when it fires. The
// error names the field: audience.userids when only UserIDs were given.
func (a Audience) CheckRecipients(n uint64) error {
	switch {
	case n == 0 && !a.All && len(a.Departments) == 0 && len(a.Tags) == 0:
		return Fieldf("audience.userids", "audience.userids: none of the %d UserIDs is an active member", len(a.UserIDs))
	case n == 0:
		return Fieldf("audience", "audience has no members: its departments, tags and UserIDs reach no active member")
	case n > MaxRecipients:
		return Fieldf("audience", "audience has %d members, at most %d", n, MaxRecipients)
	}
	return nil
}
