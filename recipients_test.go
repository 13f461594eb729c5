package yidu

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckRecipients(t *testing.T) {
	tests := []struct {
		name  string
		a     Audience
		n     uint64
		field string // "" is no error
	}{
		{"userids reaching someone", Audience{UserIDs: []string{"a", "ghost"}}, 1, ""},
		{"only unknown userids", Audience{UserIDs: []string{"ghost", "nobody"}}, 0, "audience.userids"},
		{"a tag reaching nobody", Audience{Tags: []int64{9}}, 0, "audience"},
		{"a tag and unknown userids reaching nobody", Audience{Tags: []int64{9}, UserIDs: []string{"ghost"}}, 0, "audience"},
		{"a department reaching nobody", Audience{Departments: []int64{404}}, 0, "audience"},
		{"all of an empty directory", Audience{All: true}, 0, "audience"},
		{"a tag reaching someone", Audience{Tags: []int64{7}}, 3, ""},
		{"over the bound", Audience{All: true}, MaxRecipients + 1, "audience"},
		{"at the bound", Audience{All: true}, MaxRecipients, ""},
	}
	for _, tt := range tests {
		err := tt.a.CheckRecipients(tt.n)
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%s: CheckRecipients(%d) = %v; want nil", tt.name, tt.n, err)
		case tt.field != "" && !errors.Is(err, ErrInvalid):
			t.Errorf("%s: CheckRecipients(%d) = %v; want ErrInvalid", tt.name, tt.n, err)
		case tt.field != "" && !strings.HasPrefix(strings.TrimPrefix(err.Error(), "invalid: "), tt.field+" ") &&
			!strings.HasPrefix(strings.TrimPrefix(err.Error(), "invalid: "), tt.field+":"):
			t.Errorf("%s: CheckRecipients(%d) = %q; want it to start with %s", tt.name, tt.n, err, tt.field)
		}
	}
}
