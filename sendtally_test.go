package yidu

import "testing"

func TestTallySends(t *testing.T) {
	sent := BatchOutcome{Status: SendSent, Users: 10, Invalid: 2, Missing: 1}
	refused := BatchOutcome{Status: SendRefused, Users: 5, BadUserIDs: 3}
	remind := BatchOutcome{Status: SendUnknown, Users: 7, Reminder: true}
	tests := []struct {
		name      string
		outcomes  []BatchOutcome
		reminders bool
		want      SendTally
	}{
		{"none", nil, true, SendTally{}},
		{"all sent", []BatchOutcome{sent, sent}, true, SendTally{Result: "sent", Batches: 2, SentBatches: 2, Sent: 16, Invalid: 4, Missing: 2}},
		{"none sent", []BatchOutcome{refused}, true, SendTally{Result: "failed", Batches: 1, RefusedBatches: 1, Refused: 5, BadUserIDs: 3}},
		{"partial with reminder", []BatchOutcome{sent, remind}, true,
			SendTally{Result: "partial", Batches: 2, SentBatches: 1, UnknownBatches: 1, Sent: 8, Invalid: 2, Unknown: 7, Missing: 1}},
		{"reminder left out", []BatchOutcome{sent, remind}, false, SendTally{Result: "sent", Batches: 1, SentBatches: 1, Sent: 8, Invalid: 2, Missing: 1}},
		{"only a reminder, left out", []BatchOutcome{remind}, false, SendTally{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TallySends(tt.outcomes, tt.reminders); got != tt.want {
				t.Errorf("TallySends(%s) = %+v; want %+v", tt.name, got, tt.want)
			}
		})
	}
}
