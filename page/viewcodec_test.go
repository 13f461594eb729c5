package page

import (
	"encoding/json"
	"strconv"
	"testing"
)

func TestViewCodec(t *testing.T) {
	full := view{App: "hr", Corp: "ww1", MsgID: "m:1:2", UserID: "张三:1v1", UID: 4294967295, Version: 3, ShownMs: 1765000000123, MinRead: 30, Material: 2}
	for _, v := range []view{full, {}, {App: "a", UserID: "12:ab"}} {
		got, err := decodeView(v.encode())
		if err != nil || got != v {
			t.Errorf("decodeView(encode(%+v)) = %+v, %v", v, got, err)
		}
	}
	// A view a replica of before the compact form wrote.
	old, _ := json.Marshal(full)
	if got, err := decodeView(old); err != nil || got != full {
		t.Errorf("decodeView(JSON) = %+v, %v; want %+v", got, err, full)
	}
	enc := full.encode()
	for name, raw := range map[string][]byte{
		"empty":          nil,
		"no form":        enc[2:],
		"other form":     append([]byte("v2"), enc[2:]...),
		"cut":            enc[:len(enc)-1],
		"trailing":       append(append([]byte{}, enc...), 'x'),
		"long length":    []byte("v1999:a"),
		"negative":       []byte("v1-1:"),
		"no colon":       []byte("v12ab"),
		"uid over 32bit": view{UID: 1}.encodeWith(4294967296),
		"number not int": []byte("v10:0:0:0:1:x1:01:01:01:0"),
		"bad json":       []byte("{"),
	} {
		if v, err := decodeView(raw); err == nil {
			t.Errorf("%s: decodeView(%q) = %+v, nil; want an error", name, raw, v)
		}
	}
}

// encodeWith is encode with the uid field replaced, for a uid no view holds.
func (v view) encodeWith(uid int64) []byte {
	b := []byte(viewForm)
	for _, s := range [...]string{v.App, v.Corp, v.MsgID, v.UserID} {
		b = appendField(b, s)
	}
	for _, s := range []string{strconv.FormatInt(uid, 10), "0", "0", "0", "0"} {
		b = appendField(b, s)
	}
	return b
}

func FuzzDecodeView(f *testing.F) {
	f.Add(view{App: "hr", Corp: "ww1", MsgID: "m1", UserID: "zs", UID: 7, Version: 2, ShownMs: 1, MinRead: 5}.encode())
	f.Add([]byte(`{"app":"hr","uid":3}`))
	f.Add([]byte("v10:"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, err := decodeView(raw)
		if err != nil || (len(raw) > 0 && raw[0] == '{') {
			return
		}
		if got, err := decodeView(v.encode()); err != nil || got != v {
			t.Fatalf("round trip of %+v = %+v, %v", v, got, err)
		}
	})
}
