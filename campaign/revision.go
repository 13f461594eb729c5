package campaign

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	noticev "github.com/yidu-io/yidu/notice"
)

// A material revision (reacknowledge: true, docs/api.md) of a sent
// notice whose app asks approval for it is a new version that waits for
// approval before it is published or anyone is told (issue 46): its
// text is kept on the notice's row (campaigns.content, as a draft's is)
// and its approval asked for as a first send's is (review: the pending
// state, the trail, the approvers' cards), bound to ApprovalHash over
// that text. Approved (Decide), it is published as the next version
// and followed up (acknowledgements reset, update cards); until then
// members see the version they were approved to see. A non-material
// revision (a typo) is published at once and audited as any edit.

// holdRevision keeps v, m's material next version by p, for approval
// when m's app asks it: held reports that it did (and nothing was
// published). A notice yidu did not send from a campaign row needs none
// here: one that would was refused by the gate as a draft.
func (s *Service) holdRevision(ctx context.Context, p *access.Principal, cs Contents, m yidu.Message, rev Revision, v noticev.Version) (held bool, out Revised, err error) {
	if s.st == nil {
		return false, out, nil
	}
	app, ok := s.st.App(m.App)
	if !ok || app.Approval == nil || app.CorpID != m.CorpID {
		return false, out, nil
	}
	n, err := s.st.Get(ctx, []string{m.CorpID}, m.MsgID)
	if errors.Is(err, yidu.ErrNotFound) {
		return false, out, nil
	}
	if err != nil {
		return false, out, err
	}
	if n.State != yidu.StateSent {
		// The Runner publishes the row's text as version 1 while it
		// sends: a revision waits until that is done.
		return false, out, fmt.Errorf("%w: %s is %s; revise it once it is sent", yidu.ErrNotEditable, m.MsgID, n.State)
	}
	cur, err := cs.Get(ctx, m.CorpID, m.MsgID, 0)
	if err != nil {
		return false, out, fmt.Errorf("campaign: content of %s: %w", m.MsgID, err)
	}
	if v.SHA256 == cur.SHA256 {
		return false, out, nil // the same text makes no version
	}
	atts := rev.Attachments
	if atts == nil {
		atts = []string{}
	}
	n.Title = v.Title
	n.Content = &yidu.NoticeContent{Markdown: v.Markdown, Attachments: atts,
		ReadRule: cur.Settings.ReadRule, MinReadSeconds: cur.Settings.MinReadSeconds, ChangeNote: v.Note}
	need, _, err := s.NeedsApproval(ctx, n)
	if err != nil || !need {
		return false, out, err
	}
	if err := s.st.KeepRevision(ctx, n, s.o.Now().UTC().Truncate(time.Millisecond)); err != nil {
		return false, out, err
	}
	n, _, err = s.review(ctx, p, n, false)
	act := Act{Action: yidu.ActionEdit, MsgID: m.MsgID, Err: err,
		Detail: fmt.Sprintf("version=%d reacknowledge=yes approval=pending hash=%s", cur.N+1, n.ApprovalHash)}
	out = Revised{Acts: []Act{act}, Pending: true, Hash: n.ApprovalHash}
	if err != nil {
		return true, out, err
	}
	v.N, v.Reacknowledge, v.Settings, v.CreatedBy = cur.N+1, true, cur.Settings, p.By()
	out.Version = v
	out.All, err = cs.List(ctx, m.CorpID, m.MsgID)
	return true, out, err
}

// publishRevision publishes the revision n keeps once approved (Decide):
// the approved text becomes the notice's next version, material, and is
// followed up as any material version (Revised). A replay finds the
// version made and makes none; its follow-up sends only what a failure
// left out.
func (s *Service) publishRevision(ctx context.Context, n yidu.Notice) error {
	cs, err := s.contents()
	if err != nil {
		return err
	}
	if s.o.Messages == nil {
		return fmt.Errorf("campaign: publish %s: no message lookup", n.MsgID)
	}
	m, ok, err := s.o.Messages.GetMessage(ctx, []string{n.App.CorpID}, n.MsgID)
	if err != nil || !ok {
		return fmt.Errorf("campaign: publish %s: message: %w (found %t)", n.MsgID, err, ok)
	}
	v, err := cs.Prepare(ctx, n.App.CorpID, noticev.Draft{Title: n.Title, Markdown: n.Content.Markdown, Attachments: n.Content.Attachments})
	if err != nil {
		return fmt.Errorf("campaign: publish %s: %w", n.MsgID, err)
	}
	v.Note = n.Content.ChangeNote // checked when it was held
	by, asked, found, err := s.st.RequestedBy(ctx, n, n.ApprovalHash)
	if err != nil {
		return fmt.Errorf("campaign: publish %s: who asked: %w", n.MsgID, err)
	}
	if !found {
		return fmt.Errorf("campaign: publish %s: nobody asked approval of version %s", n.MsgID, n.ApprovalHash)
	}
	if n.StartedAt.IsZero() || asked.Before(n.StartedAt) {
		return nil // the approval of its first send: version 1 is the Runner's
	}
	nv, made, err := cs.Update(ctx, n.App.CorpID, n.MsgID, v, true, by)
	if err != nil {
		return fmt.Errorf("campaign: publish %s: %w", n.MsgID, err)
	}
	who := access.NewPrincipal(by, "system", false, nil)
	if made {
		e := stepEvent(nil, n, yidu.ActionEdit, s.o.Now().UTC(), fmt.Sprintf("version %d (material) published, approved version=%s by=%s", nv.N, n.ApprovalHash, by))
		_ = s.st.Audit(ctx, e) // logged there
		s.log.InfoContext(ctx, "approved version published", "corp", n.App.CorpID, "msgid", n.MsgID, "version", nv.N)
	}
	return s.Revised(ctx, who, m, nv, made, true)
}
