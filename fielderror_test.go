package yidu

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestFieldErrorEcho: a check that quotes what it refused answers the
// words the API always answered, the input cut to its echo limit without
// splitting a character ("…" where it was cut), and errors.As still finds
// the field; the error keeps the input whole.
func TestFieldErrorEcho(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	readRule := func(s string) error { _, err := ParseReadRule(s); return err }
	timezone := func(s string) error {
		sch := Schedule{Timezone: s, SendAt: now.Add(time.Hour)}
		return sch.Validate(now)
	}
	userID := func(s string) error {
		a := Audience{UserIDs: []string{"zhangsan", s}}
		return a.Validate()
	}
	// Each long input has a multi-byte character across its echo limit.
	long32 := strings.Repeat("a", 31) + "读" + "tail"
	long64 := "Europe/" + strings.Repeat("x", 56) + "é" + "/more"
	long70 := strings.Repeat("u", 69) + "名" + "zz"
	tests := []struct {
		name  string
		check func(string) error
		in    string
		field string
		want  string
	}{
		{"read_rule", readRule, "bogus", "read_rule",
			`invalid: read_rule "bogus" is not one of app, link, read_to_end, acknowledged`},
		{"read_rule quoted", readRule, "a\"b\n", "read_rule",
			`invalid: read_rule "a\"b\n" is not one of app, link, read_to_end, acknowledged`},
		{"read_rule at its limit", readRule, strings.Repeat("r", 32), "read_rule",
			`invalid: read_rule "` + strings.Repeat("r", 32) + `" is not one of app, link, read_to_end, acknowledged`},
		{"read_rule cut", readRule, long32, "read_rule",
			`invalid: read_rule "` + strings.Repeat("a", 31) + `…" is not one of app, link, read_to_end, acknowledged`},
		{"timezone", timezone, "Mars/Olympus", "timezone",
			`invalid: timezone "Mars/Olympus" is not an IANA time zone`},
		{"timezone cut", timezone, long64, "timezone",
			`invalid: timezone "Europe/` + strings.Repeat("x", 56) + `…" is not an IANA time zone`},
		{"userid", userID, "bad id", "audience.userids",
			`invalid: audience.userids: "bad id" is not a WeCom UserID`},
		{"userid cut", userID, long70, "audience.userids",
			`invalid: audience.userids: "` + strings.Repeat("u", 69) + `…" is not a WeCom UserID`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check(tc.in)
			if err == nil {
				t.Fatalf("%q: no error; want %q", tc.in, tc.want)
			}
			if got := fmt.Errorf("api: %w", err).Error(); got != "api: "+tc.want {
				t.Errorf("%q: error %q; want %q", tc.in, got, "api: "+tc.want)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, ErrInvalid) {
				t.Fatalf("%q: %v; want a FieldError at %s wrapping ErrInvalid", tc.in, err, tc.field)
			}
			if fe.Value != tc.in || fe.Why() != strings.TrimPrefix(tc.want, "invalid: ") {
				t.Errorf("%q: Value %q, Why %q; want the input whole and the sentence", tc.in, fe.Value, fe.Why())
			}
		})
	}
}
