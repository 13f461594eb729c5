package page

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

// testViewKey signs the fixtures' views.
var testViewKey = ViewKey("hr", "the app's secret", "its callback's EncodingAESKey")

// TestViewToken: a view signed here opens to what was signed and its
// bind; a byte changed anywhere, another key, a view past viewTTL, a cut
// or over-long token is refused, and no token outgrows what an event may
// name.
func TestViewToken(t *testing.T) {
	now := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	vs := newViewSigner(testViewKey)
	v := view{App: "hr", Corp: "ww1", MsgID: "m:1", UserID: "张三", UID: 4294967295, Version: 3, ShownMs: now.UnixMilli() - 1000, MinRead: 30, Material: 2}
	tok := vs.sign(v)
	got, bind, err := vs.open(tok, now)
	want := v
	want.App, want.Corp, want.MsgID, want.UserID = "", "", "", ""
	if err != nil || got != want || bind != viewBind("ww1", "hr", "m:1", "张三") {
		t.Fatalf("open(sign(%+v)) = %+v, %x, %v", v, got, bind, err)
	}
	for _, other := range [][4]string{{"ww2", "hr", "m:1", "张三"}, {"ww1", "ops", "m:1", "张三"}, {"ww1", "hr", "m:2", "张三"}, {"ww1", "hr", "m:1", "李四"}, {"ww1", "hrm", ":1", "张三"}} {
		if viewBind(other[0], other[1], other[2], other[3]) == bind {
			t.Errorf("bind of %q equals the view's", other)
		}
	}
	// Every bound at once still fits an event's 64 characters.
	max := view{UID: 1<<32 - 1, Version: 1<<31 - 1, ShownMs: maxShownMs, MinRead: 1<<31 - 1, Material: 1<<31 - 1}
	if long := vs.sign(max); len(long) > maxViewToken {
		t.Errorf("the longest token is %d characters; an event names at most %d", len(long), maxViewToken)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	for i := range raw {
		for _, bit := range []byte{1, 0x80} {
			b := append([]byte(nil), raw...)
			b[i] ^= bit
			if v, _, err := vs.open(base64.RawURLEncoding.EncodeToString(b), now); err == nil {
				t.Errorf("byte %d changed (^%#x): opened %+v", i, bit, v)
			}
		}
	}
	for name, bad := range map[string]string{
		"another key":   newViewSigner(ViewKey("hr", "another secret")).sign(v),
		"another app":   newViewSigner(ViewKey("ops", "the app's secret", "its callback's EncodingAESKey")).sign(v),
		"cut":           tok[:len(tok)-1],
		"one more byte": base64.RawURLEncoding.EncodeToString(append(append([]byte(nil), raw...), 0)),
		"empty":         "",
		"not base64":    strings.Repeat("*", 40),
		"over-long":     strings.Repeat("A", maxViewToken+4),
	} {
		if v, _, err := vs.open(bad, now); err == nil {
			t.Errorf("%s: opened %+v", name, v)
		}
	}
	// A view lives viewTTL from when it was shown.
	if _, _, err := vs.open(tok, now.Add(viewTTL-time.Second)); err != nil {
		t.Errorf("a view within viewTTL: %v", err)
	}
	if _, _, err := vs.open(tok, now.Add(viewTTL+time.Second)); !errors.Is(err, ErrUnknownView) {
		t.Errorf("a view past viewTTL: %v; want ErrUnknownView", err)
	}
	if ViewKey("hr") != nil || ViewKey("hr", "", "") != nil || len(ViewKey("hr", "", "k")) != 32 {
		t.Error("ViewKey: want nil without a secret, 32 bytes with one")
	}
}

// FuzzViewToken: no token opens unless this key signed it; whatever
// opens signs back to itself.
func FuzzViewToken(f *testing.F) {
	vs := newViewSigner(testViewKey)
	now := time.UnixMilli(1_765_000_000_000)
	f.Add(vs.sign(view{UID: 7, Version: 2, ShownMs: now.UnixMilli(), MinRead: 5}))
	f.Add("AQcC")
	f.Add("")
	f.Fuzz(func(t *testing.T, tok string) {
		v, _, err := vs.open(tok, now)
		if err != nil {
			return
		}
		raw, _ := base64.RawURLEncoding.DecodeString(tok)
		back := vs.sign(view{UID: v.UID, Version: v.Version, ShownMs: v.ShownMs, MinRead: v.MinRead, Material: v.Material})
		if b, _ := base64.RawURLEncoding.DecodeString(back); string(b[:len(b)-viewBindLen-viewMACLen]) != string(raw[:len(raw)-viewBindLen-viewMACLen]) {
			t.Fatalf("%q opened to %+v, which signs to %q", tok, v, back)
		}
	})
}
