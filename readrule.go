package yidu

// ReadRule is what makes a notice read (issue 39), chosen per notice:
// the app's read signals as before, or one of the reading page's signals.
type ReadRule string

// The read rules.
const (
	// ReadRuleApp: the app's read_signals decide (the default).
	ReadRuleApp ReadRule = "app"
	// ReadRuleLink: the reading page was opened.
	ReadRuleLink ReadRule = "link"
	// ReadRuleReadToEnd: the text's end and every attachment's last page
	// were on screen.
	ReadRuleReadToEnd ReadRule = "read_to_end"
	// ReadRuleAcknowledged: the reader pressed 我已阅读并知悉 after reading
	// to the end.
	ReadRuleAcknowledged ReadRule = "acknowledged"
)

// MaxMinReadSeconds bounds a notice's min_read_seconds (an hour).
const MaxMinReadSeconds = 3600

// ParseReadRule returns the rule named s; "" is ReadRuleApp.
func ParseReadRule(s string) (ReadRule, error) {
	switch r := ReadRule(s); r {
	case "":
		return ReadRuleApp, nil
	case ReadRuleApp, ReadRuleLink, ReadRuleReadToEnd, ReadRuleAcknowledged:
		return r, nil
	}
	return "", &FieldError{Field: "read_rule", Value: s, Echo: 32,
		Reason: "read_rule %q is not one of app, link, read_to_end, acknowledged"}
}

// Acknowledging reports whether r counts only acknowledgements, so that a
// material new version makes earlier ones stop counting.
func (r ReadRule) Acknowledging() bool { return r == ReadRuleAcknowledged }

// CheckMinReadSeconds checks a notice's min_read_seconds.
func CheckMinReadSeconds(n int) error {
	if n < 0 || n > MaxMinReadSeconds {
		return Fieldf("min_read_seconds", "min_read_seconds is %d; it is 0 to %d", n, MaxMinReadSeconds)
	}
	return nil
}

// Signal returns the one signal that makes a message read under r; ok
// is false for ReadRuleApp (the app's read_signals decide).
func (r ReadRule) Signal() (sig Signal, ok bool) {
	switch r {
	case ReadRuleLink:
		return SignalLink, true
	case ReadRuleReadToEnd:
		return SignalReadToEnd, true
	case ReadRuleAcknowledged:
		return SignalAcknowledged, true
	}
	return 0, false
}

// Code returns r as messages.read_rule stores it: the code of its signal,
// 0 for ReadRuleApp.
func (r ReadRule) Code() uint8 {
	if sig, ok := r.Signal(); ok {
		return uint8(sig)
	}
	return 0
}

// ReadRuleOfCode returns the rule messages.read_rule code stores; an
// unknown code is ReadRuleApp.
func ReadRuleOfCode(code uint8) ReadRule {
	for _, r := range []ReadRule{ReadRuleLink, ReadRuleReadToEnd, ReadRuleAcknowledged} {
		if r.Code() == code {
			return r
		}
	}
	return ReadRuleApp
}

// CountsAsRead reports whether signal s makes a message of app a under
// rule r read: r's signal alone, or the app's read signals under
// ReadRuleApp.
func (r ReadRule) CountsAsRead(a App, s Signal) bool {
	if sig, ok := r.Signal(); ok {
		return s == sig
	}
	return a.CountsAsRead(s)
}
