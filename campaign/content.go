package campaign

import (
	"context"
	"errors"
	"fmt"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	noticev "github.com/yidu-io/yidu/notice"
)

// Contents keeps the versions of notices' content (notice.Store): it
// renders, checks and numbers them; campaign decides who may make one
// and what follows.
type Contents interface {
	Versions
	Prepare(ctx context.Context, corp string, d noticev.Draft) (noticev.Version, error)
	Update(ctx context.Context, corp, msgid string, v noticev.Version, reacknowledge bool, by string) (noticev.Version, bool, error)
	Create(ctx context.Context, corp, msgid string, v noticev.Version, set noticev.Settings, by string) (noticev.Version, error)
	List(ctx context.Context, corp, msgid string) ([]noticev.Version, error)
}

// Acknowledgements resets what counts as read after a material version
// (tracker.Registry.ResetAcknowledged: only under read_rule acknowledged).
type Acknowledgements interface {
	ResetAcknowledged(ctx context.Context, m yidu.Message) (bool, error)
}

// ErrNoContent: content was posted where this deployment keeps none.
var ErrNoContent = yidu.Fieldf("content", "content: this deployment keeps no notice content")

// contents is the Contents, or ErrNoContent.
func (s *Service) contents() (Contents, error) {
	if c, ok := s.o.Versions.(Contents); ok {
		return c, nil
	}
	return nil, ErrNoContent
}

// Content is a registration's full text and what makes it read.
type Content struct {
	// Has says the registration carries content.
	Has         bool
	Title       string
	Markdown    string
	Attachments []string
	// ReadRule and MinReadSeconds as posted.
	ReadRule       string
	MinReadSeconds int
	// Later: the notice is a draft or scheduled: its content is kept
	// with it (Compose) and published as version 1 when it is sent.
	Later bool
}

// PrepareContent checks a registration's content before anything is
// registered or sent, and renders it as version 1: nil when it has none.
func (s *Service) PrepareContent(ctx context.Context, corp string, c Content) (*noticev.Version, error) {
	if !c.Has {
		if c.ReadRule != "" || c.MinReadSeconds != 0 {
			return nil, yidu.Fieldf("read_rule", "read_rule: a notice without content has the app's rule")
		}
		return nil, nil
	}
	cs, err := s.contents()
	if err != nil {
		return nil, err
	}
	if _, err := yidu.ParseReadRule(c.ReadRule); err != nil {
		return nil, err
	}
	if err := yidu.CheckMinReadSeconds(c.MinReadSeconds); err != nil {
		return nil, err
	}
	v, err := cs.Prepare(ctx, corp, noticev.Draft{Title: c.Title, Markdown: c.Markdown, Attachments: c.Attachments})
	return &v, err
}

// MayRevise: p may make m's next version when it sends through m's app
// and sees the whole notice (whole: its View is everyone).
func (s *Service) MayRevise(p *access.Principal, m yidu.Message, whole bool) error {
	if _, err := s.contents(); err != nil {
		return err
	}
	if !access.Decide(p, yidu.ActionEdit, access.Target{Corp: m.CorpID, App: m.App, MsgID: m.MsgID}).Allowed || !whole {
		return fmt.Errorf("%w: your role may not change this notice", ErrForbidden)
	}
	return nil
}

// Revision is a sent notice's next version: its text, and its title
// when it changes. Reacknowledge marks it material; ChangeNote, when
// given, says what changed (notice.CheckNote); Other says the request
// asked more than that of a sent notice (refused); NoContent that it
// carried no text (a change note alone is refused).
type Revision struct {
	Title         *string
	Markdown      string
	Attachments   []string
	Reacknowledge bool
	ChangeNote    *string
	Other         bool
	NoContent     bool
}

// Revised is a new version made (or found, for a replay of the same
// text) and every version of the notice.
type Revised struct {
	Version noticev.Version
	All     []noticev.Version
	// Acts is the edit row due: for a version made or held for
	// approval, one that failed, or one refused.
	Acts []Act
	// Pending: the version is material and its app asks approval for
	// it: it is held, not published, until approved (Hash is the version
	// the approvers are asked for; Version is the text held).
	Pending bool
	Hash    string
}

// Revise makes m's next version for p, who must send through its app
// and see the whole notice (whole): rendered and checked, stored as
// version N+1 (the same text again makes none), and followed up (a
// material one resets acknowledgements and sends the update card).
func (s *Service) Revise(ctx context.Context, p *access.Principal, m yidu.Message, whole bool, rev Revision) (Revised, error) {
	refused := func(err error) (Revised, error) {
		return Revised{Acts: []Act{refusedAct(VerbRevise, m.MsgID, err)}}, err
	}
	if err := s.MayRevise(p, m, whole); err != nil {
		return refused(err)
	}
	// The gate: a sender kept to an audience revises only a notice
	// inside it, and a notice not approved (or recalled) gets no version.
	if err := s.gate(ctx, VerbRevise, p, m); err != nil {
		return refused(err)
	}
	if rev.ChangeNote != nil && rev.NoContent {
		return Revised{}, yidu.Fieldf("change_note", "change_note: a change note comes with the new version's content")
	}
	if rev.Other {
		return Revised{}, yidu.Fieldf("content", "content: a sent notice's PATCH carries content, and optionally title, reacknowledge and change_note, only")
	}
	var note string
	if rev.ChangeNote != nil {
		var err error
		if note, err = noticev.CheckNote(*rev.ChangeNote); err != nil {
			return Revised{}, err
		}
	}
	cs, err := s.contents()
	if err != nil {
		return Revised{}, err
	}
	v, err := s.prepareRevision(ctx, cs, m, rev)
	if err != nil {
		return Revised{}, err
	}
	v.Note = note
	if rev.Reacknowledge {
		if held, out, err := s.holdRevision(ctx, p, cs, m, rev, v); held || err != nil {
			if !held {
				out.Acts = []Act{refusedAct(VerbRevise, m.MsgID, err)}
			}
			return out, err
		}
	}
	nv, made, err := cs.Update(ctx, m.CorpID, m.MsgID, v, rev.Reacknowledge, p.By())
	var out Revised
	if made || err != nil {
		act := Act{Action: yidu.ActionEdit, MsgID: m.MsgID, Err: err, Detail: fmt.Sprintf("version=%d", nv.N)}
		if rev.Reacknowledge {
			act.Detail += " (material)"
		}
		out.Acts = append(out.Acts, act)
	}
	if err != nil {
		return out, err
	}
	if err := s.Revised(ctx, p, m, nv, made, rev.Reacknowledge); err != nil {
		return out, err
	}
	out.Version = nv
	out.All, err = cs.List(ctx, m.CorpID, m.MsgID)
	return out, err
}

// prepareRevision renders m's next version; a notice sent without
// content has none.
func (s *Service) prepareRevision(ctx context.Context, cs Contents, m yidu.Message, rev Revision) (noticev.Version, error) {
	cur, err := cs.Get(ctx, m.CorpID, m.MsgID, 0)
	if errors.Is(err, noticev.ErrNotFound) {
		return noticev.Version{}, yidu.Fieldf("content", "content: the notice was sent without content")
	}
	if err != nil {
		return noticev.Version{}, err
	}
	title := cur.Title
	if rev.Title != nil {
		title = *rev.Title
	}
	return cs.Prepare(ctx, m.CorpID, noticev.Draft{Title: title, Markdown: rev.Markdown, Attachments: rev.Attachments})
}

// ContentView is a sent notice's content as GET …/content shows it.
type ContentView struct {
	Version noticev.Version
	All     []noticev.Version
	// ByVersion is the reading page's signals per version, for a caller
	// who sees the whole notice.
	ByVersion []noticev.VersionCounts
}

// pageCounts gives progress per version (notice.Store).
type pageCounts interface {
	PageCounts(ctx context.Context, corp, msgid string) ([]noticev.VersionCounts, error)
}

// Content is version n of m's content (0: the current one) with every
// version, and the signals per version when the caller sees the whole
// notice (whole); yidu.ErrNotFound when m has no content or no version n.
func (s *Service) Content(ctx context.Context, m yidu.Message, n int, whole bool) (ContentView, error) {
	cs, err := s.contents()
	if err != nil {
		return ContentView{}, fmt.Errorf("%w: %s: no content kept", yidu.ErrNotFound, m.MsgID)
	}
	all, err := cs.List(ctx, m.CorpID, m.MsgID)
	if err != nil {
		return ContentView{}, fmt.Errorf("campaign: versions of %s: %w", m.MsgID, err)
	}
	if len(all) == 0 || n > len(all) {
		return ContentView{}, fmt.Errorf("%w: version %d of %s", yidu.ErrNotFound, n, m.MsgID)
	}
	out := ContentView{Version: all[len(all)-1], All: all}
	if n > 0 {
		out.Version = all[n-1]
	}
	if pc, ok := cs.(pageCounts); ok && whole {
		if out.ByVersion, err = pc.PageCounts(ctx, m.CorpID, m.MsgID); err != nil {
			return ContentView{}, fmt.Errorf("campaign: signals per version of %s: %w", m.MsgID, err)
		}
	}
	return out, nil
}

// HasContent says whether the notice msgID of corp was sent with content
// (it has a version 1).
func (s *Service) HasContent(ctx context.Context, corp, msgID string) (bool, error) {
	if s.o.Versions == nil {
		return false, nil
	}
	_, err := s.o.Versions.Get(ctx, corp, msgID, 1)
	if errors.Is(err, noticev.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("campaign: content of %s: %w", msgID, err)
	}
	return true, nil
}

// Revised follows up m's version nv: a material one made now (made,
// reacknowledge) makes earlier acknowledgements stop counting; under a
// rule that acknowledges, those who acknowledged an earlier version get
// the update card, once each (a replay sends the ones a failure left
// out).
func (s *Service) Revised(ctx context.Context, p *access.Principal, m yidu.Message, nv noticev.Version, made, reacknowledge bool) error {
	if made && reacknowledge && s.o.Acknowledgements != nil {
		if _, err := s.o.Acknowledgements.ResetAcknowledged(ctx, m); err != nil {
			return err
		}
	}
	if nv.Reacknowledge && m.ReadRule.Acknowledging() {
		if _, err := s.Reconfirm(ctx, m, nv.N, p.Name); err != nil {
			return err
		}
	}
	return nil
}

// Outgoing is a registration as posted, before campaign checks it and
// fills its defaults.
type Outgoing struct {
	// Registration has its App set.
	yidu.Registration
	// FollowUp is the posted policy; FollowUpSet says the body named
	// follow_up (null included).
	FollowUp    *yidu.Policy
	FollowUpSet bool
	Content     Content
}

// Prepared is an Outgoing checked, with its defaults.
type Prepared struct {
	yidu.Registration
	// FollowUp is the notice's policy; FollowUpDefault says it is its
	// app's default, because the body named none.
	FollowUp        *yidu.Policy
	FollowUpDefault bool
	// Version is the content's version 1, nil without content, and
	// Settings what makes it read.
	Version  *noticev.Version
	Settings noticev.Settings
}

// linkToPage makes the card of a notice with content open its reading
// page (Options.ReadingPage): the card's url is the page's,
// through the tracked link like any card url, so a msgid is chosen now
// if the body named none. A url of the caller's own is refused: the text
// is in yidu.
func (s *Service) linkToPage(reg *yidu.Registration) error {
	if s.o.ReadingPage == nil {
		return nil
	}
	if reg.MsgID != "" && reg.URL == s.o.ReadingPage(reg.App.Name, reg.MsgID) {
		return nil // linked already (a draft's, checked again)
	}
	if reg.URL != "" {
		return yidu.Fieldf("url", "url: a notice with full text links to its reading page; leave url empty")
	}
	if reg.MsgID == "" {
		reg.MsgID = string(yidu.NewMsgID())
	}
	reg.URL = s.o.ReadingPage(reg.App.Name, reg.MsgID)
	return nil
}

// ErrNoRegistrar: the service was given no Registrar.
var ErrNoRegistrar = errors.New("campaign: no registrar")

// checkDraftContent checks the full text d keeps until it is sent as a
// notice sent now has its checked (PrepareContent: the text's limits,
// each attachment an upload of d's corp, the read rule), and links d's
// card to its reading page (a msgid is chosen now if d has none). It
// writes nothing; nil content is none.
func (s *Service) checkDraftContent(ctx context.Context, d *yidu.Draft) error {
	if d.Content == nil {
		return nil
	}
	cs, err := s.contents()
	if err != nil {
		return err
	}
	c := *d.Content
	if c.ReadRule, err = yidu.ParseReadRule(string(c.ReadRule)); err != nil {
		return err
	}
	if err := yidu.CheckMinReadSeconds(c.MinReadSeconds); err != nil {
		return err
	}
	if c.Attachments == nil {
		c.Attachments = []string{}
	}
	if _, err := cs.Prepare(ctx, d.App.CorpID, noticev.Draft{Title: d.Title, Markdown: c.Markdown, Attachments: c.Attachments}); err != nil {
		return err
	}
	reg := yidu.Registration{MsgID: d.MsgID, App: d.App, URL: d.URL}
	if err := s.linkToPage(&reg); err != nil {
		return err
	}
	d.MsgID, d.URL, d.Content = reg.MsgID, reg.URL, &c
	return nil
}

// PreviewContent renders n's kept full text as its version 1 will be
// when it is sent (the compose page's and the approver's preview); it
// writes nothing. ErrNoContent when n keeps none.
func (s *Service) PreviewContent(ctx context.Context, n yidu.Notice) (noticev.Version, error) {
	cs, err := s.contents()
	if err != nil {
		return noticev.Version{}, err
	}
	if n.Content == nil {
		return noticev.Version{}, fmt.Errorf("%w: %s keeps no full text", noticev.ErrNotFound, n.MsgID)
	}
	v, err := cs.Prepare(ctx, n.App.CorpID, noticev.Draft{Title: n.Title, Markdown: n.Content.Markdown, Attachments: n.Content.Attachments})
	if err != nil {
		return noticev.Version{}, err
	}
	v.N, v.Settings = 1, noticev.Settings{ReadRule: n.Content.ReadRule, MinReadSeconds: n.Content.MinReadSeconds}
	return v, nil
}
