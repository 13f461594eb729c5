package callback

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrBadXML is an envelope or decrypted message that is not the flat XML
// WeCom sends, or lacks a field its type needs (WeCom's code -40002).
var ErrBadXML = errors.New("callback: bad xml")

// maxDepth bounds element nesting: WeCom's messages are flat apart from a
// few list fields (SelectedItems/SelectedItem/OptionIds/OptionId), depth 5.
const maxDepth = 8

// field names the top-level elements the receiver reads; anything else is
// parsed (for well-formedness) and skipped.
type field uint8

const (
	fToUserName field = iota
	fFromUserName
	fCreateTime
	fMsgType
	fEvent
	fEventKey
	fTaskID
	fCardType
	fResponseCode
	fAgentID
	fChangeType
	fUserID
	fNewUserID
	fDepartment
	fMsgID
	fEncrypt
	nFields
)

func fieldOf(name string) (field, bool) {
	switch name {
	case "ToUserName":
		return fToUserName, true
	case "FromUserName":
		return fFromUserName, true
	case "CreateTime":
		return fCreateTime, true
	case "MsgType":
		return fMsgType, true
	case "Event":
		return fEvent, true
	case "EventKey":
		return fEventKey, true
	case "TaskId":
		return fTaskID, true
	case "CardType":
		return fCardType, true
	case "ResponseCode":
		return fResponseCode, true
	case "AgentID":
		return fAgentID, true
	case "ChangeType":
		return fChangeType, true
	case "UserID":
		return fUserID, true
	case "NewUserID":
		return fNewUserID, true
	case "Department":
		return fDepartment, true
	case "MsgId":
		return fMsgID, true
	case "Encrypt":
		return fEncrypt, true
	}
	return 0, false
}

// fields holds the text of the known top-level elements of one message.
type fields struct {
	v    [nFields]string
	seen uint32
}

func (f *fields) has(k field) bool { return f.seen&(1<<k) != 0 }

// parseFlat parses WeCom's XML shape, <xml><Tag>text or
// <![CDATA[..]]></Tag>...</xml>, into f. encoding/xml costs tens of
// allocations per message; this parser returns substrings of s and
// allocates only when a value needs unescaping.
//
// It accepts a strict subset of XML, on purpose: no prolog, DOCTYPE,
// comments, processing instructions, attributes, namespaces or entities
// beyond the five predefined ones and character references; valid UTF-8 of
// XML characters only; nesting at most maxDepth; each known field at most
// once. Whatever it accepts, encoding/xml reads the same way (fuzzed).
func parseFlat(s string, f *fields) error {
	if err := checkChars(s); err != nil {
		return err
	}
	p := parser{s: s}
	p.skipSpace()
	if !strings.HasPrefix(p.s[p.i:], "<xml>") {
		return p.errorf("want <xml> root")
	}
	p.i += len("<xml>")
	for {
		p.skipSpace()
		if strings.HasPrefix(p.s[p.i:], "</xml>") {
			p.i += len("</xml>")
			break
		}
		name, empty, err := p.startTag()
		if err != nil {
			return err
		}
		k, known := fieldOf(name)
		var val string
		if !empty {
			if val, err = p.content(name, 2, known); err != nil {
				return err
			}
		}
		if known {
			if f.has(k) {
				return p.errorf("duplicate <%s>", name)
			}
			f.seen |= 1 << k
			f.v[k] = val
		}
	}
	p.skipSpace()
	if p.i != len(p.s) {
		return p.errorf("content after </xml>")
	}
	return nil
}

// checkChars rejects invalid UTF-8 and characters XML does not allow.
func checkChars(s string) error {
	for i := 0; i < len(s); {
		// Eight bytes at a time while they are all printable ASCII (the
		// whole of a base64 Encrypt): no byte < 0x20, none ≥ 0x80.
		if i+8 <= len(s) {
			x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
				uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
			const lo, hi = 0x0101010101010101, 0x8080808080808080
			if (x|(x-0x20*lo))&hi == 0 {
				i += 8
				continue
			}
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
				return fmt.Errorf("%w: control character %#x at %d", ErrBadXML, c, i)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return fmt.Errorf("%w: invalid UTF-8 at %d", ErrBadXML, i)
		}
		if !xmlChar(r) {
			return fmt.Errorf("%w: character %U at %d", ErrBadXML, r, i)
		}
		i += n
	}
	return nil
}

// xmlChar reports whether r is in XML's Char production.
func xmlChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}

type parser struct {
	s string
	i int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: at %d: %s", ErrBadXML, p.i, fmt.Sprintf(format, args...))
}

func (p *parser) skipSpace() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\r', '\n':
			p.i++
		default:
			return
		}
	}
}

func nameStart(c byte) bool { return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_' }
func nameChar(c byte) bool  { return nameStart(c) || c >= '0' && c <= '9' || c == '-' || c == '.' }

// startTag reads <Name> or <Name/> at p.i.
func (p *parser) startTag() (name string, empty bool, err error) {
	if p.i+1 >= len(p.s) || p.s[p.i] != '<' || !nameStart(p.s[p.i+1]) {
		return "", false, p.errorf("want a start tag")
	}
	j := p.i + 2
	for j < len(p.s) && nameChar(p.s[j]) {
		j++
	}
	name = p.s[p.i+1 : j]
	switch {
	case strings.HasPrefix(p.s[j:], ">"):
		p.i = j + 1
	case strings.HasPrefix(p.s[j:], "/>"):
		p.i = j + 2
		empty = true
	default:
		p.i = j
		return "", false, p.errorf("want > after <%s (no attributes or namespaces)", name)
	}
	return name, empty, nil
}

// content reads the content of element name up to and including its end
// tag. With keep, it returns the element's own character data (text and
// CDATA, not that of child elements, as encoding/xml does for a string).
func (p *parser) content(name string, depth int, keep bool) (string, error) {
	var (
		val  string // the value while it is one untouched substring
		buf  []byte // the value once it needed copying
		segs int
	)
	add := func(seg string, raw bool) {
		if !keep {
			return
		}
		segs++
		if segs == 1 && buf == nil && (!raw || strings.IndexByte(seg, '\r') < 0) {
			val = seg
			return
		}
		if buf == nil {
			buf = append(make([]byte, 0, len(val)+len(seg)+16), val...)
		}
		if !raw {
			buf = append(buf, seg...)
			return
		}
		// encoding/xml rewrites unescaped \r\n and \r to \n, per segment.
		for k := 0; k < len(seg); k++ {
			switch {
			case seg[k] == '\r':
				buf = append(buf, '\n')
			case seg[k] == '\n' && k > 0 && seg[k-1] == '\r':
			default:
				buf = append(buf, seg[k])
			}
		}
	}
	for {
		if p.i >= len(p.s) {
			return "", p.errorf("unclosed <%s>", name)
		}
		rest := p.s[p.i:]
		switch {
		case strings.HasPrefix(rest, "<![CDATA["):
			end := strings.Index(rest[9:], "]]>")
			if end < 0 {
				return "", p.errorf("unclosed CDATA")
			}
			add(rest[9:9+end], true)
			p.i += 9 + end + 3
		case strings.HasPrefix(rest, "</"):
			if !strings.HasPrefix(rest[2:], name) || !strings.HasPrefix(rest[2+len(name):], ">") {
				return "", p.errorf("want </%s>", name)
			}
			p.i += 2 + len(name) + 1
			if buf != nil {
				return string(buf), nil
			}
			return val, nil
		case rest[0] == '<':
			if depth >= maxDepth {
				return "", p.errorf("nested deeper than %d", maxDepth)
			}
			child, empty, err := p.startTag()
			if err != nil {
				return "", err
			}
			if !empty {
				if _, err := p.content(child, depth+1, false); err != nil {
					return "", err
				}
			}
		case rest[0] == '&':
			r, n, ok := entity(rest)
			if !ok {
				return "", p.errorf("unsupported entity")
			}
			var e [utf8.UTFMax]byte
			add(string(e[:utf8.EncodeRune(e[:], r)]), false)
			p.i += n
		default:
			end := strings.IndexAny(rest, "<&")
			if end < 0 {
				end = len(rest)
			}
			if strings.Contains(rest[:end], "]]>") {
				return "", p.errorf("]]> outside CDATA")
			}
			add(rest[:end], true)
			p.i += end
		}
	}
}

// entity decodes the reference at the start of s: one of the five
// predefined entities or a character reference to an XML character.
func entity(s string) (r rune, n int, ok bool) {
	end := strings.IndexByte(s, ';')
	if end < 2 || end > 12 {
		return 0, 0, false
	}
	switch name := s[1:end]; name {
	case "lt":
		return '<', end + 1, true
	case "gt":
		return '>', end + 1, true
	case "amp":
		return '&', end + 1, true
	case "apos":
		return '\'', end + 1, true
	case "quot":
		return '"', end + 1, true
	default:
		if name[0] != '#' || len(name) < 2 {
			return 0, 0, false
		}
		digits, base := name[1:], rune(10)
		if digits[0] == 'x' {
			digits, base = digits[1:], 16
		}
		if digits == "" {
			return 0, 0, false
		}
		for k := 0; k < len(digits); k++ {
			d := rune(-1)
			switch c := digits[k]; {
			case c >= '0' && c <= '9':
				d = rune(c - '0')
			case base == 16 && c >= 'a' && c <= 'f':
				d = rune(c-'a') + 10
			case base == 16 && c >= 'A' && c <= 'F':
				d = rune(c-'A') + 10
			}
			if d < 0 {
				return 0, 0, false
			}
			if r = r*base + d; r > utf8.MaxRune {
				return 0, 0, false
			}
		}
		if !xmlChar(r) {
			return 0, 0, false
		}
		return r, end + 1, true
	}
}
