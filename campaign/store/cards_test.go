package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestCardRetries walks approval cards WeCom did not take through their
// retries: recorded once, due at their time (or when a claim ran out),
// claimed by one replica, finished by the claim's holder only.
func TestCardRetries(t *testing.T) {
	db, s, _ := newStore(t)
	ctx := context.Background()
	a := store.CardLease("replica-a")
	b := store.CardLease("replica-b")
	c1 := store.Card{CorpID: "ww1", MsgID: "m1", TaskID: "m1-appr-1"}
	c2 := store.Card{CorpID: "ww1", MsgID: "m2", TaskID: "m2-appr-1"}
	c3 := store.Card{CorpID: "ww1", MsgID: "m3", TaskID: "m3-appr-1"}
	sendErr := errors.New("errcode 45009: " + strings.Repeat("x", 300))
	testenv.Check(t, "CardFailed c1", s.CardFailed(ctx, c1, hashV1, 12, t0.Add(time.Minute), sendErr))
	testenv.Check(t, "CardFailed c2", s.CardFailed(ctx, c2, hashV2, 3, t0.Add(2*time.Minute), sendErr))
	testenv.Check(t, "CardFailed c3", s.CardFailed(ctx, c3, hashV1, 1, t0.Add(time.Hour), sendErr))
	// A second failure of the same card keeps the first row.
	testenv.Check(t, "CardFailed c1 again", s.CardFailed(ctx, c1, hashV2, 99, t0, errors.New("other")))
	if got := testenv.Column[string](t, db, "SELECT CONCAT(version_hash, '/', recipients, '/', state, '/', attempts, '/', CHAR_LENGTH(last_error)) FROM approval_card_retries WHERE task_id = ?",
		c1.TaskID); len(got) != 1 || got[0] != hashV1+"/12/pending/1/255" {
		t.Fatalf("c1's row = %v; want the first failure's, its error cut to 255", got)
	}

	due := func(at time.Time) []string {
		t.Helper()
		cards, err := s.DueCards(ctx, at)
		testenv.Check(t, "DueCards", err)
		var ids []string
		for _, c := range cards {
			ids = append(ids, c.TaskID)
		}
		return ids
	}
	tests := []struct {
		name string
		at   time.Time
		want []string
	}{
		{"before any", t0, nil},
		{"first due", t0.Add(time.Minute), []string{c1.TaskID}},
		{"two due, longest first", t0.Add(30 * time.Minute), []string{c1.TaskID, c2.TaskID}},
	}
	for _, tt := range tests {
		if got := due(tt.at); !slices.Equal(got, tt.want) {
			t.Errorf("%s: DueCards = %v; want %v", tt.name, got, tt.want)
		}
	}

	now := t0.Add(30 * time.Minute)
	hash, recipients, attempts, ok, err := s.ClaimCard(ctx, a, now, c1)
	if err != nil || !ok || hash != hashV1 || recipients != 12 || attempts != 2 {
		t.Fatalf("a.ClaimCard = %q %d %d %v %v; want v1, 12 people, try 2", hash, recipients, attempts, ok, err)
	}
	if _, _, _, ok, _ := s.ClaimCard(ctx, b, now, c1); ok {
		t.Fatal("b claimed a card a holds")
	}
	if got := due(now); !slices.Equal(got, []string{c2.TaskID}) {
		t.Errorf("DueCards while c1 is claimed = %v; want only c2", got)
	}
	// b may not finish a's claim.
	testenv.Check(t, "b.FinishCard", s.FinishCard(ctx, b, c1, "sent", ""))
	if got := testenv.Column[string](t, db, "SELECT state FROM approval_card_retries WHERE task_id = ?", c1.TaskID); got[0] != "sending" {
		t.Fatalf("b finished a's claim: state %s", got[0])
	}
	// a died: once its claim ran out the card is due again, and b takes it.
	expired := now.Add(store.DefaultLeaseTTL)
	if got := due(expired); !slices.Contains(got, c1.TaskID) {
		t.Errorf("DueCards after a's claim ran out = %v; want c1 among them", got)
	}
	if _, _, attempts, ok, err := s.ClaimCard(ctx, b, expired, c1); err != nil || !ok || attempts != 3 {
		t.Fatalf("b.ClaimCard after a's claim ran out = %d %v %v; want try 3", attempts, ok, err)
	}
	testenv.Check(t, "a.FinishCard", s.FinishCard(ctx, a, c1, "sent", ""))
	testenv.Check(t, "b.FinishCard", s.FinishCard(ctx, b, c1, "pending", "next_at = ?, last_error = ?", expired.Add(time.Hour), "again"))
	if got := testenv.Column[string](t, db, "SELECT CONCAT(state, '/', COALESCE(owner, '-'), '/', last_error) FROM approval_card_retries WHERE task_id = ?",
		c1.TaskID); got[0] != "pending/-/again" {
		t.Errorf("c1 after b's finish = %s; want pending/-/again (a's finish ignored)", got[0])
	}
	if got := due(expired.Add(time.Hour - time.Millisecond)); slices.Contains(got, c1.TaskID) {
		t.Errorf("DueCards before c1's next try = %v; want it not due", got)
	}
	if got := due(expired.Add(time.Hour)); !slices.Contains(got, c1.TaskID) {
		t.Errorf("DueCards at c1's next try = %v; want it due", got)
	}
	// A replica that listed c1 due before b put it back claims nothing
	// until its next try: WeCom is not asked twice in a row.
	if _, _, _, ok, err := s.ClaimCard(ctx, a, expired.Add(time.Minute), c1); err != nil || ok {
		t.Errorf("a.ClaimCard before c1's next try = %v %v; want not claimed", ok, err)
	}
	if _, _, _, ok, err := s.ClaimCard(ctx, a, expired.Add(time.Hour), c1); err != nil || !ok {
		t.Errorf("a.ClaimCard at c1's next try = %v %v; want claimed", ok, err)
	}
}
