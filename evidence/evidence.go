// Package evidence makes proof of what one member was told and how they
// confirmed it (issue 40): a Record per recipient per notice, read from
// what the send path, the read path and the follow-up already keep in
// MySQL; a one-page 告知确认书 PDF of it; a ZIP of a department's PDFs with
// a manifest and the ledger's inclusion proofs; and Check, which verifies
// such a ZIP offline.
//
// The package decides who may see a record (a Scope: a leader sees their
// own people; anyone else is ErrNotFound, as if the member were not a
// recipient) and what it holds. It writes nothing: the callers record each
// view and export as an audit row before answering.
//
// The ledger (issue 40 item 2) is another package's; Ledger below is what
// this one needs of it. Without one, a Record says so (LedgerConnected
// false) and the PDF prints 未接入账本.
package evidence

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/opt"
	"github.com/yidu-io/yidu/notice"
)

// ErrNotFound: no such notice, no such member, the member is not a
// recipient, or the caller's scope does not reach them. The edges answer
// 404 for all four alike, so a scoped caller learns nothing of people
// outside their scope.
var ErrNotFound = errors.New("evidence: not found")

// sendBatch is tracker.SendBatch: the first send puts the recipients, in
// uid order, into batches of this many UserIDs (batch n holds ranks
// n*sendBatch..). A member's batch follows from their rank.
const sendBatch = 1000

// Scope is whom a caller may see (access.View satisfies it).
type Scope interface {
	Contains(uid uint32) bool
}

// DepartmentScope is a Scope that sees some departments' subtrees only
// (access.View of a leader or a viewer): a record it asks for shows the
// person's departments inside them and no others, so a leader of one
// department learns nothing of another through a member of both. A
// Scope that is not one shows every department.
type DepartmentScope interface {
	Scope
	// Departments are the scope's departments (with their subtrees);
	// all is true for a scope of everyone.
	Departments() (ids []int64, all bool)
}

// Versions are a notice's versions (notice.Store).
type Versions interface {
	List(ctx context.Context, corp, msgid string) ([]notice.Version, error)
}

// LedgerEntry is one fact of the member's in the ledger: its sequence
// number in the corp's log (its leaf is seq-1), the day and index it
// names, its kind (send, signal, reminder, version, recall, …), its leaf
// hash and its canonical body (nil once anonymised).
type LedgerEntry struct {
	Seq      int64
	Day      string
	Index    int64
	Kind     string
	LeafHash [32]byte
	Body     []byte
}

// Proof is the inclusion proof of one entry in its corp's log (RFC 6962)
// against a checkpoint: the leaf's index (seq-1), the checkpoint's size
// and root, the audit path from the leaf up, and the checkpoint as the
// log signed it (a C2SP signed note; "" when none covered the entry).
type Proof struct {
	Index      int64
	TreeSize   int64
	Root       [32]byte
	Path       [][32]byte
	Checkpoint string
}

// Ledger is what evidence needs of the tamper-evident ledger (package
// ledger, issue 40 item 2): the entries about one member of one notice,
// each one's inclusion proof, and a checkpoint of the log as it stands
// (taken when the log grew since the newest). Declared here, where it is
// used; cmd adapts the ledger to it.
type Ledger interface {
	EntriesFor(ctx context.Context, corp, msgid, userid string) ([]LedgerEntry, error)
	Prove(ctx context.Context, corp string, seq int64) (Proof, error)
	Checkpoint(ctx context.Context, corp string) (string, error)
}

// DayStamps is what a Ledger may also do: name the day checkpoint with a
// trusted timestamp (RFC 3161) that covers entry seq and is no larger
// than the checkpoint of size to (the record's, which its proofs lead
// to), with the consistency proof from the one to the other (issue 48).
// cmd's ledger adapter does; a Ledger without it prints no TSA time.
type DayStamps interface {
	DayStamp(ctx context.Context, corp string, seq, to int64) (DayStamp, bool, error)
}

// DayStamp is a day's checkpoint and its TSA token: the day it closes,
// its size and root, the TSA's time (genTime), the token (DER) and the
// signed checkpoint the token stamps (its SHA-256 is the token's
// imprint), so Check verifies the token without yidu; and the proof that
// its tree is a prefix of the record's checkpoint's, so the entries
// proved against that one are in the tree the TSA stamped.
type DayStamp struct {
	Day         string          `json:"day"`
	Size        int64           `json:"size"`
	Root        string          `json:"root"`
	Time        time.Time       `json:"tsa_time"`
	Token       []byte          `json:"tsa_token"`
	Note        string          `json:"checkpoint,omitempty"`
	Consistency *ConsistencyDoc `json:"consistency,omitempty"`
}

// ConsistencyDoc is a consistency proof as JSON carries it (hex): RFC
// 6962's PROOF(m, D[n]) from the day checkpoint's size m to TreeSize n,
// the size of the checkpoint the person's newest entry is proved against
// (record.json's checkpoint, the newest when the record was made; the
// pack's checkpoint.txt too, unless the log grew while it was written).
type ConsistencyDoc struct {
	TreeSize int64    `json:"tree_size"`
	Path     []string `json:"path"`
}

// PageEvents are the reading page's own records of a member's signals
// (issue 39: opened, read_to_end, acknowledged), each with the version
// shown and the client's IP and User-Agent. This is the seam for them:
// until the page records them, message_read_record's first time per
// signal is all there is, with no IP, no User-Agent and a version
// inferred from the time (Signal.VersionInferred).
type PageEvents interface {
	PageEvents(ctx context.Context, corp, msgid string, uid uint32) ([]Signal, error)
}

// Options configures a Service.
type Options struct {
	// Ledger gives the ledger positions and proofs; nil: not connected
	// (未接入账本).
	Ledger Ledger
	// PageEvents gives the page's signals with IP and User-Agent; nil:
	// only message_read_record.
	PageEvents PageEvents
	// Zone is the corp's time zone for the PDF (default Asia/Shanghai,
	// docs/zh-CN words: show the zone only when it is not the corp's).
	Zone   *time.Location
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Workers make a ZIP's people at once (default 4): each person is a
	// few round trips to MySQL and a PDF's CPU.
	Workers int
	// Signer signs a ZIP's manifest with the log's key (nil: the
	// manifest is not signed, and Check refuses the ZIP).
	Signer note.Signer
	// VerifierKey is the log's public key (name+hash+…), written into
	// each ZIP for the reader (Check trusts only the one it is given).
	VerifierKey string
}

// Service builds evidence records from MySQL.
type Service struct {
	db       *sql.DB
	versions Versions
	ledger   Ledger
	page     PageEvents
	signer   note.Signer
	vkey     string
	zone     *time.Location
	log      *slog.Logger
	now      func() time.Time
	workers  int

	// deptMu guards deptCache, the last notice's departments at send
	// (written once by the send, so never stale while the notice lives).
	deptMu    sync.Mutex
	deptCache *sendDepartments
}

// New returns a Service over db (migrated) and the notices' versions.
func New(db *sql.DB, versions Versions, opts Options) (*Service, error) {
	if db == nil || versions == nil {
		return nil, errors.New("evidence: a database and the notices' versions are required")
	}
	opt.Logger(&opts.Logger)
	opt.Clock(&opts.Now)
	if opts.Zone == nil {
		opts.Zone = yidu.Shanghai
	}
	if err := checkFont(); err != nil {
		return nil, err
	}
	return &Service{db: db, versions: versions, ledger: opts.Ledger, page: opts.PageEvents, signer: opts.Signer, vkey: opts.VerifierKey, zone: opts.Zone,
		log: opts.Logger.With("component", "evidence"), now: opts.Now, workers: cmp.Or(opts.Workers, 4)}, nil
}
