package yidu

// SendTally sums up a message's send batches: how many batches ended
// each way and how many people each way.
type SendTally struct {
	// Result is "sent" when every batch was sent, "failed" when none was,
	// "partial" otherwise, and "" without a batch.
	Result string
	// Batches counts the batches; SentBatches… those by status.
	Batches, SentBatches, RefusedBatches, UnknownBatches, UnsentBatches int
	// Sent, Invalid, Refused, Unsent, Unknown count people: Sent those in
	// sent batches WeCom did not call invaliduser (Invalid); the others
	// the people of batches refused, unsent or whose answer was lost.
	// Missing and BadUserIDs are left out of every batch.
	Sent, Invalid, Refused, Unsent, Unknown, Missing, BadUserIDs int
}

// TallySends tallies outcomes; a reminder's batches count only with
// reminders (the list counts the notice's own batches, the send report
// every batch).
func TallySends(outcomes []BatchOutcome, reminders bool) SendTally {
	var t SendTally
	for _, o := range outcomes {
		if o.Reminder && !reminders {
			continue
		}
		t.Batches++
		t.Missing += o.Missing
		t.BadUserIDs += o.BadUserIDs
		switch o.Status {
		case SendSent:
			t.SentBatches++
			t.Sent += o.Users - o.Invalid
			t.Invalid += o.Invalid
		case SendRefused:
			t.RefusedBatches++
			t.Refused += o.Users
		case SendUnsent:
			t.UnsentBatches++
			t.Unsent += o.Users
		case SendUnknown:
			t.UnknownBatches++
			t.Unknown += o.Users
		}
	}
	switch {
	case t.Batches == 0:
	case t.SentBatches == t.Batches:
		t.Result = "sent"
	case t.SentBatches == 0:
		t.Result = "failed"
	default:
		t.Result = "partial"
	}
	return t
}
