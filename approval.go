package yidu

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Approval is an app's rule for notices that need a second person before
// they are sent (apps[].approval, issue 41): a notice to more than Over
// people, to 全员, or (Acknowledged) with read_rule acknowledged. The
// approvers are the principals named in Approvers and, with Role, every
// holder of that role who may send through the app (admin: the corp's
// admins; sender: the app's senders too). Nobody approves their own
// notice.
//
// An entry of Approvers names its kind (issue 46): "wecom:<userid>" a
// WeCom member, "user:<name>" a password user, "token:<name>" an API
// token; a WeCom member whose UserID is a password user's name is not
// that user. The configuration types a bare name where it is
// unambiguous and refuses it otherwise; a bare entry that reaches here
// anyway names a principal of any kind, as before.
type Approval struct {
	Over         int
	Approvers    []string
	Role         Role
	Acknowledged bool
}

// Validate checks that a names someone who may approve and a sane size.
// Every error wraps ErrInvalid and starts with the field.
func (a Approval) Validate() error {
	if a.Over < 0 {
		return fmt.Errorf("approval.over: %d is negative: %w", a.Over, ErrInvalid)
	}
	if len(a.Approvers) == 0 && a.Role == "" {
		return fmt.Errorf("approval.approvers: name approvers or a role: %w", ErrInvalid)
	}
	if a.Role != "" && a.Role != RoleAdmin && a.Role != RoleSender {
		return fmt.Errorf("approval.role: %q is not admin or sender: %w", a.Role, ErrInvalid)
	}
	if len(a.Approvers) > MaxScopeItems || slices.Contains(a.Approvers, "") {
		return fmt.Errorf("approval.approvers: empty, or more than %d: %w", MaxScopeItems, ErrInvalid)
	}
	for _, e := range a.Approvers {
		if _, _, err := ParseApprover(e); err != nil {
			return err
		}
	}
	return nil
}

// The kinds of principal an approver entry names (access.Kind's words).
const (
	ApproverWeCom = "wecom"
	ApproverUser  = "user"
	ApproverToken = "token"
)

// ParseApprover splits an approvers entry into its kind (ApproverWeCom,
// ApproverUser, ApproverToken; "" for a bare name) and name. An entry
// with another prefix, or a kind without a name, wraps ErrInvalid.
func ParseApprover(entry string) (kind, name string, err error) {
	if k, n, ok := splitApprover(entry); ok {
		return k, n, nil
	}
	switch k, _, _ := strings.Cut(entry, ":"); k {
	case ApproverWeCom, ApproverUser, ApproverToken:
		return "", "", fmt.Errorf("approval.approvers: %q names no %s: %w", Truncate(entry, 64), k, ErrInvalid)
	}
	return "", "", fmt.Errorf("approval.approvers: %q: the kind must be wecom:, user: or token: %w", Truncate(entry, 64), ErrInvalid)
}

// splitApprover is ParseApprover without the error's words: ok is false
// for an entry it refuses. Who an entry names is asked of every approver
// at each decision (Names), of entries Validate checked.
func splitApprover(entry string) (kind, name string, ok bool) {
	k, n, typed := strings.Cut(entry, ":")
	if !typed {
		return "", entry, true
	}
	switch k {
	case ApproverWeCom, ApproverUser, ApproverToken:
		return k, n, n != ""
	}
	return "", "", false
}

// Names reports whether a names the principal of kind (ApproverWeCom,
// ApproverUser, ApproverToken) called name (a WeCom member's UserID).
func (a Approval) Names(kind, name string) bool {
	for _, e := range a.Approvers {
		k, n, ok := splitApprover(e)
		if ok && n == name && (k == kind || k == "") {
			return true
		}
	}
	return false
}

// WeComApprovers are the UserIDs the approval card goes to: the wecom:
// entries, and bare names (which may be UserIDs). A user's or a token's
// approver signs in to the page instead.
func (a Approval) WeComApprovers() []string {
	var out []string
	for _, e := range a.Approvers {
		if k, n, ok := splitApprover(e); ok && (k == ApproverWeCom || k == "") {
			out = append(out, n)
		}
	}
	return out
}

// Needs reports whether a notice to n people (all: 全员) with readRule
// needs approval under a (nil: never).
func (a *Approval) Needs(n uint64, all bool, readRule ReadRule) bool {
	if a == nil {
		return false
	}
	return all || n > uint64(a.Over) || (a.Acknowledged && readRule == ReadRuleAcknowledged)
}

// ApprovalState is where a notice stands with its approval: none needed
// (""), 待审批 (pending), 已批准 (approved) or 已驳回 (rejected).
type ApprovalState string

const (
	ApprovalNone     ApprovalState = ""
	ApprovalPending  ApprovalState = "pending"
	ApprovalApproved ApprovalState = "approved"
	ApprovalRejected ApprovalState = "rejected"
)

// ApprovalTaskID returns the task_id of the approval card asking for
// version hash of message m, the n-th time it is asked for:
// "<msgid>@a<first 16 hex digits of hash>-<n>". A new request makes a
// new task_id (WeCom refuses one used before, 42014, doc path 90236).
func ApprovalTaskID(m MsgID, hash string, n int64) string {
	return string(m) + "@a" + hash[:min(16, len(hash))] + "-" + strconv.FormatInt(n, 36)
}

// ParseApprovalTaskID returns the message and the version prefix of an
// approval card's task_id; ok is false for any other task_id (a
// notice's, a reminder's), which is then a read signal as before.
func ParseApprovalTaskID(taskID string) (m MsgID, hashPrefix string, ok bool) {
	msg, ok := ParseTaskID(taskID)
	if !ok {
		return "", "", false
	}
	_, rest, _ := strings.Cut(taskID, "@")
	rest, found := strings.CutPrefix(rest, "a")
	if !found {
		return "", "", false
	}
	h, _, found := strings.Cut(rest, "-")
	if !found || len(h) != 16 || strings.Trim(h, "0123456789abcdef") != "" {
		return "", "", false
	}
	return msg, h, true
}

// PreviewTaskID returns the task_id of a 发给我预览 card of message m
// (issue 41): "<msgid>@p<n>", n in base 36. Its only button opens a
// page, so no press comes back and it is never a read.
func PreviewTaskID(m MsgID, n int64) string {
	return string(m) + "@p" + strconv.FormatInt(n, 36)
}
