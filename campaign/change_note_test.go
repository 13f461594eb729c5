package campaign

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
	noticev "github.com/yidu-io/yidu/notice"
)

// TestRevisionChangeNote: a revision's change note is stored with its
// version, trimmed; a hostile one (too long, a control character, a
// bidirectional override, or a note without content) is a FieldError
// on change_note that writes no version and no audit row; a material
// version held for approval keeps its note and is published with it.
func TestRevisionChangeNote(t *testing.T) {
	db, _, c := setup(t)
	ctx := context.Background()
	app := yidu.App{Name: testApp.Name, CorpID: testApp.CorpID, AgentID: testApp.AgentID,
		Approval: &yidu.Approval{Over: 1, Approvers: []string{"wangwu"}}}
	st, err := store.New(db, store.Options{Directory: directory{}, Apps: []yidu.App{app}, Now: c.now})
	testenv.Check(t, "store.New", err)
	atts, err := attachment.New(db, attachment.Options{Now: c.now})
	testenv.Check(t, "attachment.New", err)
	ns, err := noticev.New(db, atts, noticev.Options{Now: c.now})
	testenv.Check(t, "notice.New", err)
	m := yidu.Message{CorpID: app.CorpID, MsgID: "note-1", App: app.Name, Title: "考勤制度", Recipients: 2, SentAt: c.now()}
	s := newService(t, st, Options{Versions: ns, Messages: gateMessages{"note-1": m}, Acknowledgements: &ackResets{}, Now: c.now})
	_, err = st.Create(ctx, yidu.Draft{MsgID: "note-1", App: app, Title: "考勤制度", Audience: yidu.Audience{UserIDs: []string{"zhangsan", "lisi"}},
		Content: &yidu.NoticeContent{Markdown: "九点上班。", Attachments: []string{}}, Schedule: yidu.Schedule{Draft: true}, By: "hr-admin"})
	testenv.Check(t, "Create", err)
	_, err = db.Exec(`UPDATE campaigns SET state = 'sent', approval = 'approved', approval_hash = 'first', started_at = ? WHERE msgid = 'note-1'`, c.now().Add(-time.Hour))
	testenv.Check(t, "mark sent", err)
	v1, err := ns.Prepare(ctx, app.CorpID, noticev.Draft{Title: "考勤制度", Markdown: "九点上班。"})
	testenv.Check(t, "Prepare", err)
	_, err = ns.Create(ctx, app.CorpID, "note-1", v1, noticev.Settings{}, "hr-admin")
	testenv.Check(t, "version 1", err)
	sender := principal(t, "hr-sender", yidu.RoleSender, []string{app.Name}, nil)
	notes := func() []string {
		all, err := ns.List(ctx, app.CorpID, "note-1")
		testenv.Check(t, "List", err)
		var out []string
		for _, v := range all {
			out = append(out, v.Note)
		}
		return out
	}
	ptr := func(s string) *string { return &s }

	for name, rev := range map[string]Revision{
		"201 characters":  {Markdown: "八点上班。", ChangeNote: ptr(strings.Repeat("改", 201))},
		"a line break":    {Markdown: "八点上班。", ChangeNote: ptr("上班时间\n改为八点")},
		"a bidi override": {Markdown: "八点上班。", ChangeNote: ptr("改为\u202e点八")},
		"without content": {NoContent: true, Other: true, ChangeNote: ptr("改为八点")},
		"held, too long":  {Markdown: "八点上班。", Reacknowledge: true, ChangeNote: ptr(strings.Repeat("改", 201))},
	} {
		res, err := s.Revise(ctx, sender, m, true, rev)
		var fe *yidu.FieldError
		if !errors.As(err, &fe) || fe.Field != "change_note" || len(res.Acts) != 0 {
			t.Errorf("%s: Revise = %v, acts %+v; want a FieldError on change_note, no audit row", name, err, res.Acts)
		}
	}
	n, err := st.Get(ctx, nil, "note-1")
	testenv.Check(t, "Get", err)
	if got := notes(); len(got) != 1 || n.Approval != yidu.ApprovalApproved {
		t.Fatalf("after refused notes: versions %q, approval %s; want version 1 alone, still approved", got, n.Approval)
	}

	// A typo fix: published at once, with its note trimmed.
	res, err := s.Revise(ctx, sender, m, true, Revision{Markdown: "九点上班（错别字）。", ChangeNote: ptr("  改正错别字 ")})
	testenv.Check(t, "Revise (typo)", err)
	if res.Version.N != 2 || res.Version.Note != "改正错别字" {
		t.Fatalf("typo = v%d note %q; want v2 改正错别字", res.Version.N, res.Version.Note)
	}
	// Material under approval: held with its note, published with it.
	res, err = s.Revise(ctx, sender, m, true, Revision{Markdown: "八点上班。", Reacknowledge: true, ChangeNote: ptr("上班时间由九点改为八点")})
	testenv.Check(t, "Revise (material)", err)
	if !res.Pending || res.Version.Note != "上班时间由九点改为八点" || len(notes()) != 2 {
		t.Fatalf("material = pending %t note %q, %d versions; want held with its note, nothing published", res.Pending, res.Version.Note, len(notes()))
	}
	n, err = st.Get(ctx, nil, "note-1")
	testenv.Check(t, "Get", err)
	wangwu := access.NewPrincipal("wangwu", access.KindToken, false, nil)
	_, _, _, err = s.Decide(ctx, wangwu, n, Decision{Hash: n.ApprovalHash, Approve: true})
	testenv.Check(t, "Decide", err)
	if got := notes(); len(got) != 3 || got[0] != "" || got[1] != "改正错别字" || got[2] != "上班时间由九点改为八点" {
		t.Fatalf("notes once approved = %q; want none, 改正错别字, 上班时间由九点改为八点", got)
	}
}
