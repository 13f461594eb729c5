package yidu

import "time"

// Department is one node of a corp's department tree.
type Department struct {
	ID       int64
	ParentID int64 // 0 for a root
	Name     string
	// Order sorts siblings; WeCom shows larger values first
	// (department/list, doc path 90208).
	Order int64
}

// UserStatus is a member's status in the directory (users.status).
type UserStatus int

// Member statuses. A member deleted in WeCom stays, as left: their uid is
// never reused and their reads stay in the archive.
const (
	StatusActive UserStatus = 1
	StatusLeft   UserStatus = 2
)

// User is a directory entry with what the page shows of a person.
type User struct {
	UID    uint32
	UserID string
	// Name is WeCom's display name; "" until a sync could read names.
	Name string
	// Departments are the member's departments in WeCom's order.
	Departments []int64
	Status      UserStatus
	// BadUserID marks a member whose UserID breaks WeCom's rule
	// (UserID.Valid, users.bad_userid): kept so their reads count, never
	// addressed by a send or a reminder (WeCom would refuse the batch).
	BadUserID bool
}

// TagCount is a tag with its active member count (users plus
// departments' subtrees, deduplicated): the compose page's tag list.
type TagCount struct {
	ID      int64
	Name    string
	Members int
}

// Person is an active member as people search finds them.
type Person struct {
	UID         uint32
	UserID      string
	Name        string
	Departments []int64
}

// DepartmentNode is a department with its subtree's active member count
// (deduplicated) and its leaders' UserIDs.
type DepartmentNode struct {
	Department
	Members int
	Leaders []string
}

// Member is one member as a read of WeCom's directory lists them.
type Member struct {
	UserID string
	// Name is "" when the read could not see it.
	Name string
	// Departments are the departments the read saw the member in.
	Departments []int64
}

// Listing is one read of a corp's WeCom directory: what a directory client
// (wecom.Directory) hands idmap's sync to write.
type Listing struct {
	// Departments are the departments seen; a name is "" where WeCom gave
	// none.
	Departments []Department
	// Members are the members seen, each once.
	Members []Member
	// Complete reports whether the read saw the whole corp (the
	// contacts-sync secret, or an app whose visible range holds the root
	// department). Only then is a member missing from it gone from the
	// corp; otherwise it may merely be outside the app's visible range
	// (可见范围).
	Complete bool
	// Source names the secret and the APIs read, for reports.
	Source string
	// DepartmentNames reports whether department names were listed.
	DepartmentNames bool
	// Tags are the corp's tags (标签) with the members the read may see
	// (tag/get returns only the app's visible range, doc path 90213).
	Tags []Tag
	// TagsListed reports whether tags were read (Tags is then the truth,
	// an empty one included); otherwise the stored tags stand.
	TagsListed bool
	// Leaders are each listed department's leaders (department_leader,
	// doc path 90208), by department id; a department may have none or
	// several.
	Leaders map[int64][]string
	// LeadersListed reports whether leaders were read (department/list
	// answered); otherwise the stored leaders stand.
	LeadersListed bool
}

// Tag is one WeCom tag (标签) as a directory read lists it: message/send's
// totag addresses it (doc path 90236). Its audience is its users plus
// every member of its departments' subtrees.
type Tag struct {
	ID          int64
	Name        string
	UserIDs     []string
	Departments []int64
}

// SendReport says what a send or a reminder did.
type SendReport struct {
	// Batches is the number of message/send calls this call made.
	Batches int
	// Skipped counts batches an earlier attempt already sent (or whose
	// outcome is unknown): they are never sent twice.
	Skipped int
	// Users counts, by outcome, the UserIDs of this call's batches.
	Sent, Invalid, Refused, Unknown int
	// Missing counts recipients without a UserID in the directory.
	Missing int
	// BadUserIDs counts members skipped because their UserID breaks
	// WeCom's rule (UserID.Valid): WeCom would refuse the whole batch.
	BadUserIDs int
	// Outcomes is every batch of the message, in order: this call's
	// outcome, or (Earlier) what an earlier call recorded. Empty for a
	// reminder's report until it sent a batch.
	Outcomes []BatchOutcome
}

// SendStatus is the outcome of one send batch (message_sends.status).
type SendStatus string

// Send statuses.
const (
	// SendSent: WeCom accepted the batch (its invaliduser were not
	// delivered).
	SendSent SendStatus = "sent"
	// SendRefused: WeCom answered with an errcode: nothing delivered. A
	// later send tries the batch again.
	SendRefused SendStatus = "refused"
	// SendUnsent: the request never left (network, token), or the batch
	// was not attempted after WeCom's frequency limit: nothing delivered;
	// a later send tries it again.
	SendUnsent SendStatus = "unsent"
	// SendUnknown: the request was written but no answer came back, even
	// after the one resend WeCom's duplicate check makes safe. It may have
	// been delivered; it is never sent again.
	SendUnknown SendStatus = "unknown"
	// SendNobody: no member of the batch could be addressed (no UserID in
	// the directory, or one breaking WeCom's rule): nothing was called.
	SendNobody SendStatus = "nobody"
)

// BatchOutcome is what happened to one send batch (task_id
// "<msgid>@<Batch>").
type BatchOutcome struct {
	Batch  int
	Status SendStatus
	// ErrCode is WeCom's errcode (0 for sent; for a refused batch the
	// last refusal; 42014 on a sent batch: the resend found the task_id
	// used, so the first attempt was delivered and WeCom's msgid is
	// unknown).
	ErrCode int64
	// Users is the UserIDs addressed; Invalid those WeCom reported as
	// invaliduser; Missing and BadUserIDs the recipients left out
	// (no UserID in the directory, a UserID breaking WeCom's rule).
	Users, Invalid, Missing, BadUserIDs int
	// Resent: the first attempt's outcome was unknown and the batch was
	// sent once more under WeCom's duplicate check.
	Resent bool
	// Earlier: recorded by an earlier send, not attempted by this one.
	Earlier bool
	// Recalled: WeCom recalled the batch.
	Recalled bool
	// Reminder: the batch is a reminder's, not the notice's.
	Reminder bool
	// At is when the batch was (last) attempted; zero if never.
	At time.Time
}

// RecallReport says what a recall did (message/recall, doc path 96460).
type RecallReport struct {
	// RecalledAt is when the message counts as recalled (zero while
	// some batch is not: Failed is then not empty).
	RecalledAt time.Time
	// Recalled counts the batches (sends and reminders) this call
	// recalled; Already those an earlier call did.
	Recalled, Already int
	// Unrecallable counts batches whose outcome is unknown: WeCom gave no
	// msgid, so if they were delivered they stay.
	Unrecallable int
	// Failed are the batches WeCom refused to recall (ErrCode set).
	Failed []BatchOutcome
}

// RemindReport says what a reminder did.
type RemindReport struct {
	// Reminded is how many people WeCom accepted the reminder for.
	Reminded int
	SendReport
}
