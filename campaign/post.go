package campaign

import (
	"cmp"
	"context"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign/store"
)

// Post is a notice as POST /messages carries it: sent now, scheduled
// (SendAt) or kept as a draft (Draft).
type Post struct {
	Outgoing
	SendAt time.Time
	Draft  bool
	// Kept is the posted full text as a notice not yet sent keeps it
	// (published as version 1 when it is sent); nil: none.
	Kept *yidu.NoticeContent
	// Standing makes it a standing notice (issue 51); nil: an ordinary one.
	Standing *yidu.Standing
}

// Act is an audit row a Post is due, with its outcome (Err nil: ok).
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
	if err := s.checkStanding(post); err != nil {
		return Posted{}, err
	}
	pr, err := s.prepare(ctx, p, post.Outgoing)
	if err != nil {
		return Posted{}, err
	}
	if post.Content.Later {
		return s.postLater(ctx, p, post, pr)
	}
	if post.Send && post.App.Approval != nil {
		need, _, err := s.NeedsApprovalFor(ctx, post.App, pr.Audience, pr.ReadRule)
		if err != nil {
			return Posted{}, err
		}
		if need {
			return s.postForApproval(ctx, p, post, pr)
		}
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
		err = s.keepStanding(ctx, p, res.Message.MsgID, post, pr)
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

// postLater composes a draft or a scheduled notice (its follow-up in the
// same transaction) for the Runner, which registers and sends it at its
// time.
func (s *Service) postLater(ctx context.Context, p *access.Principal, post Post, pr Prepared) (Posted, error) {
	if s.st == nil {
		return Posted{}, ErrNoCampaigns
	}
	if !post.Draft && !post.Send {
		return Posted{}, yidu.Fieldf("send", "send: send_at needs \"send\": true (a scheduled notice is sent)")
	}
	if !post.SentAt.IsZero() {
		return Posted{}, yidu.Fieldf("sent_at", "sent_at is set when the notice is sent, not with send_at or draft")
	}
	n, err := s.Compose(ctx, p, s.composeOf(post, pr, yidu.Schedule{SendAt: post.SendAt, Draft: post.Draft}))
	if err == nil && post.Standing != nil {
		err = s.keepStanding(ctx, p, n.MsgID, post, pr)
	}
	act := Act{Action: yidu.ActionSchedule, MsgID: cmp.Or(n.MsgID, pr.MsgID), Err: err}
	if post.Draft {
		act.Action = yidu.ActionCompose
	}
	return Posted{Notice: n, Acts: []Act{act}}, err
}

// postForApproval keeps a notice that needs approval as a draft and asks
// for it (SendNow of a notice not approved waits); it is sent when
// approved.
func (s *Service) postForApproval(ctx context.Context, p *access.Principal, post Post, pr Prepared) (Posted, error) {
	n, err := s.Compose(ctx, p, s.composeOf(post, pr, yidu.Schedule{Draft: true}))
	if err == nil && post.Standing != nil {
		err = s.keepStanding(ctx, p, n.MsgID, post, pr)
	}
	if err == nil {
		n, err = s.SendNow(ctx, p, n)
	}
	act := Act{Action: yidu.ActionCompose, MsgID: cmp.Or(n.MsgID, pr.MsgID), Err: err}
	return Posted{Notice: n, Approval: err == nil, Acts: []Act{act}}, err
}

// composeOf is the Compose of a prepared post kept for later: its full
// text is kept with it and published as version 1 when it is sent.
func (s *Service) composeOf(post Post, pr Prepared, sch yidu.Schedule) Compose {
	sch.Timezone = post.App.Timezone
	return Compose{Draft: yidu.Draft{
		MsgID: pr.MsgID, App: post.App, Title: pr.Title, Body: pr.Body, URL: pr.URL, Audience: pr.Audience,
		Content: post.Kept, Schedule: sch,
	}, FollowUp: pr.FollowUp, FollowUpSet: post.FollowUpSet}
}
