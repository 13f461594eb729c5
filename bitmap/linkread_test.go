package bitmap

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/testenv"
)

func TestLinkRead(t *testing.T) {
	e := newRecEnv(t, Options{})
	ctx := context.Background()
	at := time.Unix(1_700_000_200, 0)
	e.register(t, testMessage("notice-1", 7, at.Add(-time.Hour)), uids(1, 2, 3))

	steps := []struct {
		name      string
		agent     int64
		user      string
		msgID     string
		want      int
		wantErr   error
		outcome   string // reads_total{source=link} label that must grow by one
		failKafka bool
	}{
		{name: "recipient", agent: 7, user: "u1", msgID: "notice-1", want: 1, outcome: outcomeLabelNew},
		{name: "opened again", agent: 7, user: "u1", msgID: "notice-1", want: 0, outcome: outcomeLabelDuplicate},
		{name: "non-recipient", agent: 7, user: "u9", msgID: "notice-1", want: 0, outcome: outcomeLabelNotRecipient},
		{name: "unknown user", agent: 7, user: "bob", msgID: "notice-1", want: 0, outcome: outcomeLabelUnknownUser},
		{name: "unknown msgid", agent: 7, user: "u1", msgID: "no-such", want: 0, outcome: outcomeLabelUnknownMsgID},
		{name: "send batch, not a message", agent: 7, user: "u3", msgID: "notice-1@0", want: 0, outcome: outcomeLabelUnknownMsgID},
		{name: "malformed msgid", agent: 7, user: "u3", msgID: "notice-1}{", want: 0, outcome: outcomeLabelUnknownMsgID},
		{name: "other app's message", agent: 8, user: "u3", msgID: "notice-1", want: 0, outcome: outcomeLabelUnknownMsgID},
		{name: "kafka fails", agent: 7, user: "u2", msgID: "notice-1", wantErr: errKafkaDown, failKafka: true},
		{name: "next visit re-emits", agent: 7, user: "u2", msgID: "notice-1", want: 1, outcome: outcomeLabelNew},
	}
	for _, st := range steps {
		var before float64
		if st.outcome != "" {
			before = e.reads(t, delta.SourceLink, st.outcome)
		}
		if st.failKafka {
			e.pub.fails = 1
		}
		n, err := e.rec.LinkRead(ctx, testCorp, st.agent, st.user, st.msgID, at)
		if !errors.Is(err, st.wantErr) || n != st.want {
			t.Errorf("%s: LinkRead = %d, %v; want %d, %v", st.name, n, err, st.want, st.wantErr)
		}
		if st.outcome != "" {
			if got := e.reads(t, delta.SourceLink, st.outcome) - before; got != 1 {
				t.Errorf("%s: reads_total{source=link,outcome=%s} grew by %v; want 1", st.name, st.outcome, got)
			}
		}
	}
	if p, _ := e.s.PendingUIDs(ctx, testCorp, "notice-1"); len(p) != 0 {
		t.Errorf("PendingUIDs at the end = %v; want none", p)
	}
	rd, _, err := e.s.ReadBitmap(ctx, testCorp, "notice-1")
	testenv.Check(t, "ReadBitmap", err)
	if got := rd.ToArray(); !slices.Equal(got, []uint32{1, 2}) {
		t.Errorf("read bitmap = %v; want [1 2]", got)
	}
	got := testenv.Deltas(t, e.brokers, testTopic)
	testenv.SortDeltas(got)
	want := []delta.Delta{
		{CorpID: testCorp, MsgID: "notice-1", UID: 1, ReadTime: at.Unix(), Source: delta.SourceLink},
		{CorpID: testCorp, MsgID: "notice-1", UID: 2, ReadTime: at.Unix(), Source: delta.SourceLink},
	}
	if !slices.Equal(got, want) {
		t.Errorf("deltas = %+v; want exactly the new link reads %+v", got, want)
	}
}

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
