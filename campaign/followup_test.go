package campaign

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/yidu-io/yidu"
)

// TestInFollowUp: a policy's field error becomes one of the posted
// follow_up, words and field, the input it quotes shown as before (cut to
// its echo limit); an error of follow_up already, or of no field, passes.
func TestInFollowUp(t *testing.T) {
	other := errors.New("store down")
	tests := []struct {
		name      string
		in        error
		field     string // "": in itself comes back
		want      string
		wantValue string
	}{
		{"reason", yidu.Fieldf("deadline", "deadline must be after the send"),
			"follow_up.deadline", "invalid: follow_up.deadline must be after the send", ""},
		{"quoted input", &yidu.FieldError{Field: "reminders", Value: strings.Repeat("9", 40), Echo: 32,
			Reason: "reminders: %q is not a delay"},
			"follow_up.reminders", `invalid: follow_up.reminders: "` + strings.Repeat("9", 32) + `…" is not a delay`, strings.Repeat("9", 40)},
		{"already follow_up", yidu.Fieldf("follow_up", "follow_up is off"), "", "invalid: follow_up is off", ""},
		{"no field", other, "", "store down", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := InFollowUp(fmt.Errorf("rounds: %w", tc.in))
			if tc.field == "" {
				if !errors.Is(err, tc.in) || !strings.HasSuffix(err.Error(), tc.want) {
					t.Fatalf("InFollowUp = %v; want %v itself", err, tc.in)
				}
				return
			}
			var fe *yidu.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || err.Error() != tc.want || fe.Value != tc.wantValue {
				t.Errorf("InFollowUp = %q (%+v); want %q at %s", err, fe, tc.want, tc.field)
			}
		})
	}
}
