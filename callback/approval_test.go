package callback

import (
	"context"
	"reflect"
	"testing"
)

type pressCall struct{ corp, app, user, task, key string }

type fakeApprovals struct{ calls callLog[pressCall] }

func (f *fakeApprovals) ApprovalPress(_ context.Context, corpID, app, userID, taskID, key string) error {
	f.calls.add(pressCall{corpID, app, userID, taskID, key})
	return nil
}

// TestApprovalPress: a verified template_card_event on an approval card
// (issue 41) goes to Approvals with the member and the key, never to the
// read path; without Approvals it is ignored; a forged (unsigned) one
// reaches neither.
func TestApprovalPress(t *testing.T) {
	const task = "notice-1@a0123456789abcdef-1"
	ap := &fakeApprovals{}
	h := newHarness(t, func(o *Options) { o.Approvals = ap })
	ct := h.now.Unix() - 5
	for range 2 { // WeCom redelivers
		if w := h.post(t, "hr", card("wangwu", ct, task, "approve")); w.Code != 200 {
			t.Fatalf("approval press = %d %q", w.Code, w.Body)
		}
	}
	want := []pressCall{{vecCorpID, "hr", "wangwu", task, "approve"}, {vecCorpID, "hr", "wangwu", task, "approve"}}
	if got := ap.calls.all(); !reflect.DeepEqual(got, want) {
		t.Errorf("ApprovalPress calls = %+v; want %+v (idempotence is the service's)", got, want)
	}
	if cards, _ := h.reads.calls(); len(cards) != 0 {
		t.Errorf("an approval press was a read: %+v", cards)
	}
	if w := h.do(t, "POST", "/wecom/callback/hr?msg_signature=00&timestamp=1&nonce=2", "<xml><Encrypt>x</Encrypt></xml>"); w.Code == 200 && len(ap.calls.all()) != 2 {
		t.Errorf("an unsigned press reached Approvals")
	}
	if len(ap.calls.all()) != 2 {
		t.Errorf("calls after a forged press = %d, want 2", len(ap.calls.all()))
	}

	bare := newHarness(t, nil)
	if w := bare.post(t, "hr", card("wangwu", ct, task, "approve")); w.Code != 200 {
		t.Fatalf("approval press without Approvals = %d", w.Code)
	}
	if cards, _ := bare.reads.calls(); len(cards) != 0 {
		t.Errorf("an approval press without Approvals was a read: %+v", cards)
	}
}
