// Package delta is the wire format of one new read on the deltas topic
// (yidu.reads): written by the read path after the bit is set, read by
// flushd. The encoding is documented in docs/architecture.md.
//
// Value layout (all integers big-endian or uvarint as noted):
//
//	byte    version (1)
//	byte    source (see Source)
//	uvarint uid
//	varint  read_time, unix seconds
//	uvarint len(corp_id), corp_id bytes
//	uvarint len(msgid),   msgid bytes
//
// The record key is corp_id + "/" + msgid, so every delta of one message
// lands on one partition, in order.
package delta

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Version is the encoding version written by Marshal.
const Version = 1

// Source says which signal produced a read.
type Source uint8

// Sources of a read; the values are stored in message_read_record.source.
const (
	SourceUnknown    Source = 0
	SourceCard       Source = 1 // template_card_event button press
	SourceEnterAgent Source = 2 // enter_agent after the message was sent
	SourceLink       Source = 3 // tracked link opened through OAuth2
	SourceReconcile  Source = 4 // re-emitted by yidu reconcile
)

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
	}
	return "unknown"
}

// Delta is one new read: recipient uid of message (CorpID, MsgID) read at
// ReadTime (unix seconds, the WeCom event's CreateTime).
type Delta struct {
	CorpID   string
	MsgID    string
	UID      uint32
	ReadTime int64
	Source   Source
}

// ErrMalformed is returned by Unmarshal for a value it cannot decode.
var ErrMalformed = errors.New("delta: malformed value")

// maxField bounds corp_id and msgid lengths on decode.
const maxField = 255

// Key returns the Kafka record key of the message's deltas.
func Key(corpID, msgID string) []byte {
	k := make([]byte, 0, len(corpID)+1+len(msgID))
	k = append(k, corpID...)
	k = append(k, '/')
	return append(k, msgID...)
}

// AppendMarshal appends d's encoding to b and returns the extended slice.
func AppendMarshal(b []byte, d Delta) []byte {
	b = append(b, Version, byte(d.Source))
	b = binary.AppendUvarint(b, uint64(d.UID))
	b = binary.AppendVarint(b, d.ReadTime)
	b = binary.AppendUvarint(b, uint64(len(d.CorpID)))
	b = append(b, d.CorpID...)
	b = binary.AppendUvarint(b, uint64(len(d.MsgID)))
	return append(b, d.MsgID...)
}

// Marshal returns d's encoding.
func Marshal(d Delta) []byte {
	return AppendMarshal(make([]byte, 0, 16+len(d.CorpID)+len(d.MsgID)), d)
}

// Unmarshal decodes one value written by Marshal.
func Unmarshal(b []byte) (Delta, error) {
	var d Delta
	if len(b) < 2 {
		return d, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	if b[0] != Version {
		return d, fmt.Errorf("%w: version %d", ErrMalformed, b[0])
	}
	d.Source = Source(b[1])
	b = b[2:]
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
	var err error
	if s, b, err = field(b, "corp_id"); err != nil {
		return d, err
	}
	d.CorpID = s
	if s, b, err = field(b, "msgid"); err != nil {
		return d, err
	}
	d.MsgID = s
	if len(b) != 0 {
		return d, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(b))
	}
	return d, nil
}

func field(b []byte, name string) (string, []byte, error) {
	l, n := binary.Uvarint(b)
	if n <= 0 || l > maxField || uint64(len(b)-n) < l {
		return "", nil, fmt.Errorf("%w: %s", ErrMalformed, name)
	}
	b = b[n:]
	return string(b[:l]), b[l:], nil
}
