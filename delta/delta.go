// Package delta is the wire format of one new read signal on the deltas
// topic (yidu.reads): written by the read path after the bit is set, read
// by flushd. The encoding is documented in docs/architecture.md. Producer
// publishes deltas with acks=all; Spool, in front of it, makes them
// durable on the receiver's disk while no broker acknowledges.
//
// Value layout (integers uvarint or varint as noted):
//
//	byte    version (1 or 2)
//	byte    source (see Source)
//	byte    flags, version 2 only: bit 0 counted (see Delta.Counted);
//	        the other bits are 0
//	uvarint uid
//	varint  read_time, unix seconds
//	uvarint len(corp_id), corp_id bytes
//	uvarint len(msgid),   msgid bytes
//	uvarint len(userid),  userid bytes: version 3 only
//
// A version 1 value has no flags byte and is counted: it is what releases
// before read signals were kept apart wrote, and what Marshal still writes
// for a counted delta, so a flushd not yet upgraded keeps writing every
// read during a rolling upgrade (it skips only the version 2 values, which
// record a signal that does not count).
//
// A version 3 value is a version 2 value with flag bit 1 set and the
// member's WeCom UserID at the end, uid 0: the receiver could not map the
// UserID to its uid (MySQL down and the member not in its cache), so
// flushd resolves it (see Delta.UserID). A flushd older than version 3
// skips such values as malformed: upgrade flushd before the receivers.
//
// A version 4 value is a reading page's signal (issue 39): a version 2
// or 3 value (flag bit 1 optional, uid 0 when set; flag bit 2: archive
// only, never with bit 0, see Page.ArchiveOnly) followed by the page
// event, which the archive keeps per version (page_signals):
//
//	uvarint notice version (≥ 1)
//	uvarint len(ip), ip bytes (the reader's address, may be empty)
//	uvarint len(user_agent), user_agent bytes (at most 255)
//
// A flushd older than version 4 skips such values as malformed: upgrade
// flushd before the receivers.
//
// The record key is corp_id + "/" + msgid, so every delta of one message
// lands on one partition, in order.
package delta

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/yidu-io/yidu"
)

// Version is the newest encoding version; Marshal writes the oldest one
// that can hold a delta (see the package doc).
const Version = 4

// Flags of a version 2 or 3 value: bit 0 counted, bit 1 (version 3 only,
// and always) the value ends in a UserID.
const (
	flagCounted = 1
	flagUserID  = 2
	// flagArchive, version 4 only: the page event is archived and gives
	// no signal (Page.ArchiveOnly).
	flagArchive = 4
)

// Source says what produced a delta: one of the read signals
// (yidu.Signal, same values) or yidu reconcile.
type Source uint8

// Sources of a delta; the values are stored in message_read_record.source.
const (
	SourceUnknown    Source = 0
	SourceCard       Source = Source(yidu.SignalButton)       // template_card_event button press
	SourceEnterAgent Source = Source(yidu.SignalEnterAgent)   // enter_agent after the message was sent
	SourceLink       Source = Source(yidu.SignalLink)         // tracked link opened through OAuth2
	SourceReconcile  Source = 4                               // re-emitted by yidu reconcile: a read, no signal
	SourceReadToEnd  Source = Source(yidu.SignalReadToEnd)    // the reading page read to its end
	SourceAck        Source = Source(yidu.SignalAcknowledged) // 我已阅读并知悉 pressed on the reading page
)

// SourceOf returns the source of signal s's deltas.
func SourceOf(s yidu.Signal) Source { return Source(s) }

// Signal returns the signal s records; ok=false for SourceReconcile and
// unknown sources, which name none.
func (s Source) Signal() (sig yidu.Signal, ok bool) {
	sig = yidu.Signal(s)
	return sig, sig.Valid()
}

// Page reports whether s is one of the reading page's signals (link,
// read_to_end, acknowledged), the sources a version 4 value may carry.
func (s Source) Page() bool { return s == SourceLink || s == SourceReadToEnd || s == SourceAck }

// valid reports whether s is a source a delta may carry.
func (s Source) valid() bool { return s >= SourceCard && s <= SourceAck }

// String returns the source's name.
func (s Source) String() string {
	switch s {
	case SourceCard:
		return "card"
	case SourceEnterAgent:
		return "enter_agent"
	case SourceLink:
		return "link"
	case SourceReconcile:
		return "reconcile"
	case SourceReadToEnd:
		return "read_to_end"
	case SourceAck:
		return "acknowledged"
	}
	return "unknown"
}

// Delta is one new signal: recipient uid of message (CorpID, MsgID) gave
// signal Source at ReadTime (unix seconds, the WeCom event's CreateTime).
type Delta struct {
	CorpID   string
	MsgID    string
	UID      uint32
	ReadTime int64
	Source   Source
	// Counted says the signal makes the message read for its app
	// (apps[].read_signals, decided by the receiver when it set the bits):
	// flushd sets is_read, read_time and source only from counted deltas,
	// so MySQL's is_read matches Redis's read bitmap. Every signal delta
	// sets its signal's first time. A SourceReconcile delta is always
	// counted.
	Counted bool
	// UserID, when set, names the member instead of UID (which is 0): the
	// receiver took the signal while MySQL could not map the UserID
	// (idmap), unmarked in Redis; flushd maps it before writing. Only a
	// signal's delta carries one, never a reconcile delta.
	UserID string
	// Page, when its Version is set, is the reading page's event behind
	// the signal: the version read, the reader's address and User-Agent
	// (version 4 values). The archive keeps one row per member, signal
	// and version (page_signals).
	Page Page
}

// Page is a reading page's event (Delta.Page).
type Page struct {
	// Version is the notice version the page showed (≥ 1; 0: no page).
	Version uint32
	// IP is the reader's address as the receiver saw it.
	IP string
	// UserAgent is the reader's browser, at most MaxField bytes.
	UserAgent string
	// ArchiveOnly: the event is kept in the archive and sets no signal
	// (an acknowledgement of a version older than the notice's current
	// material version: it no longer counts). Never counted.
	ArchiveOnly bool
}

// MaxField is the longest string field a value holds (corp_id, msgid,
// userid, a page's IP and User-Agent); longer ones do not decode.
const MaxField = maxField

// ErrMalformed is returned by Unmarshal for a value it cannot decode.
var ErrMalformed = errors.New("delta: malformed value")

// maxField bounds corp_id and msgid lengths on decode.
const maxField = 255

// Key returns the Kafka record key of the message's deltas.
func Key(corpID, msgID string) []byte {
	return AppendKey(make([]byte, 0, len(corpID)+1+len(msgID)), corpID, msgID)
}

// AppendKey appends Key(corpID, msgID) to b.
func AppendKey(b []byte, corpID, msgID string) []byte {
	b = append(b, corpID...)
	b = append(b, '/')
	return append(b, msgID...)
}

// AppendMarshal appends d's encoding to b and returns the extended slice:
// version 1 when d is counted, version 2 otherwise (see the package doc).
func AppendMarshal(b []byte, d Delta) []byte {
	if d.Page.Version != 0 {
		return appendPage(b, d)
	}
	switch {
	case d.UserID != "":
		flags := byte(flagUserID)
		if d.Counted {
			flags |= flagCounted
		}
		b = append(b, 3, byte(d.Source), flags)
	case d.Counted:
		b = append(b, 1, byte(d.Source))
	default:
		b = append(b, 2, byte(d.Source), 0)
	}
	b = binary.AppendUvarint(b, uint64(d.UID))
	b = binary.AppendVarint(b, d.ReadTime)
	b = binary.AppendUvarint(b, uint64(len(d.CorpID)))
	b = append(b, d.CorpID...)
	b = binary.AppendUvarint(b, uint64(len(d.MsgID)))
	b = append(b, d.MsgID...)
	if d.UserID != "" {
		b = binary.AppendUvarint(b, uint64(len(d.UserID)))
		b = append(b, d.UserID...)
	}
	return b
}

// appendPage appends d as a version 4 value (see the package doc).
func appendPage(b []byte, d Delta) []byte {
	var flags byte
	if d.Counted {
		flags |= flagCounted
	}
	if d.UserID != "" {
		flags |= flagUserID
	}
	if d.Page.ArchiveOnly {
		flags |= flagArchive
	}
	b = append(b, 4, byte(d.Source), flags)
	b = binary.AppendUvarint(b, uint64(d.UID))
	b = binary.AppendVarint(b, d.ReadTime)
	b = appendField(b, d.CorpID)
	b = appendField(b, d.MsgID)
	if d.UserID != "" {
		b = appendField(b, d.UserID)
	}
	b = binary.AppendUvarint(b, uint64(d.Page.Version))
	b = appendField(b, d.Page.IP)
	return appendField(b, d.Page.UserAgent)
}

func appendField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Marshal returns d's encoding.
func Marshal(d Delta) []byte {
	return AppendMarshal(make([]byte, 0, 16+len(d.CorpID)+len(d.MsgID)), d)
}

// Unmarshal decodes one value written by Marshal, of either version. A
// source it does not know is malformed: it could be written nowhere.
func Unmarshal(b []byte) (Delta, error) {
	var d Delta
	b, byUser, page, err := unmarshalHead(b, &d)
	if err != nil {
		return d, err
	}
	uid, n := binary.Uvarint(b)
	if n <= 0 || uid > 1<<32-1 {
		return d, fmt.Errorf("%w: uid", ErrMalformed)
	}
	d.UID = uint32(uid)
	b = b[n:]
	rt, n := binary.Varint(b)
	if n <= 0 {
		return d, fmt.Errorf("%w: read_time", ErrMalformed)
	}
	d.ReadTime = rt
	b = b[n:]
	var s string
	if s, b, err = field(b, "corp_id"); err != nil {
		return d, err
	}
	d.CorpID = s
	if s, b, err = field(b, "msgid"); err != nil {
		return d, err
	}
	d.MsgID = s
	if byUser {
		if d.UID != 0 {
			return d, fmt.Errorf("%w: uid %d with a userid", ErrMalformed, d.UID)
		}
		if s, b, err = field(b, "userid"); err != nil {
			return d, err
		}
		if s == "" {
			return d, fmt.Errorf("%w: empty userid", ErrMalformed)
		}
		d.UserID = s
	}
	if page {
		if b, err = unmarshalPage(b, &d.Page); err != nil {
			return d, err
		}
	}
	if len(b) != 0 {
		return d, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(b))
	}
	return d, nil
}

// unmarshalHead decodes the version, source and flags of an encoding into
// d and returns the bytes after them, and whether a userid and a page
// event follow.
func unmarshalHead(b []byte, d *Delta) (rest []byte, byUser, page bool, err error) {
	if len(b) < 2 {
		return nil, false, false, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	d.Source = Source(b[1])
	if !d.Source.valid() {
		return nil, false, false, fmt.Errorf("%w: source %d", ErrMalformed, b[1])
	}
	switch b[0] {
	case 1:
		d.Counted = true
		b = b[2:]
	case 2:
		if len(b) < 3 || b[2]&^flagCounted != 0 {
			return nil, false, false, fmt.Errorf("%w: flags", ErrMalformed)
		}
		d.Counted = b[2]&flagCounted != 0
		if d.Source == SourceReconcile && !d.Counted {
			return nil, false, false, fmt.Errorf("%w: a reconcile delta that does not count", ErrMalformed)
		}
		b = b[3:]
	case 3:
		if len(b) < 3 || b[2]&^(flagCounted|flagUserID) != 0 || b[2]&flagUserID == 0 {
			return nil, false, false, fmt.Errorf("%w: flags", ErrMalformed)
		}
		d.Counted = b[2]&flagCounted != 0
		if d.Source == SourceReconcile {
			return nil, false, false, fmt.Errorf("%w: a reconcile delta with a userid", ErrMalformed)
		}
		byUser = true
		b = b[3:]
	case 4:
		if len(b) < 3 || b[2]&^(flagCounted|flagUserID|flagArchive) != 0 || b[2]&(flagCounted|flagArchive) == flagCounted|flagArchive {
			return nil, false, false, fmt.Errorf("%w: flags", ErrMalformed)
		}
		d.Page.ArchiveOnly = b[2]&flagArchive != 0
		if !d.Source.Page() {
			return nil, false, false, fmt.Errorf("%w: a page event of source %d", ErrMalformed, d.Source)
		}
		d.Counted = b[2]&flagCounted != 0
		byUser = b[2]&flagUserID != 0
		page = true
		b = b[3:]
	default:
		return nil, false, false, fmt.Errorf("%w: version %d", ErrMalformed, b[0])
	}
	return b, byUser, page, nil
}

// unmarshalPage decodes a page event's version, IP and User-Agent into p
// and returns the bytes after them.
func unmarshalPage(b []byte, p *Page) ([]byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || v == 0 || v > 1<<32-1 {
		return nil, fmt.Errorf("%w: page version", ErrMalformed)
	}
	p.Version = uint32(v)
	b = b[n:]
	var err error
	if p.IP, b, err = field(b, "ip"); err != nil {
		return nil, err
	}
	if p.UserAgent, b, err = field(b, "user_agent"); err != nil {
		return nil, err
	}
	return b, nil
}

func field(b []byte, name string) (string, []byte, error) {
	l, n := binary.Uvarint(b)
	if n <= 0 || l > maxField || uint64(len(b)-n) < l {
		return "", nil, fmt.Errorf("%w: %s", ErrMalformed, name)
	}
	b = b[n:]
	return string(b[:l]), b[l:], nil
}
