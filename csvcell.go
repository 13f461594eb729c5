package yidu

import "strings"

// CSVCell stops a spreadsheet from evaluating a cell as a formula (CSV
// injection, OWASP): a cell starting with = + - @ tab or CR gets a leading
// '. Spreadsheets in locales whose list separator is ';' split a cell
// there, so each ';'-separated part is neutralised too (the writer must
// then quote such a cell). Every CSV yidu writes for people to open
// (export.csv, an evidence pack's manifest.csv) passes its text through
// it.
func CSVCell(cell string) string {
	if !strings.Contains(cell, ";") {
		return csvPart(cell)
	}
	parts := strings.Split(cell, ";")
	for i, p := range parts {
		parts[i] = csvPart(p)
	}
	return strings.Join(parts, ";")
}

func csvPart(part string) string {
	// A spreadsheet that splits on ';' may trim the space after it: the
	// first byte that is not a space decides.
	lead := strings.TrimLeft(part, " ")
	if lead == "" {
		return part
	}
	switch lead[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + part
	}
	return part
}
