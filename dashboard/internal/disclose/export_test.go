package disclose

import (
	"encoding/csv"
	"slices"
	"strings"
	"testing"
)

func TestCSVRow(t *testing.T) {
	tests := []struct {
		fields []string
		want   string
	}{
		{[]string{"a", "b"}, "a,b\n"},
		{[]string{"", "x"}, ",x\n"},
		{[]string{";'=1+1", "b"}, "\";'=1+1\",b\n"},
		{[]string{"a,b", `say "hi"`}, "\"a,b\",\"say \"\"hi\"\"\"\n"},
		{[]string{"line\nbreak", " lead", "trail "}, "\"line\nbreak\",\" lead\",\"trail \"\n"},
		{[]string{"张三", "研发; 销售"}, "张三,\"研发; 销售\"\n"},
	}
	for _, tt := range tests {
		if got := string(csvRow(nil, tt.fields)); got != tt.want {
			t.Errorf("csvRow(%q) = %q; want %q", tt.fields, got, tt.want)
		}
		recs, err := csv.NewReader(strings.NewReader(tt.want)).ReadAll()
		if err != nil || len(recs) != 1 || !slices.Equal(recs[0], tt.fields) {
			t.Errorf("encoding/csv reads %q as %q, %v; want %q", tt.want, recs, err, tt.fields)
		}
	}
}

func TestNeutralise(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""}, {"张三", "张三"}, {"=1+1", "'=1+1"}, {"+1", "'+1"}, {"-1", "'-1"}, {"@SUM(A1)", "'@SUM(A1)"},
		{"\tx", "'\tx"}, {"\rx", "'\rx"}, {"a=b", "a=b"}, {"'x", "'x"},
		{";=1+1", ";'=1+1"}, {"a;+b;c", "a;'+b;c"}, {"=x;=y", "'=x;'=y"}, {"研发; 销售", "研发; 销售"},
		// A second department name after "; ": a spreadsheet splitting on
		// ';' may trim the space (issue 38).
		{"研发; =HYPERLINK(\"x\")", "研发;' =HYPERLINK(\"x\")"}, {"  -1", "'  -1"},
	}
	for _, tc := range tests {
		if got := neutralise(tc.in); got != tc.want {
			t.Errorf("neutralise(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}
