package campaign

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign/store"
	noticev "github.com/yidu-io/yidu/notice"
)

// Post is a notice as POST /messages carries it: sent now, scheduled
// (SendAt) or kept as a draft (Draft).
type Post struct {
	Outgoing
	SendAt time.Time
	Draft  bool
	// Standing makes it a standing notice (issue 51); nil: an ordinary one.
	Standing *yidu.Standing
}

// Act is an audit row an act is due, with its answer (Outcome of Err).
type Act struct {
	Action yidu.Action
	MsgID  string
	People int64
	Detail string
	Err    error
}

// Posted is what Post did.
type Posted struct {
	// Notice is the notice kept for later, or kept until it is approved
	// (Approval); zero when it was registered.
	Notice   yidu.Notice
	Approval bool
	// Registered is the registration of a notice sent now (Notice zero).
	yidu.Registered
	// Acts are the audit rows due, in order: the compose, schedule or
	// send (none for a replay that did nothing), and a replay's change
	// of the follow-up policy.
	Acts []Act
}

// Kept says the notice was kept for later or for approval rather than
// registered.
func (p Posted) Kept() bool { return p.Notice.MsgID != "" }

// Post does what p posted, deciding everything the dashboard used to:
// the body is checked with its defaults (prepare) before anything is
// written; a draft or a scheduled notice is composed (Compose, one
// transaction); a notice sent now that needs approval is kept as a
// draft asking for it (issue 41), sent when approved; anything else is
// registered and sent, its content kept as version 1 and its follow-up
// policy stored. The returned Posted carries the audit rows due even
// when err is set.
func (s *Service) Post(ctx context.Context, p *access.Principal, post Post) (Posted, error) {
	// One answer per question within the post: its audience is checked
	// (actMemo) and counted (the store's) once, however many steps ask.
	ctx = store.RememberCounts(withActMemo(ctx))
	post.Content.Later = post.Draft || !post.SendAt.IsZero()
	pr, approval, err := s.prepare(ctx, p, post)
	if err != nil {
		return Posted{}, err
	}
	if post.Content.Later || approval {
		return s.postKept(ctx, p, post, pr, approval)
	}
	// A notice with its full text is registered, its version 1 kept,
	// then sent: no card links to a reading page without its text, and
	// a msgid another message holds (yidu.ErrConflict) is refused before
	// anything is kept. keepContent and a replay find what is stored.
	first := pr
	first.Send = pr.Send && pr.Version == nil
	res, err := s.register(ctx, first)
	if err == nil {
		err = s.keepContent(ctx, res.Message, pr, p.By())
	}
	if err == nil && post.Standing != nil {
		// Before the cards: a joiner found from now on is enrolled.
		err = s.keepStanding(ctx, nil, p, res.Message.MsgID, post, pr)
	}
	if err == nil && first.Send != pr.Send {
		var sent yidu.Registered
		sent, err = s.register(ctx, pr) // a replay: it sends
		res.Send = sent.Send
	}
	out := Posted{Registered: res}
	act := Act{Action: yidu.ActionCompose, MsgID: cmp.Or(res.Message.MsgID, pr.MsgID), People: res.Message.Recipients} // a registration without a send
	if post.Send {
		act.Action = yidu.ActionSend
	}
	if err != nil {
		act.Err = err
		out.Acts = append(out.Acts, act)
		return out, err
	}
	m := res.Message
	if res.Created || post.Send { // a replay that sends nothing did nothing
		out.Acts = append(out.Acts, act)
	}
	if res.Created {
		s.log.InfoContext(ctx, "message registered", "corp", m.CorpID, "msgid", m.MsgID, "recipients", m.Recipients, "by", p.Name)
	}
	if t := yidu.TallySends(res.Send.Outcomes, true); post.Send && t.Result != "sent" {
		s.log.WarnContext(ctx, "message not sent to everyone", "corp", m.CorpID, "msgid", m.MsgID,
			"result", cmp.Or(t.Result, "failed"), "refused", t.Refused, "unsent", t.Unsent, "unknown", t.Unknown)
	}
	tried, err := s.registeredFollowUp(ctx, p, m, pr, res.Created)
	if tried && !res.Created {
		// A replay that changes the policy is a follow-up change (a new
		// notice's policy is part of its send row).
		out.Acts = append(out.Acts, Act{Action: yidu.ActionFollowUpChange, MsgID: m.MsgID, Detail: "follow_up=policy", Err: err})
	}
	return out, err
}

// postKept keeps a notice that is not sent now: a draft or a scheduled
// notice (Content.Later), composed with its follow-up in one
// transaction for the Runner, which registers and sends it at its time;
// or, approval, one that needs approval, kept as a draft asking for it
// (SendNow of a notice not approved waits) and sent when approved.
func (s *Service) postKept(ctx context.Context, p *access.Principal, post Post, pr Prepared, approval bool) (Posted, error) {
	sch, act := yidu.Schedule{Draft: true}, yidu.ActionCompose
	if !approval {
		if s.st == nil {
			return Posted{}, ErrNoCampaigns
		}
		if !post.Draft && !post.Send {
			return Posted{}, yidu.Fieldf("send", "send: send_at needs \"send\": true (a scheduled notice is sent)")
		}
		if !post.SentAt.IsZero() {
			return Posted{}, yidu.Fieldf("sent_at", "sent_at is set when the notice is sent, not with send_at or draft")
		}
		sch = yidu.Schedule{SendAt: post.SendAt, Draft: post.Draft}
		if !post.Draft {
			act = yidu.ActionSchedule
		}
	}
	d := s.draftOf(post, pr, sch)
	n, err := s.keep(ctx, p, d, pr.FollowUp, s.standingOf(p, post, pr))
	if err == nil && approval {
		n, _, err = s.SendNow(ctx, p, n)
	}
	kept := Act{Action: act, MsgID: cmp.Or(n.MsgID, pr.MsgID), Err: err}
	return Posted{Notice: n, Approval: approval && err == nil, Acts: []Act{kept}}, err
}

// draftOf is the draft of a prepared post kept for later: prepare
// checked its audience, its text (kept with it and published as
// version 1 when it is sent, its card linked to the reading page) and
// chose its follow-up, so keep does not ask again.
func (s *Service) draftOf(post Post, pr Prepared, sch yidu.Schedule) yidu.Draft {
	sch.Timezone = post.App.Timezone
	return yidu.Draft{
		MsgID: pr.MsgID, App: post.App, Title: pr.Title, Body: pr.Body, URL: pr.URL, Audience: pr.Audience,
		Content: keptContent(post.Content, pr.ReadRule), Schedule: sch,
	}
}

// Compose is a new draft or scheduled notice, stored with its follow-up
// policy in one transaction: the posted one, else the app's default
// (followUpSet: the request named one, null included).
type Compose struct {
	Draft       yidu.Draft
	FollowUp    *yidu.Policy
	FollowUpSet bool
}

// Compose stores a draft or a scheduled notice for the caller, who must
// be allowed to send through its app; the notice and its follow-up
// policy are written in one transaction, so a failure between them
// leaves neither.
func (s *Service) Compose(ctx context.Context, p *access.Principal, c Compose) (yidu.Notice, error) {
	if s.st == nil {
		return yidu.Notice{}, ErrNoCampaigns
	}
	app := c.Draft.App
	if err := s.CheckAudience(ctx, p, app, c.Draft.Audience); err != nil {
		return yidu.Notice{}, err
	}
	pol := c.FollowUp
	if d := s.DefaultFollowUp(app, c.FollowUpSet); d != nil {
		pol = d
	}
	// Its full text is checked now and kept with it, published as
	// version 1 when it is sent (issue 39).
	if err := s.checkDraftContent(ctx, &c.Draft); err != nil {
		return yidu.Notice{}, err
	}
	return s.keep(ctx, p, c.Draft, pol, nil)
}

// keep stores d, checked but for its follow-up policy pol, for p: pol
// is checked against its send time (a draft's against now; the deadline
// of one sent later than that is the deadline: plan stops it), the
// notice and pol are written in one transaction, and a scheduled notice
// that needs approval asks for it (issue 41).
//
// standing, when not nil, keeps the notice's standing rule once it is
// stored and before approval is asked: the approval binds the rule
// (ApprovalHash), so it must be there when the hash is taken.
func (s *Service) keep(ctx context.Context, p *access.Principal, d yidu.Draft, pol *yidu.Policy, standing func(ctx context.Context, tx *sql.Tx, msgid string) error) (yidu.Notice, error) {
	if s.st == nil {
		return yidu.Notice{}, ErrNoCampaigns
	}
	if !d.Schedule.Draft && d.Schedule.SendAt.IsZero() {
		return yidu.Notice{}, yidu.Fieldf("send_at", "send_at is required unless draft")
	}
	sendAt := cmp.Or(d.Schedule.SendAt, s.o.Now())
	if err := s.CheckFollowUp(pol, sendAt); err != nil {
		return yidu.Notice{}, err
	}
	d.By = p.Name
	n, err := s.compose(ctx, p, d, pol, sendAt, standing)
	if err != nil || n.State == yidu.StateDraft {
		return n, err
	}
	n, _, err = s.review(ctx, p, n, false)
	return n, err
}

// compose stores the notice with its follow-up policy and its standing
// rule (standing, when not nil) in one transaction: a compose writes all,
// or none, so a crash never leaves a scheduled standing notice without its
// rule. A test's fake that keeps them elsewhere has them stored after.
func (s *Service) compose(ctx context.Context, p *access.Principal, d yidu.Draft, pol *yidu.Policy, sendAt time.Time,
	standing func(ctx context.Context, tx *sql.Tx, msgid string) error) (yidu.Notice, error) {
	app := d.App
	rounds, txPol := s.o.Rounds.(txPolicies)
	n, err := s.st.CreateWith(ctx, d, func(ctx context.Context, tx *sql.Tx, d yidu.Draft) error {
		if pol != nil && txPol {
			if err := InFollowUp(rounds.StorePolicyIn(ctx, tx, app.CorpID, d.MsgID, *pol, sendAt, p.Name)); err != nil {
				return err
			}
		}
		if standing != nil {
			return standing(ctx, tx, d.MsgID)
		}
		return nil
	})
	if err == nil && pol != nil && !txPol {
		err = InFollowUp(s.o.Rounds.StorePolicy(ctx, app.CorpID, n.MsgID, *pol, sendAt, p.Name))
	}
	return n, err
}

// prepare checks what p posted before anything is stored, registered or
// sent: its standing rule, the audience p may address, the content (what
// makes it read is fixed now), a card linking to its reading page, the
// app's default follow-up, and, for a notice sent now (not
// Content.Later), its time, its policy and whether it needs approval
// (the bool: it is kept for approval, not sent).
func (s *Service) prepare(ctx context.Context, p *access.Principal, post Post) (Prepared, bool, error) {
	if err := s.checkStanding(post); err != nil {
		return Prepared{}, false, err
	}
	o := post.Outgoing
	out := Prepared{Registration: o.Registration, FollowUp: o.FollowUp}
	if err := s.CheckAudience(ctx, p, o.App, o.Audience); err != nil {
		return out, false, err
	}
	o.Content.Title = o.Title
	ver, err := s.PrepareContent(ctx, o.App.CorpID, o.Content)
	if err != nil {
		return out, false, err
	}
	if out.Version = ver; ver != nil {
		out.ReadRule, _ = yidu.ParseReadRule(o.Content.ReadRule)
		out.Settings = noticev.Settings{ReadRule: out.ReadRule, MinReadSeconds: o.Content.MinReadSeconds}
		if err := s.linkToPage(&out.Registration); err != nil {
			return out, false, err
		}
	}
	if d := s.DefaultFollowUp(o.App, o.FollowUpSet); d != nil {
		out.FollowUp, out.FollowUpDefault = d, true
	}
	if o.Content.Later {
		return out, false, nil
	}
	if out.SentAt.IsZero() {
		out.SentAt = s.o.Now().UTC()
	}
	if err := s.CheckFollowUp(out.FollowUp, out.SentAt); err != nil {
		return out, false, err
	}
	if !post.Send || post.App.Approval == nil {
		return out, false, nil
	}
	need, _, err := s.NeedsApprovalFor(ctx, post.App, out.Audience, out.ReadRule)
	return out, need, err
}

// checkStanding checks a posted standing spec before anything is
// written: its own rule (yidu.Standing.Validate), an audience that can
// have newcomers, a notice that is sent (now or at send_at, never kept
// as a draft), and cycles only where the page
// can ask again (read_rule acknowledged, with content).
func (s *Service) checkStanding(post Post) error {
	if post.Standing == nil {
		return nil
	}
	if s.o.Standing == nil {
		return &yidu.StandingError{Field: "standing", Reason: "standing notices are not configured on this server"}
	}
	if err := post.Standing.Validate(s.o.Now()); err != nil {
		return err
	}
	if err := yidu.CheckStandingAudience(post.Audience); err != nil {
		return err
	}
	if !post.Send || post.Draft {
		// Never a draft: its joiners are sent its card, so it is sent now
		// or at send_at (or held for approval, sent when approved).
		return &yidu.StandingError{Field: "standing", Reason: `a standing notice is sent now or scheduled ("send": true, not a draft): joiners are sent its card`}
	}
	if post.Standing.ReacknowledgeEvery != "" && (!post.Content.Has || post.Content.ReadRule != string(yidu.ReadRuleAcknowledged)) {
		return &yidu.StandingError{Field: "standing.reacknowledge_every",
			Reason: `a cycle asks for acknowledgement on the reading page: the notice needs content and "read_rule": "acknowledged"`}
	}
	return nil
}

// register registers what prepare checked and, when it asks to, sends
// its cards now (the tracker's RegisterAndSend: a replay of the same
// msgid finds the notice registered). keepContent and
// registeredFollowUp keep the rest (Post).
func (s *Service) register(ctx context.Context, pr Prepared) (yidu.Registered, error) {
	if s.o.Registrar == nil {
		return yidu.Registered{}, ErrNoRegistrar
	}
	return s.o.Registrar.RegisterAndSend(ctx, pr.Registration)
}

// keepContent keeps what pr registered as m sent: its content as
// version 1 (a replay finds it stored).
func (s *Service) keepContent(ctx context.Context, m yidu.Message, pr Prepared, by string) error {
	if pr.Version == nil {
		return nil
	}
	cs, err := s.contents()
	if err != nil {
		return err
	}
	if _, err := cs.Create(ctx, m.CorpID, m.MsgID, *pr.Version, pr.Settings, by); err != nil {
		return fmt.Errorf("campaign: content of %s: %w", m.MsgID, err)
	}
	return nil
}

// registeredFollowUp stores the policy of what pr registered as m
// (StoreFollowUp); created says the registration made m. The app's
// default goes to a notice the registration created only: a replay must
// not undo a policy changed since. tried: a policy was stored or refused.
func (s *Service) registeredFollowUp(ctx context.Context, p *access.Principal, m yidu.Message, pr Prepared, created bool) (tried bool, err error) {
	if pr.FollowUp == nil || (!created && pr.FollowUpDefault) {
		return false, nil
	}
	return true, s.StoreFollowUp(ctx, p, m, *pr.FollowUp)
}

// keptContent is the full text a draft or scheduled notice keeps of c
// (Content.Later), as checkDraftContent leaves it: the read rule rr
// (PrepareContent checked it; prepare parsed it), no attachments an
// empty list; nil without content.
func keptContent(c Content, rr yidu.ReadRule) *yidu.NoticeContent {
	if !c.Has {
		return nil
	}
	kept := &yidu.NoticeContent{Markdown: c.Markdown, Attachments: c.Attachments, ReadRule: rr, MinReadSeconds: c.MinReadSeconds}
	if kept.Attachments == nil {
		kept.Attachments = []string{}
	}
	return kept
}
