package evidence

import (
	"bytes"
	_ "embed"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"codeberg.org/go-pdf/fpdf"
)

// fontData is the PDFs' font, a subset of Droid Sans Fallback (Apache
// 2.0; how it was made: font/README.md) with every CJK Unified Ideograph
// U+4E00-U+9FA5.
//
//go:embed font/DroidSansFallback-URO.ttf
var fontData []byte

// fontCache cuts fontData down to the characters PDFs need
// (fpdf.UTF8CutFont). fpdf parses a font for every PDF in time that grows
// with its glyphs (34 ms for fontData's 21,000): a ZIP cuts once, for
// its template's words and its people's names, and each PDF then parses
// a font of a few hundred glyphs. A PDF with a character the cut lacks
// cuts again with it added.
type fontCache struct {
	mu    sync.Mutex
	runes map[rune]bool
	data  []byte
}

func newFontCache(texts ...string) *fontCache {
	c := &fontCache{runes: map[rune]bool{}}
	c.fontFor(append(texts, templateText)...)
	return c
}

// fontFor returns a font with every character of texts.
func (c *fontCache) fontFor(texts ...string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	missing := c.data == nil
	for _, t := range texts {
		for _, r := range t {
			if !c.runes[r] {
				c.runes[r] = true
				missing = true
			}
		}
	}
	if missing {
		rs := slices.Sorted(maps.Keys(c.runes))
		c.data = fpdf.UTF8CutFont(fontData, string(rs))
	}
	return c.data
}

// templateText holds every character the PDF's template may print: the
// lines of a record with one of everything, with and without a ledger,
// and printable ASCII.
var templateText = func() string {
	var b strings.Builder
	for r := rune(0x20); r < 0x7f; r++ {
		b.WriteRune(r)
	}
	s := &Service{zone: time.UTC}
	at := time.Unix(0, 0)
	rec := Record{Person: Person{Left: true, Departments: []Department{{ID: 1}}},
		Versions:   []Version{{N: 1, Reacknowledge: true}},
		Deliveries: []Delivery{{InvalidUser: true, Version: 1}},
		Signals:    []Signal{{VersionInferred: true, CountedAsRead: true, ClientIP: "x", Version: 1}},
		FollowUps:  []FollowUp{{Kind: "reminder", At: at}},
		Ledger:     []Entry{{}}}
	for _, connected := range []bool{true, false} {
		for _, cp := range []string{"", "yidu/x\n1\nAAAA\n", "yidu/x\n1\nAAAA\n\n— x y\n"} {
			rec.LedgerConnected, rec.Checkpoint = connected, cp
			for _, l := range s.pdfLines(rec) {
				b.WriteString(l.text)
			}
		}
	}
	b.WriteString(strings.Join(proofWords, ""))
	for _, m := range []map[string]string{statusWords, signalWords, sourceWords, followUpWords, whyWords, entryWords, outcomeWords} {
		for _, w := range m {
			b.WriteString(w)
		}
	}
	b.WriteString(pageTitle + footerText + overflowText + "本无正文版本仅卡片发送记录阅读未读账本中此人的。")
	return b.String()
}()

func checkFont() error {
	if !bytes.HasPrefix(fontData, []byte{0, 1, 0, 0}) {
		return errors.New("evidence: the embedded font is not TrueType")
	}
	return nil
}
