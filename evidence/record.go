package evidence

import "time"

// Department is a department of the member's.
type Department struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// Person is who the record is about.
type Person struct {
	UID    uint32 `json:"uid"`
	UserID string `json:"userid"`
	Name   string `json:"name"`
	// NameAtSend is the name the log's send entry kept for the member
	// (issue 48): the directory's name at send. "" when no send entry
	// names them (a send logged before issue 48, no ledger).
	NameAtSend string `json:"name_at_send,omitempty"`
	Left       bool   `json:"left"`
	// Departments are the member's departments when the notice was
	// first sent (DepartmentsAsOf "send", DepartmentsAt the moment the
	// send kept them: send_departments); for a notice sent before yidu
	// kept them, the directory's when the record is made
	// (DepartmentsAsOf "current", DepartmentsAt nil).
	Departments     []Department `json:"departments"`
	DepartmentsAsOf string       `json:"departments_as_of"`
	DepartmentsAt   *time.Time   `json:"departments_at"`
}

// Version is one version of the notice's content.
type Version struct {
	N      int    `json:"version"`
	Title  string `json:"title"`
	SHA256 string `json:"sha256"`
	// Opening is the first lines of the version's text (firstLines).
	Opening       string    `json:"opening,omitempty"`
	Reacknowledge bool      `json:"reacknowledge"`
	CreatedAt     time.Time `json:"created_at"`
	CreatedBy     string    `json:"created_by"`
}

// Delivery is one attempt at the send batch that held the member: what
// WeCom answered and when.
type Delivery struct {
	Kind   string `json:"kind"`
	Batch  int    `json:"batch"`
	Status string `json:"status"`
	// ErrCode is WeCom's errcode; WeComMsgID its msgid for the batch.
	ErrCode    int64  `json:"errcode"`
	WeComMsgID string `json:"wecom_msgid"`
	// InvalidUser: WeCom listed the member in invaliduser; Unlicensed:
	// in unlicenseduser (no basic licence, doc path 90236), nil when the
	// batch's answer did not keep it (no answer, or sent before yidu
	// kept it).
	InvalidUser bool      `json:"invaliduser"`
	Unlicensed  *bool     `json:"unlicensed"`
	Version     int       `json:"version"`
	At          time.Time `json:"at"`
	Recalled    bool      `json:"recalled"`
}

// Signal is one signal of the member's.
type Signal struct {
	// Kind is button (the card's 我已阅读), link (the notice opened: the
	// tracked link or the reading page), enter_agent (entered the app),
	// or a page signal (read_to_end, acknowledged).
	Kind string    `json:"kind"`
	At   time.Time `json:"at"`
	// Version is the version shown; VersionInferred: the record does not
	// say, and Version is the one current at At.
	Version         int  `json:"version"`
	VersionInferred bool `json:"version_inferred"`
	// Source is where it came from: card (callback), page, app.
	Source string `json:"source"`
	// ClientIP and UserAgent: page events only, "" when not recorded.
	ClientIP  string `json:"client_ip"`
	UserAgent string `json:"user_agent"`
	// CountedAsRead: the signal that made the member read
	// (message_read_record.source and read_time).
	CountedAsRead bool `json:"counted_as_read"`
}

// FollowUp is one reminder, escalation digest or manual reminder the
// member was sent.
type FollowUp struct {
	// Kind: reminder (a follow-up round's), digest (an escalation sent
	// to them as a leader), manual (提醒未读 from the dashboard),
	// update_card (通知已更新，请重新确认 of a material version: Version).
	Kind    string    `json:"kind"`
	Round   int       `json:"round"`
	Version int       `json:"version,omitempty"`
	Batch   int       `json:"batch"`
	Outcome string    `json:"outcome"`
	By      string    `json:"by,omitempty"`
	At      time.Time `json:"at"`
}

// Entry is a ledger entry of the member's with its canonical body (what
// the leaf hash covers: anyone recomputes it) and its proof; Proof nil
// when the ledger could not prove it, Body "" once anonymised.
type Entry struct {
	Seq      int64     `json:"seq"`
	Day      string    `json:"day"`
	Index    int64     `json:"index"`
	Kind     string    `json:"kind"`
	LeafHash string    `json:"leaf_hash"`
	Body     string    `json:"body,omitempty"`
	Proof    *ProofDoc `json:"proof"`
}

// ProofDoc is a Proof as JSON carries it (hex): the leaf's index in the
// log (seq-1), the checkpoint's size and root, the audit path, and the
// signed checkpoint.
type ProofDoc struct {
	Index      int64    `json:"index"`
	TreeSize   int64    `json:"tree_size"`
	Root       string   `json:"root"`
	Path       []string `json:"path"`
	Checkpoint string   `json:"checkpoint,omitempty"`
}

// Event is one line of the record's timeline: every fact above, in time
// order.
type Event struct {
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"`
	Version int       `json:"version,omitempty"`
	Detail  string    `json:"detail"`
}

// Record is the evidence of one member for one notice.
type Record struct {
	CorpID     string     `json:"corp_id"`
	MsgID      string     `json:"msgid"`
	App        string     `json:"app"`
	Title      string     `json:"title"`
	SentAt     time.Time  `json:"sent_at"`
	Person     Person     `json:"person"`
	Read       bool       `json:"read"`
	ReadTime   *time.Time `json:"read_time"`
	Versions   []Version  `json:"versions"`
	Deliveries []Delivery `json:"deliveries"`
	Signals    []Signal   `json:"signals"`
	FollowUps  []FollowUp `json:"follow_ups"`
	Timeline   []Event    `json:"timeline"`
	// Joined: the member joined a standing notice's audience after its
	// first send and was enrolled (issue 51): when they joined, when
	// they were told, the version and their deadline; nil otherwise.
	Joined *Joined `json:"joined,omitempty"`
	// LedgerConnected: yidu has a ledger; Ledger lists the member's
	// entries with their bodies and proofs, and Checkpoint is the signed
	// checkpoint the newest of them are proved against.
	LedgerConnected bool    `json:"ledger_connected"`
	Ledger          []Entry `json:"ledger"`
	Checkpoint      string  `json:"checkpoint,omitempty"`
	// Stamp is the day checkpoint with a TSA token covering the member's
	// newest entry, when one has been taken (the day ended).
	Stamp       *DayStamp `json:"day_checkpoint,omitempty"`
	GeneratedAt time.Time `json:"generated_at"`
}
