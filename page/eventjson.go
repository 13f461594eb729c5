package page

import "unicode/utf8"

// An event's body is read without encoding/json's reflection when it has
// the shape the page's script sends (issue 50: one parse per event of the
// storm): one object of "event", "version" and "view", each at most once
// and spelled so, plain strings (no escape, valid UTF-8), a positive
// decimal version, JSON whitespace, nothing after. Anything else, hostile
// or merely unusual (escapes, other keys or spellings of them, which
// encoding/json matches without regard to case, a key twice, null, a
// number with a fraction, an exponent or a sign, invalid UTF-8, data
// after the object), is left to strictJSON, so every body decodes as it
// did and every refusal keeps its words: FuzzParseEventSame holds the two
// to the same answer.

// eventBody is an event's body as sent. An alias of a struct of no name,
// as it was, so that encoding/json's errors name it as they did.
type eventBody = struct {
	Event   string `json:"event"`
	Version int    `json:"version"`
	View    string `json:"view"`
}

// decodeEvent decodes body into b: the fast path, else strictJSON.
func decodeEvent(body []byte, b *eventBody) error {
	if fastEvent(body, b) {
		return nil
	}
	var v eventBody // on the heap in this path only
	err := strictJSON(body, &v)
	*b = v
	return err
}

// fastEvent decodes body into b when body has the plain shape, and
// reports whether it did; when not, b holds whatever it read.
func fastEvent(body []byte, b *eventBody) bool {
	p := eventScanner{b: body}
	if !p.skip('{') {
		return false
	}
	if p.skip('}') {
		return p.end()
	}
	var seen [3]bool
	for {
		key, ok := p.raw()
		if !ok || !p.skip(':') {
			return false
		}
		var i int
		switch string(key) {
		case "event":
			i, ok = 0, p.event(&b.Event)
		case "version":
			i, ok = 1, p.positive(&b.Version)
		case "view":
			i, ok = 2, p.str(&b.View)
		default:
			return false
		}
		if !ok || seen[i] {
			return false
		}
		seen[i] = true
		if p.skip('}') {
			return p.end()
		}
		if !p.skip(',') {
			return false
		}
	}
}

// eventScanner reads a body from its start.
type eventScanner struct {
	b []byte
	i int
}

// space skips JSON whitespace.
func (p *eventScanner) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// skip skips whitespace and then c, and reports whether c was there.
func (p *eventScanner) skip(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only whitespace is left.
func (p *eventScanner) end() bool {
	p.space()
	return p.i == len(p.b)
}

// raw reads a string without escapes or control characters, of valid
// UTF-8, and returns its bytes (encoding/json takes such a string's bytes
// as they are).
func (p *eventScanner) raw() ([]byte, bool) {
	if !p.skip('"') {
		return nil, false
	}
	start := p.i
	for ; p.i < len(p.b); p.i++ {
		switch c := p.b[p.i]; {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return s, utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// str reads a plain string into dst.
func (p *eventScanner) str(dst *string) bool {
	raw, ok := p.raw()
	*dst = string(raw)
	return ok
}

// event is str without a copy of the known events.
func (p *eventScanner) event(dst *string) bool {
	raw, ok := p.raw()
	switch string(raw) {
	case "read_to_end":
		*dst = "read_to_end"
	case "acknowledged":
		*dst = "acknowledged"
	default:
		*dst = string(raw)
	}
	return ok
}

// positive reads into dst a decimal integer of 1 to 18 digits without
// sign or leading zero: what encoding/json reads into an int as is. What
// follows it must be ',' or '}' (fastEvent checks), so neither a
// fraction nor an exponent passes.
func (p *eventScanner) positive(dst *int) bool {
	p.space()
	n, start := 0, p.i
	for ; p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9'; p.i++ {
		if p.i-start == 18 {
			return false
		}
		n = n*10 + int(p.b[p.i]-'0')
	}
	*dst = n
	return p.i > start && p.b[start] != '0'
}
