package yidu

import (
	"errors"
	"time"
)

// Errors of a notice's life (campaign returns them, the edges map them).
var (
	// ErrNotEditable: the notice started sending (or ended); an edit, a
	// cancel or a send by hand is refused (the dashboard's 409).
	ErrNotEditable = errors.New("the notice is no longer editable")
	// ErrNotFound: no notice with this msgid in the caller's corps.
	ErrNotFound = errors.New("no such notice")
)

// Notice is one notice sent from yidu, before, while and after it is sent.
type Notice struct {
	MsgID string
	// App is the app it is sent from; its CorpID scopes the notice.
	App   App
	Title string
	Body  string
	URL   string
	// Audience is as asked (not expanded): the registration snapshots it
	// at send time.
	Audience Audience
	// Content is the full text it keeps until it is sent, published then
	// as its version 1; nil: none (issue 39).
	Content *NoticeContent
	State   NoticeState
	// SendAt is when it is (or was) due; zero for a draft.
	SendAt time.Time
	// StartedAt is the first claim: the registration's sent_at.
	StartedAt time.Time
	// FinishedAt is when it reached sent, failed or cancelled.
	FinishedAt time.Time
	// SentLateBy is how much StartedAt was past SendAt (0 on time).
	SentLateBy time.Duration
	// Reason says why it failed or is held.
	Reason string
	// Attempts counts the claims (a resume after a crash or a retry after
	// WeCom refused a batch is one more).
	Attempts int
	// Approval is where the notice stands with its approval (issue 41);
	// ApprovalHash the version asked for or approved (Service's
	// ApprovalHash); ApprovalNow that its author asked to send it once
	// approved.
	Approval     ApprovalState
	ApprovalHash string
	ApprovalNow  bool
	CreatedBy    string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Draft is what a person asks for: a new notice or (Patch) the fields of
// one to change.
type Draft struct {
	// MsgID: empty generates one.
	MsgID    string
	App      App
	Title    string
	Body     string
	URL      string
	Audience Audience
	// Content is the full text (nil: none).
	Content  *NoticeContent
	Schedule Schedule
	By       string
}

// Patch is a partial edit: nil fields are kept.
type Patch struct {
	Title, Body, URL *string
	Audience         *Audience
	// Content replaces the text and attachments of a notice not yet sent
	// (a sent one's next version is campaign's Revision), and what makes
	// it read where not zero; ReadRule and MinReadSeconds change that
	// alone, zero included. The rest of the full text kept is kept.
	Content        *NoticeContent
	ReadRule       *ReadRule
	MinReadSeconds *int
	// Schedule replaces the schedule (a draft, or a new send_at).
	Schedule *Schedule
	By       string
}

// NoticeContent is the full text a draft, scheduled or held notice keeps
// until it is sent (issue 39): the Markdown, the attachments by upload
// id, in order, and what makes the notice read. It is published as the
// notice's version 1 when it is sent (campaign's Runner), and is part of
// what an approval approves.
type NoticeContent struct {
	Markdown       string   `json:"markdown"`
	Attachments    []string `json:"attachments"`
	ReadRule       ReadRule `json:"read_rule"`
	MinReadSeconds int      `json:"min_read_seconds"`
	// ChangeNote is the change note of a sent notice's material version
	// held for approval (issue 49), published with it; empty otherwise,
	// and then left out (the approval hashes of notices without one are
	// as they were).
	ChangeNote string `json:"change_note,omitempty"`
}
