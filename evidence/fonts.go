package evidence

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
)

// The PDFs' fonts, subsets of Droid Sans Fallback (Apache 2.0; how they
// were made: font/README.md). fpdf parses a font for each PDF in time that
// grows with its glyphs, so the small one sets every PDF whose text it
// covers and the larger one only the rest.
var (
	//go:embed font/DroidSansFallback-GB2312.ttf
	fontCommon []byte
	//go:embed font/DroidSansFallback-GB2312.runes
	runesCommon string
	//go:embed font/DroidSansFallback-URO.ttf
	fontWide []byte
)

// fonts holds the embedded fonts and what the small one covers.
type fonts struct {
	common map[rune]bool
}

func loadFonts() (*fonts, error) {
	f := &fonts{common: map[rune]bool{}}
	sc := bufio.NewScanner(strings.NewReader(runesCommon))
	for sc.Scan() {
		lo, hi, ok := strings.Cut(strings.TrimSpace(sc.Text()), "-")
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(lo, 16, 32)
		b, err2 := strconv.ParseUint(hi, 16, 32)
		if err1 != nil || err2 != nil || b < a {
			return nil, fmt.Errorf("evidence: font coverage line %q", sc.Text())
		}
		for r := a; r <= b; r++ {
			f.common[rune(r)] = true
		}
	}
	if len(f.common) == 0 || !bytes.HasPrefix(fontCommon, []byte{0, 1, 0, 0}) || !bytes.HasPrefix(fontWide, []byte{0, 1, 0, 0}) {
		return nil, fmt.Errorf("evidence: embedded fonts are not TrueType")
	}
	return f, nil
}

// pick returns the font that covers every rune of texts: the small one
// when it does, else the wide one.
func (f *fonts) pick(texts ...string) []byte {
	for _, t := range texts {
		for _, r := range t {
			if r < 0x80 || r == '\n' {
				continue
			}
			if !f.common[r] {
				return fontWide
			}
		}
	}
	return fontCommon
}
