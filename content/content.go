// Package content is a notice's content as yidu keeps it (issue 39): the
// text, written in Markdown (CommonMark with tables) and rendered to HTML
// that is safe to show inside the reading page, the attachments' types and
// limits, and the canonical hash of a version.
//
// Rendering is two walls, not one: goldmark renders no raw HTML and drops
// dangerous link schemes, and bluemonday then keeps only an allow-list of
// elements and attributes. No script, no style, no inline event handler, no
// image (remote images would tell a third party who read the notice and
// when; pictures are attachments, shown by the page) survives either.
package content

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/yidu-io/yidu"
)

// Limits of a notice's content.
const (
	// MaxMarkdown is the largest text, in bytes of UTF-8 Markdown.
	MaxMarkdown = 200 << 10
	// MaxAttachmentSize is the largest attachment, in bytes.
	MaxAttachmentSize = 20 << 20
	// MaxAttachments is how many attachments one notice may carry.
	MaxAttachments = 10
	// MaxNameBytes bounds an attachment's file name.
	MaxNameBytes = 255
)

// md renders CommonMark with GFM tables; no raw HTML (goldmark's default:
// it writes "<!-- raw HTML omitted -->", which the sanitizer drops too).
var md = goldmark.New(
	goldmark.WithExtensions(extension.NewTable(extension.WithTableCellAlignMethod(extension.TableCellAlignAttribute))),
)

// policy is the allow-list the rendered HTML passes through. It is built
// once; bluemonday's Policy is safe for concurrent use after building.
var policy = newPolicy()

func newPolicy() *bluemonday.Policy {
	p := bluemonday.NewPolicy()
	p.AllowElements("p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6",
		"ul", "ol", "li", "blockquote", "pre", "code", "em", "strong", "del", "s",
		"table", "thead", "tbody", "tr")
	p.AllowAttrs("align").Matching(regexp.MustCompile(`^(left|center|right)$`)).OnElements("th", "td")
	p.AllowElements("th", "td")
	p.AllowAttrs("start").Matching(bluemonday.Integer).OnElements("ol")
	// No id attribute at all: a heading named "ack" or "notice-end" must
	// not stand in for the reading page's own elements.
	p.AllowAttrs("href").OnElements("a")
	p.AllowURLSchemes("http", "https", "mailto")
	p.AllowRelativeURLs(true)
	p.RequireParseableURLs(true)
	p.RequireNoReferrerOnLinks(true)
	p.RequireNoFollowOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	return p
}

// Render turns a notice's Markdown into the HTML the reading page shows.
// The text must be valid UTF-8 of at most MaxMarkdown bytes; anything else
// is refused with yidu.ErrInvalid.
func Render(markdown string) (string, error) {
	if err := CheckMarkdown(markdown); err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := md.Convert([]byte(markdown), &buf); err != nil {
		return "", fmt.Errorf("content: render: %w", err)
	}
	return policy.Sanitize(buf.String()), nil
}

// CheckMarkdown checks a text's size and encoding.
func CheckMarkdown(markdown string) error {
	if len(markdown) > MaxMarkdown {
		return yidu.Fieldf("content.markdown", "content.markdown is %d bytes; at most %d", len(markdown), MaxMarkdown)
	}
	if !utf8.ValidString(markdown) {
		return yidu.Fieldf("content.markdown", "content.markdown is not valid UTF-8")
	}
	if strings.ContainsRune(markdown, 0) {
		return yidu.Fieldf("content.markdown", "content.markdown contains a NUL character")
	}
	return nil
}

// Type is an attachment's media type, always sniffed from its bytes.
type Type string

// The attachment types yidu keeps.
const (
	TypePDF  Type = "application/pdf"
	TypePNG  Type = "image/png"
	TypeJPEG Type = "image/jpeg"
)

// Valid reports whether t is one of the kept types.
func (t Type) Valid() bool { return t == TypePDF || t == TypePNG || t == TypeJPEG }

// Image reports whether the page shows t as an image.
func (t Type) Image() bool { return t == TypePNG || t == TypeJPEG }

// Sniff returns the type of an attachment from its first bytes: a PDF
// ("%PDF-"), a PNG (its 8-byte signature) or a JPEG (SOI and a marker).
// What the client says the type is, is never asked: a renamed HTML file
// stays refused. Anything else wraps yidu.ErrInvalid.
func Sniff(head []byte) (Type, error) {
	switch {
	case bytes.HasPrefix(head, []byte("%PDF-")):
		return TypePDF, nil
	case bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")):
		return TypePNG, nil
	case bytes.HasPrefix(head, []byte{0xFF, 0xD8, 0xFF}):
		return TypeJPEG, nil
	}
	return "", yidu.Invalidf("an attachment must be a PDF, PNG or JPEG file")
}

// CleanName returns the attachment's file name as yidu keeps it: the last
// element of whatever path the browser sent, without control characters,
// at most MaxNameBytes bytes. An empty or invalid name wraps yidu.ErrInvalid.
func CleanName(name string) (string, error) {
	if !utf8.ValidString(name) {
		return "", yidu.Invalidf("the file name is not valid UTF-8")
	}
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '"' || unicode.Is(unicode.Bidi_Control, r) {
			return -1
		}
		return r
	}, name)
	name = strings.TrimSpace(name)
	if name == "" || name == "." || name == ".." {
		return "", yidu.Invalidf("the file needs a name")
	}
	if len(name) > MaxNameBytes {
		return "", yidu.Invalidf("the file name is %d bytes; at most %d", len(name), MaxNameBytes)
	}
	return name, nil
}

// Hash is a SHA-256, written as 64 lower-case hex digits.
type Hash [sha256.Size]byte

// Sum returns the SHA-256 of b.
func Sum(b []byte) Hash { return sha256.Sum256(b) }

// String returns h in lower-case hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// ParseHash parses 64 lower-case hex digits.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*sha256.Size || strings.ToLower(s) != s {
		return h, yidu.Invalidf("a sha256 is 64 lower-case hex digits")
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, yidu.Invalidf("a sha256 is 64 lower-case hex digits")
	}
	return h, nil
}

// VersionHash is the canonical hash of one version of a notice: what HR
// can point to as "this version of this rule". It covers the title, the
// rendered (sanitized) text and the attachments' hashes in their order,
// written as (docs/api.md, "Versions"):
//
//	yidu-notice-version:1\n
//	title:<bytes>:<title>\n
//	text:<bytes>:<html>\n
//	attachments:<n>\n
//	<sha256 hex>\n            (one line per attachment, in order)
//
// where <bytes> is the decimal length in bytes of the UTF-8 string that
// follows it, so no choice of title or text can make two versions collide.
func VersionHash(title, html string, attachments []Hash) Hash {
	h := sha256.New()
	var b strings.Builder
	b.WriteString("yidu-notice-version:1\n")
	b.WriteString("title:" + strconv.Itoa(len(title)) + ":" + title + "\n")
	b.WriteString("text:" + strconv.Itoa(len(html)) + ":" + html + "\n")
	b.WriteString("attachments:" + strconv.Itoa(len(attachments)) + "\n")
	for _, a := range attachments {
		b.WriteString(a.String() + "\n")
	}
	h.Write([]byte(b.String()))
	var out Hash
	copy(out[:], h.Sum(nil))
	return out
}
