package ledger

import "time"

// KindEnrol: a member who joined a standing notice's audience after its
// first send was enrolled and sent its current version (issue 51).
const KindEnrol Kind = "enrol"

// Enrolment is member UID (UserID) enrolled in standing notice MsgID:
// they joined its audience at JoinedAt, were sent version Version at
// SentAt in card batch Batch (WeCom's ErrCode), and have until Deadline.
type Enrolment struct {
	MsgID    string
	UID      uint32
	UserID   string
	Version  int
	Batch    int
	JoinedAt time.Time
	SentAt   time.Time
	Deadline time.Time
	ErrCode  int64
}

// Fact returns e as a Fact of KindEnrol about its member.
func (e Enrolment) Fact() Fact {
	return Fact{Kind: KindEnrol, MsgID: e.MsgID, UID: e.UID, Person: true, UserID: e.UserID, Body: Body{
		"msgid": e.MsgID, "uid": e.UID, "userid": e.UserID, "version": int64(e.Version), "batch": int64(e.Batch),
		"joined_at": timeText(e.JoinedAt), "sent_at": timeText(e.SentAt), "deadline": timeText(e.Deadline), "errcode": e.ErrCode}}
}
