package yidu

import "fmt"

// Action is what an audit event records someone doing (issue 31 item 4).
type Action string

// The audited actions.
const (
	ActionSignIn         Action = "sign_in"
	ActionSignInFailed   Action = "sign_in_failed"
	ActionSignOut        Action = "sign_out"
	ActionCompose        Action = "compose"
	ActionSchedule       Action = "schedule"
	ActionEdit           Action = "edit"
	ActionCancel         Action = "cancel"
	ActionSend           Action = "send"
	ActionRemind         Action = "remind"
	ActionRecall         Action = "recall"
	ActionFollowUpChange Action = "follow_up_change"
	ActionExport         Action = "export"
	ActionRoleChange     Action = "role_change"
	// ActionRecipients is a read of a notice's recipient list (UserIDs,
	// names, departments, read state), a page or a search of it: the
	// personal data of export, page by page (issue 38).
	ActionRecipients Action = "recipients"
	// ActionUpload: an attachment uploaded (issue 39).
	ActionUpload Action = "upload"
	// ActionTemplate: a notice template created, changed or deleted, or
	// refused (issue 46: a refused change leaves a row).
	ActionTemplate Action = "template"
	// ActionPageDenied: someone who is not a recipient of a notice (or
	// has left) was refused its reading page (issue 39).
	ActionPageDenied Action = "page_denied"
	// ActionLedgerRoot: a day's evidence ledger root was sealed (issue 40;
	// actor "yidu", detail "day=… size=… root=…").
	ActionLedgerRoot Action = "ledger_root"
	// ActionEvidence: a member's evidence record viewed or downloaded
	// (JSON, PDF, a ZIP of many; issue 40), by HR or by the member on
	// 我的记录.
	ActionEvidence Action = "evidence"
	// ActionApprove and ActionReject: a notice's version approved
	// (批准) or rejected (驳回) before sending (issue 41).
	ActionApprove Action = "approve"
	ActionReject  Action = "reject"
	// ActionApprovalRequest: approval of a notice's version asked for
	// (the author's compose, edit or send now, or yidu at its time when
	// it needs approval it did not need before; issue 41).
	ActionApprovalRequest Action = "approval_request"
	// ActionHold: a scheduled notice held at its time instead of sent
	// (actor "yidu"): not approved (待审批), or outside its author's
	// sender audience now (issue 41).
	ActionHold Action = "hold"
	// ActionNotify: yidu told someone of an approval step through
	// WeCom (the approvers' card, the author's text); outcome failed
	// when WeCom did not take it (issue 41).
	ActionNotify Action = "notify"
	// ActionEnrol: a member who joined a standing notice's audience was
	// enrolled and sent its current version (actor "yidu"; issue 51).
	ActionEnrol Action = "enrol"
	// ActionApprovalNudge and ActionApprovalWithdraw: the author of a
	// notice waiting for approval asked its approvers again (催办), or
	// withdrew the request (撤回申请), which leaves it a draft (issue 49).
	ActionApprovalNudge    Action = "approval_nudge"
	ActionApprovalWithdraw Action = "approval_withdraw"
)

// Actions lists every audited action.
func Actions() []Action {
	return []Action{ActionSignIn, ActionSignInFailed, ActionSignOut, ActionCompose, ActionSchedule, ActionEdit,
		ActionCancel, ActionSend, ActionRemind, ActionRecall, ActionFollowUpChange, ActionExport, ActionRoleChange, ActionRecipients,
		ActionUpload, ActionPageDenied, ActionLedgerRoot, ActionEvidence, ActionApprove, ActionReject,
		ActionApprovalRequest, ActionHold, ActionNotify, ActionTemplate, ActionEnrol, ActionApprovalNudge, ActionApprovalWithdraw}
}

// Validate refuses a word that is not an audited action.
func (a Action) Validate() error {
	for _, x := range Actions() {
		if a == x {
			return nil
		}
	}
	return fmt.Errorf("action %q is not one of the audited actions: %w", string(a), ErrInvalid)
}
