package ledger

import (
	"fmt"
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
	// KindVersion: a version of a notice's content was published.
	KindVersion Kind = "version"
	// KindRecall: a notice was recalled.
	KindRecall Kind = "recall"
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
}

// timeText is how the ledger writes a time: UTC, whole seconds unless the
// fact has milliseconds, RFC 3339.
func timeText(t time.Time) string {
	t = t.UTC()
	if t.Nanosecond() == 0 {
		return t.Format("2006-01-02T15:04:05Z")
	}
	return t.Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z")
}

// Signal is a read that counts: recipient UID's row of MsgID became read
// at ReadTime by Source (message_read_record.source). Signal, Version,
// ClientIP and UserAgent are for the page's signals (read_to_end,
// acknowledged): left empty they are not in the body.
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

// Fact returns s as a Fact.
func (s Signal) Fact() Fact {
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
	return Fact{Kind: KindSignal, MsgID: s.MsgID, UID: s.UID, Person: true, Body: b}
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
}

// Fact returns d as a Fact of KindSend or KindReminder.
func (d Delivery) Fact() Fact {
	k := KindSend
	if d.Reminder {
		k = KindReminder
	}
	b := Body{"msgid": d.MsgID, "uid": d.UID, "userid": d.UserID, "batch": int64(d.Batch), "at": timeText(d.At),
		"errcode": d.ErrCode, "wecom_msgid": d.WeComMsgID, "invalid": d.Invalid}
	return Fact{Kind: k, MsgID: d.MsgID, UID: d.UID, Person: true, UserID: d.UserID, Body: b}
}

// Version is version Number of MsgID's content, of hash SHA256 (hex),
// published at At by By; Reacknowledge: a material change.
type Version struct {
	MsgID         string
	Number        int
	SHA256        string
	Reacknowledge bool
	At            time.Time
	By            string
}

// Fact returns v as a Fact of the whole message.
func (v Version) Fact() Fact {
	return Fact{Kind: KindVersion, MsgID: v.MsgID, Body: Body{"msgid": v.MsgID, "version": int64(v.Number),
		"sha256": v.SHA256, "reacknowledge": v.Reacknowledge, "at": timeText(v.At), "by": v.By}}
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

// reserved are the body members the ledger writes itself.
var reserved = []string{"corp", "seq", "day", "index", "kind"}

func (f Fact) check() error {
	switch f.Kind {
	case KindSend, KindReminder, KindSignal, KindVersion, KindRecall:
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
