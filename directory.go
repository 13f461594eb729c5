package yidu

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
}

// RemindReport says what a reminder did.
type RemindReport struct {
	// Reminded is how many people WeCom accepted the reminder for.
	Reminded int
	SendReport
}
