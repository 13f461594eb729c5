package campaign

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
)

// checkStandingEdit keeps an edit of a standing notice inside its rule
// (issue 51): the audience its rule enrols joiners by is not changed by
// an edit (the audience sent back as it is, in any order, passes). An
// edit may keep it as a draft until it is sent: the compose page's 立即发送
// of an edited notice does (PATCH draft, then POST …/send), and a
// standing notice enrols nobody before it is sent.
func (s *Service) checkStandingEdit(ctx context.Context, n yidu.Notice, patch yidu.Patch) error {
	if s.o.Standing == nil || patch.Audience == nil || sameAudience(*patch.Audience, n.Audience) {
		return nil
	}
	if _, ok, err := s.o.Standing.Spec(ctx, n.App.CorpID, n.MsgID); err != nil || !ok {
		return err
	}
	return &yidu.StandingError{Field: "audience", Reason: "a standing notice's audience is its rule for joiners: cancel it and post it again to change it"}
}

// keepStanding keeps the standing rule of a notice this post registered
// or composed: in tx, the transaction of the notice's row, when it is
// written in one (nil: registered already) and the rule's keeper can
// write there (not a test's fake).
func (s *Service) keepStanding(ctx context.Context, tx *sql.Tx, p *access.Principal, msgid string, post Post, pr Prepared) error {
	if in, ok := s.o.Standing.(txStandings); ok && tx != nil {
		return in.SaveIn(ctx, tx, post.App.CorpID, msgid, post.App.Name, pr.Audience, *post.Standing, p.By())
	}
	return s.o.Standing.Save(ctx, post.App.CorpID, msgid, post.App.Name, pr.Audience, *post.Standing, p.By())
}

// standingOf keeps post's standing rule for the notice keep stores, in
// its transaction (nil: post is no standing notice).
func (s *Service) standingOf(p *access.Principal, post Post, pr Prepared) func(context.Context, *sql.Tx, string) error {
	if post.Standing == nil {
		return nil
	}
	return func(ctx context.Context, tx *sql.Tx, msgid string) error {
		return s.keepStanding(ctx, tx, p, msgid, post, pr)
	}
}

// EndStanding ends m's standing at until (nil: now), by p, and returns
// the row the act is due: an edit of its rule ("standing: until"),
// refused when p is no admin of the corp (mayEndStanding), failed when
// it could not be written; an until that is not valid or a notice that
// is not standing is invalid input (campaign.Outcome: no row).
func (s *Service) EndStanding(ctx context.Context, p *access.Principal, m yidu.Message, until *time.Time) (acts []Act, err error) {
	defer due(&acts, &err, Act{Action: yidu.ActionEdit, MsgID: m.MsgID, Detail: "standing: until"})
	if s.o.Standing == nil {
		return nil, errors.New("campaign: standing notices are not configured")
	}
	if err := mayEndStanding(p, m.CorpID); err != nil {
		return nil, err
	}
	return nil, s.o.Standing.End(ctx, p, m.CorpID, m.MsgID, until)
}

// mayEndStanding says whether p may end a standing notice of corp: only
// an admin of the corp may.
func mayEndStanding(p *access.Principal, corp string) error {
	if !access.Decide(p, yidu.ActionEdit, access.Target{Corp: corp, Standing: true}).Allowed {
		return ErrForbidden
	}
	return nil
}

// sameAudience reports whether a and b name the same people the same
// way (the order of their lists aside).
func sameAudience(a, b yidu.Audience) bool {
	return a.All == b.All && sameSet(a.UserIDs, b.UserIDs) && sameSet(a.Departments, b.Departments) && sameSet(a.Tags, b.Tags)
}

func sameSet[T cmp.Ordered](a, b []T) bool {
	return slices.Equal(slices.Compact(slices.Sorted(slices.Values(a))), slices.Compact(slices.Sorted(slices.Values(b))))
}
