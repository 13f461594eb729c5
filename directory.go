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
