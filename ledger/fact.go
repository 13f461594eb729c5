package ledger

import (
	"fmt"
	"strconv"
	"time"
)

// Kind is what an entry records.
type Kind string

// The kinds of entry (docs/evidence.md lists each one's members).
const (
	// KindSend: one recipient's part of a send batch and WeCom's answer.
	KindSend Kind = "send"
	// KindReminder: one recipient's part of a reminder batch (a
	// follow-up round's or a manual reminder's card) and WeCom's answer.
	KindReminder Kind = "reminder"
	// KindSignal: a recipient's row became read.
	KindSignal Kind = "signal"
	// KindPage: a reading page's event (read_to_end, acknowledged, the
	// tracked link's visit) of one version was recorded for a recipient
	// (a page_signals row).
	KindPage Kind = "page"
	// KindSeen: a recipient's first signal of a kind (the card's button,
	// the link, entering the app: message_read_record's button_at,
	// link_at, enter_at) that is not the read its signal entry records:
	// a press that does not count, or one after the row was read.
	KindSeen Kind = "seen"
	// KindVersion: a version of a notice's content was published.
	KindVersion Kind = "version"
	// KindRecall: a notice was recalled.
	KindRecall Kind = "recall"
	// KindApproval: a step of a notice's approval trail (requested,
	// approved, rejected, held: a notice_approvals row) with the hash of
	// the version it is about.
	KindApproval Kind = "approval"
	// KindAsked: a person asked for a manual reminder of a recipient (a
	// manual_reminders row): who asked, when, in which scope.
	KindAsked Kind = "asked"
)

// Fact is one thing to append: its kind, whom it is about and the body
// members proper to it. The ledger adds corp, seq, day, index and kind to
// the body. Build one with Signal, Delivery, Version or Recall.
type Fact struct {
	Kind   Kind
	MsgID  string
	UID    uint32
	Person bool // UID (and UserID, if known) name a recipient
	UserID string
	Body   Body
	// signal, when isSignal, encodes the body without a map (flushd's
	// hot path).
	signal   Signal
	isSignal bool
}

// timeText is how the ledger writes a time: UTC, whole seconds unless the
// fact has milliseconds, RFC 3339.
func timeText(t time.Time) string { return string(appendTime(nil, t)) }

// appendTime appends timeText(t) without time.Format's layout parsing
// (flushd writes one per read).
func appendTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	if y < 0 || y > 9999 {
		return append(dst, t.Format(time.RFC3339)...)
	}
	dst = appendDigits(dst, y, 4)
	dst = append(dst, '-')
	dst = appendDigits(dst, int(mo), 2)
	dst = append(dst, '-')
	dst = appendDigits(dst, d, 2)
	dst = append(dst, 'T')
	dst = appendDigits(dst, h, 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, mi, 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, s, 2)
	if ms := t.Nanosecond() / int(time.Millisecond); ms != 0 {
		dst = append(dst, '.')
		dst = appendDigits(dst, ms, 3)
	}
	return append(dst, 'Z')
}

func appendDigits(dst []byte, v, n int) []byte {
	var b [4]byte
	for i := n - 1; i >= 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return append(dst, b[:n]...)
}

// Signal is a read that counts: recipient UID's row of MsgID became read
// at ReadTime by Source (message_read_record.source), or, as a PageFact,
// a reading page's event. Signal (the signal's name), Version, ClientIP
// and UserAgent are for the page's signals (the tracked link,
// read_to_end, acknowledged): left empty they are not in the body.
type Signal struct {
	MsgID     string
	UID       uint32
	Source    uint8
	ReadTime  time.Time
	Signal    string
	Version   int
	ClientIP  string
	UserAgent string
}

// Fact returns s as a Fact. Its Body is nil: a signal encodes itself
// (flushd appends one per read), into the bytes Canonical makes of
// s.Members().
func (s Signal) Fact() Fact {
	return Fact{Kind: KindSignal, MsgID: s.MsgID, UID: s.UID, Person: true, signal: s, isSignal: true}
}

// PageFact returns s as a Fact of KindPage: the reading page's event
// s.Signal of version s.Version, seen at s.ReadTime from s.ClientIP with
// s.UserAgent (a page_signals row). Its body has the members of a signal
// entry's.
func (s Signal) PageFact() Fact {
	return Fact{Kind: KindPage, MsgID: s.MsgID, UID: s.UID, Person: true, signal: s, isSignal: true}
}

// Members returns s's body members.
func (s Signal) Members() Body {
	b := Body{"msgid": s.MsgID, "uid": s.UID, "source": int64(s.Source), "read_time": timeText(s.ReadTime)}
	if s.Signal != "" {
		b["signal"] = s.Signal
	}
	if s.Version > 0 {
		b["version"] = int64(s.Version)
	}
	if s.ClientIP != "" {
		b["ip"] = s.ClientIP
	}
	if s.UserAgent != "" {
		b["ua"] = s.UserAgent
	}
	return b
}

// appendBody appends s's canonical body at its place: Canonical's bytes
// for the same members (TestSignalBodyFastPath), without building and
// sorting a map.
func (s *Signal) appendBody(dst []byte, kind Kind, corp string, seq uint64, day string, index uint64) ([]byte, error) {
	var err error
	dst = append(dst, `{"corp":`...)
	if dst, err = appendString(dst, corp); err != nil {
		return nil, err
	}
	dst = append(dst, `,"day":"`...)
	dst = append(dst, day...)
	dst = append(dst, `","index":`...)
	dst = strconv.AppendUint(dst, index, 10)
	if dst, err = appendSet(dst, `,"ip":`, s.ClientIP); err != nil {
		return nil, err
	}
	dst = append(dst, `,"kind":"`...)
	dst = append(dst, kind...)
	dst = append(dst, `","msgid":`...)
	if dst, err = appendString(dst, s.MsgID); err != nil {
		return nil, err
	}
	dst = append(dst, `,"read_time":"`...)
	dst = appendTime(dst, s.ReadTime)
	dst = append(dst, `","seq":`...)
	dst = strconv.AppendUint(dst, seq, 10)
	if dst, err = appendSet(dst, `,"signal":`, s.Signal); err != nil {
		return nil, err
	}
	dst = append(dst, `,"source":`...)
	dst = strconv.AppendUint(dst, uint64(s.Source), 10)
	if dst, err = appendSet(dst, `,"ua":`, s.UserAgent); err != nil {
		return nil, err
	}
	dst = append(dst, `,"uid":`...)
	dst = strconv.AppendUint(dst, uint64(s.UID), 10)
	if s.Version > 0 {
		dst = append(dst, `,"version":`...)
		dst = strconv.AppendInt(dst, int64(s.Version), 10)
	}
	return append(dst, '}'), nil
}

// appendSet appends member (`,"name":`) and v when v is set: an empty
// string member is left out of a signal's body (Members).
func appendSet(dst []byte, member, v string) ([]byte, error) {
	if v == "" {
		return dst, nil
	}
	return appendString(append(dst, member...), v)
}

// Delivery is one recipient's part of a send or reminder batch: card
// batch Batch of MsgID to UserID (uid UID) at At, and WeCom's answer:
// ErrCode, its msgid, and whether WeCom listed the UserID in invaliduser.
type Delivery struct {
	Reminder   bool
	MsgID      string
	UID        uint32
	UserID     string
	Batch      int
	At         time.Time
	ErrCode    int64
	WeComMsgID string
	Invalid    bool
	// Unlicensed: WeCom listed the UserID in unlicenseduser (doc path
	// 90236); in the body only when true.
	Unlicensed bool
	// Name is the member's name in the directory at send, and
	// Departments their departments' ids then (the notice's
	// send_departments, taken before its first batch); nil: not known
	// (the body leaves them out; entries written before issue 48 have
	// neither).
	Name        *string
	Departments []string
	// Title is the notice's messages.title, in the entries of its first
	// batch (batch 0 of kind send); "": left out.
	Title string
}

// Fact returns d as a Fact of KindSend or KindReminder.
func (d Delivery) Fact() Fact {
	k := KindSend
	if d.Reminder {
		k = KindReminder
	}
	b := Body{"msgid": d.MsgID, "uid": d.UID, "userid": d.UserID, "batch": int64(d.Batch), "at": timeText(d.At),
		"errcode": d.ErrCode, "wecom_msgid": d.WeComMsgID, "invalid": d.Invalid}
	if d.Unlicensed {
		b["unlicensed"] = true
	}
	if d.Name != nil {
		b["name"] = *d.Name
	}
	if d.Departments != nil {
		b["departments"] = d.Departments
	}
	if d.Title != "" {
		b["title"] = d.Title
	}
	return Fact{Kind: k, MsgID: d.MsgID, UID: d.UID, Person: true, UserID: d.UserID, Body: b}
}

// Version is version Number of MsgID's content, of hash SHA256 (hex),
// published at At by By; Reacknowledge: a material change; Note the
// publisher's change note ("": none, and no "note" member).
type Version struct {
	MsgID         string
	Number        int
	SHA256        string
	Reacknowledge bool
	At            time.Time
	By            string
	Note          string
}

// Seen is a recipient's first signal Signal ("button", "link",
// "enter_agent") of notice MsgID at At that its read does not record
// (KindSeen).
type Seen struct {
	MsgID  string
	UID    uint32
	Signal string
	At     time.Time
}

// Fact returns s as a Fact about its recipient.
func (s Seen) Fact() Fact {
	return Fact{Kind: KindSeen, MsgID: s.MsgID, UID: s.UID, Person: true,
		Body: Body{"msgid": s.MsgID, "uid": s.UID, "signal": s.Signal, "at": timeText(s.At)}}
}

// Fact returns v as a Fact of the whole message.
func (v Version) Fact() Fact {
	b := Body{"msgid": v.MsgID, "version": int64(v.Number),
		"sha256": v.SHA256, "reacknowledge": v.Reacknowledge, "at": timeText(v.At), "by": v.By}
	if v.Note != "" {
		b["note"] = v.Note
	}
	return Fact{Kind: KindVersion, MsgID: v.MsgID, Body: b}
}

// Recall is MsgID recalled at At by By: Batches card batches were
// recalled, Failed of them refused by WeCom.
type Recall struct {
	MsgID   string
	At      time.Time
	By      string
	Batches int
	Failed  int
}

// Fact returns r as a Fact of the whole message.
func (r Recall) Fact() Fact {
	return Fact{Kind: KindRecall, MsgID: r.MsgID, Body: Body{"msgid": r.MsgID, "at": timeText(r.At), "by": r.By,
		"batches": int64(r.Batches), "failed": int64(r.Failed)}}
}

// Approval is step Step of MsgID's approval trail about the version of
// content hash VersionHash, by Actor at At, with Reason (a
// notice_approvals row).
type Approval struct {
	MsgID       string
	Step        string
	VersionHash string
	Actor       string
	At          time.Time
	Reason      string
}

// Fact returns a as a Fact of the whole message.
func (a Approval) Fact() Fact {
	return Fact{Kind: KindApproval, MsgID: a.MsgID, Body: Body{"msgid": a.MsgID, "step": a.Step, "version_hash": a.VersionHash,
		"actor": a.Actor, "at": timeText(a.At), "reason": a.Reason}}
}

// Asked is By asking at At for a manual reminder of recipient UID of
// MsgID, in Scope (a manual_reminders row); Undone: the row was taken
// back because no card was sent.
type Asked struct {
	MsgID  string
	UID    uint32
	At     time.Time
	By     string
	Scope  string
	Undone bool
}

// Fact returns a as a Fact about its recipient.
func (a Asked) Fact() Fact {
	b := Body{"msgid": a.MsgID, "uid": a.UID, "at": timeText(a.At), "by": a.By, "scope": a.Scope}
	if a.Undone {
		b["undone"] = true
	}
	return Fact{Kind: KindAsked, MsgID: a.MsgID, UID: a.UID, Person: true, Body: b}
}

// reserved are the body members the ledger writes itself.
var reserved = []string{"corp", "seq", "day", "index", "kind"}

func (f Fact) check() error {
	switch f.Kind {
	case KindSend, KindReminder, KindSignal, KindPage, KindSeen, KindVersion, KindRecall, KindEnrol, KindApproval, KindAsked:
	default:
		return fmt.Errorf("ledger: kind %q: %w", f.Kind, ErrInvalid)
	}
	for _, k := range reserved {
		if _, ok := f.Body[k]; ok {
			return fmt.Errorf("ledger: %s fact sets %q, which the ledger writes: %w", f.Kind, k, ErrInvalid)
		}
	}
	return nil
}
