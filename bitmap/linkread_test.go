package bitmap

import (
	"context"
	"testing"
	"time"
)

func TestLinkReadRestoresFromMySQL(t *testing.T) {
	// Redis lost the message (restart): the link read restores it from
	// "MySQL" and counts, keeping the reads MySQL already had.
	e := newRecEnv(t, Options{})
	ctx := context.Background()
	at := time.Unix(1_700_000_300, 0)
	m := testMessage("notice-2", 7, at.Add(-time.Hour))
	e.loader.add(m, uids(4, 5), uids(4))
	if n, err := e.rec.LinkRead(ctx, testCorp, 7, "u5", "notice-2", at); n != 1 || err != nil {
		t.Fatalf("LinkRead = %d, %v; want 1, nil", n, err)
	}
	if _, rd, found, err := e.s.Counts(ctx, testCorp, "notice-2"); !found || rd != 2 || err != nil {
		t.Errorf("Counts = read %d found %v %v; want 2 reads (restored uid 4 + new uid 5)", rd, found, err)
	}
}
