package idmap_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/yidu-io/yidu/idmap"
)

func TestParseDepartments(t *testing.T) {
	tests := []struct {
		in      string
		want    []int64
		wantErr bool
	}{
		{"", []int64{}, false},
		{"1", []int64{1}, false},
		{"1,2,3", []int64{1, 2, 3}, false},
		{" 3, 1 ,3", []int64{3, 1}, false},
		{"0", []int64{0}, false},
		{"1,,2", nil, true},
		{"1,", nil, true},
		{"-1", nil, true},
		{"+1", nil, true},
		{"-0", nil, true},
		{"1a", nil, true},
		{"99999999999999999999", nil, true},
		{strings.Repeat("1,", 600) + "1", nil, true},
	}
	for _, tt := range tests {
		got, err := idmap.ParseDepartments(tt.in)
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
			t.Errorf("ParseDepartments(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !errors.Is(err, idmap.ErrInvalidChange) {
			t.Errorf("ParseDepartments(%q) error %v is not ErrInvalidChange", tt.in, err)
		}
	}
}

// FuzzParseDepartments: whatever parses is non-negative, duplicate-free and
// survives FormatDepartments → ParseDepartments unchanged.
func FuzzParseDepartments(f *testing.F) {
	for _, s := range []string{"", "1,2,3", " 7 , 7", "-1", "1,,", "9223372036854775807", "1,\t2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids, err := idmap.ParseDepartments(s)
		if err != nil {
			if !errors.Is(err, idmap.ErrInvalidChange) {
				t.Fatalf("ParseDepartments(%q) error %v is not ErrInvalidChange", s, err)
			}
			return
		}
		seen := map[int64]bool{}
		for _, d := range ids {
			if d < 0 || seen[d] {
				t.Fatalf("ParseDepartments(%q) = %v: negative or duplicate", s, ids)
			}
			seen[d] = true
		}
		formatted, err := idmap.FormatDepartments(ids)
		if err != nil {
			t.Fatalf("FormatDepartments(%v) = %v", ids, err)
		}
		back, err := idmap.ParseDepartments(formatted)
		if err != nil || !slices.Equal(back, ids) {
			t.Fatalf("round trip %q → %v → %q → %v, %v", s, ids, formatted, back, err)
		}
	})
}
