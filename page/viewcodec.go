package page

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// A view is kept in Redis in a compact form of its own: every open writes
// one and every event reads one back, and encoding/json's reflection was
// the event's dearest step after the network (issue 50). The form is
// "v1" and then each field as <decimal length>':'<bytes>, in view's
// order, so no byte of a field can be taken for a separator. A view
// written as JSON by a replica of before this form (it lives viewTTL) is
// still read.

const viewForm = "v1"

func (v view) encode() []byte {
	b := make([]byte, 0, 96+len(v.App)+len(v.Corp)+len(v.MsgID)+len(v.UserID))
	b = append(b, viewForm...)
	for _, s := range [...]string{v.App, v.Corp, v.MsgID, v.UserID} {
		b = appendField(b, s)
	}
	for _, n := range [...]int64{int64(v.UID), int64(v.Version), v.ShownMs, int64(v.MinRead), int64(v.Material)} {
		b = appendField(b, strconv.FormatInt(n, 10))
	}
	return b
}

func appendField(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

var errViewForm = errors.New("view: not a view")

// decodeView reads a view encode wrote, or one of JSON.
func decodeView(raw []byte) (view, error) {
	var v view
	if len(raw) > 0 && raw[0] == '{' {
		err := json.Unmarshal(raw, &v)
		return v, err
	}
	rest, ok := bytes.CutPrefix(raw, []byte(viewForm))
	if !ok {
		return v, errViewForm
	}
	var strs [4]string
	for i := range strs {
		if strs[i], rest, ok = nextField(rest); !ok {
			return view{}, errViewForm
		}
	}
	var nums [5]int64
	for i := range nums {
		var s string
		if s, rest, ok = nextField(rest); !ok {
			return view{}, errViewForm
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return view{}, errViewForm
		}
		nums[i] = n
	}
	if len(rest) != 0 || nums[0] < 0 || nums[0] > 1<<32-1 {
		return view{}, errViewForm
	}
	return view{App: strs[0], Corp: strs[1], MsgID: strs[2], UserID: strs[3], UID: uint32(nums[0]),
		Version: int(nums[1]), ShownMs: nums[2], MinRead: int(nums[3]), Material: int(nums[4])}, nil
}

func nextField(b []byte) (string, []byte, bool) {
	i := bytes.IndexByte(b, ':')
	if i <= 0 || i > 10 {
		return "", nil, false
	}
	n, err := strconv.Atoi(string(b[:i]))
	if err != nil || n < 0 || n > len(b)-i-1 {
		return "", nil, false
	}
	return string(b[i+1 : i+1+n]), b[i+1+n:], true
}
