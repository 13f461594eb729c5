package campaign

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign/store"
)

// Remind is a manual reminder ("Remind unread") of a sent notice.
type Remind struct {
	Caller  *access.Principal
	Message yidu.Message
	// State chooses whom, of the unread, by the reading page's states:
	// unopened, opened (not read to the end) or read_to_end (not
	// acknowledged); "" reminds everyone not counted as read.
	State yidu.ReadState
}

// StateReaders is Readers that splits a notice's recipients by the
// reading page's states (progress.Progress): a reminder by state needs
// it.
type StateReaders interface {
	// InState is m's recipients within v in state st.
	InState(ctx context.Context, m yidu.Message, v access.View, st yidu.ReadState) (*roaring.Bitmap, error)
}

// checkRemindState refuses a state a reminder cannot be for: only the
// states short of acknowledged, and "" (everyone unread).
func checkRemindState(st yidu.ReadState) error {
	switch st {
	case "", yidu.ReadStateUnopened, yidu.ReadStateOpened, yidu.ReadStateReadToEnd:
		return nil
	}
	return yidu.Fieldf("state", "state %q is not one a reminder is for; it is unopened, opened or read_to_end", yidu.Truncate(string(st), 32))
}

// RemindReport is what a reminder did.
type RemindReport struct {
	yidu.RemindReport
	// Unread is how many unread people the reminder was for (in the
	// caller's scope, not reminded within the interval, members who left
	// excluded); Skipped those who could not be addressed.
	Unread, Skipped int
	// NextAllowedAt is when the people reminded now may be reminded again.
	NextAllowedAt time.Time
	// Scope is "all" (a sender's reminder) or "led" (a leader's).
	Scope string
	Acts  []Act // the audit rows due, a refusal's included
}

// Remind sends a reminder card to the unread people in the caller's scope
// (a sender of the app or an admin: every unread person; a department
// leader: the unread people of the subtrees it leads) who were not
// reminded within the interval, by hand or by a round. The notice is
// claimed in MySQL first (ErrBusy while another reminder or recall of it
// runs, on any replica), and the people are recorded before the cards
// leave, so any number of requests on any number of replicas remind each
// person once per interval. When everyone unread in scope was reminded
// within the interval, the error is a *TooSoonError. A State keeps the
// reminder to the unread people in that state (a *yidu.FieldError on
// state for any other, before anything is read or sent).
func (s *Service) Remind(ctx context.Context, r Remind) (rep RemindReport, err error) {
	p, m := r.Caller, r.Message
	defer func() {
		a := Act{Action: yidu.ActionRemind, MsgID: m.MsgID, People: int64(rep.Reminded)}
		if r.State != "" {
			a.Detail = "state=" + string(r.State) // whom it chose, as a recipients read says
		}
		due(&rep.Acts, &err, a)
	}()
	if err := checkRemindState(r.State); err != nil {
		return RemindReport{}, err
	}
	v, scope, err := s.remindView(ctx, p, m)
	if err != nil {
		return RemindReport{}, err
	}
	if m.Recalled() {
		return RemindReport{}, fmt.Errorf("%w: %s", yidu.ErrRecalled, m.MsgID)
	}
	if s.o.Reminders == nil || s.o.Readers == nil {
		return RemindReport{}, ErrNoReminderLog
	}
	// The gate: a sender kept to an audience reminds only inside it, and
	// a notice not approved (a draft registered without send) reaches
	// nobody.
	if err := s.gate(ctx, VerbRemind, p, m); err != nil {
		return RemindReport{}, err
	}
	release, err := s.claim(ctx, m, "remind")
	if err != nil {
		return RemindReport{}, err
	}
	defer release()
	unread, err := s.unreadIn(ctx, m, v, r.State)
	if err != nil {
		return RemindReport{}, err
	}
	now := s.o.Now().UTC().Truncate(time.Millisecond)
	iv := s.o.RemindInterval
	recent, err := s.o.Reminders.Reminded(ctx, m.CorpID, m.MsgID, now.Add(-iv))
	if err != nil {
		return RemindReport{}, err
	}
	due := unread.Clone()
	var next time.Time
	for uid, at := range recent {
		if due.Contains(uid) {
			due.Remove(uid)
			if n := at.Add(iv); next.IsZero() || n.Before(next) {
				next = n
			}
		}
	}
	users, skipped, err := s.o.Readers.UserIDs(ctx, m.CorpID, due)
	if err != nil {
		return RemindReport{}, err
	}
	if len(users) == 0 && !next.IsZero() {
		return RemindReport{}, &TooSoonError{Next: next}
	}
	rep = RemindReport{Unread: len(users) + skipped, Skipped: skipped, NextAllowedAt: now.Add(iv), Scope: scope}
	if len(users) == 0 {
		rep.NextAllowedAt = now
		return rep, nil
	}
	sent, err := s.recordThenSend(ctx, m, now, p.Name, scope, "remind", users, s.o.Messenger.Remind)
	if err != nil {
		return RemindReport{}, err
	}
	rep.RemindReport = sent
	rep.Skipped += sent.BadUserIDs + sent.Missing
	s.log.InfoContext(ctx, "reminder sent", "corp", m.CorpID, "msgid", m.MsgID, "scope", scope,
		"reminded", sent.Reminded, "refused", sent.Refused, "unknown", sent.Unknown, "skipped", rep.Skipped, "by", p.Name)
	return rep, nil
}

// unreadIn is m's unread people within v, kept to those in state st
// when it is set: never anyone counted as read, whatever the rule.
func (s *Service) unreadIn(ctx context.Context, m yidu.Message, v access.View, st yidu.ReadState) (*roaring.Bitmap, error) {
	unread, err := s.o.Readers.Unread(ctx, m, v)
	if err != nil || st == "" {
		return unread, err
	}
	sr, ok := s.o.Readers.(StateReaders)
	if !ok {
		return nil, fmt.Errorf("%w: reminders by state", ErrNoReminderLog)
	}
	in, err := sr.InState(ctx, m, v, st)
	if err != nil {
		return nil, err
	}
	return roaring.And(unread, in), nil
}

// remindView is whom p may remind of m and whose reminder it is: "all"
// for a sender of the app or an admin, "led" for a department leader
// (access decides); ErrForbidden for anyone else (a viewer reads only).
func (s *Service) remindView(ctx context.Context, p *access.Principal, m yidu.Message) (access.View, string, error) {
	if !access.Decide(p, yidu.ActionRemind, access.Target{Corp: m.CorpID, App: m.App}).Allowed {
		return access.View{}, "", fmt.Errorf("%w: your role may not remind through this app", ErrForbidden)
	}
	if p.MaySend(m.CorpID, m.App) {
		return access.Everyone, "all", nil
	}
	if s.o.Scope == nil {
		return access.View{}, "", fmt.Errorf("%w: your role may not remind through this app", ErrForbidden)
	}
	v, err := s.o.Scope.RemindView(ctx, p, m.CorpID, m.App)
	if err != nil {
		return access.View{}, "", fmt.Errorf("campaign: remind scope: %w", err)
	}
	if v.None() {
		return access.View{}, "", fmt.Errorf("%w: your role may not remind through this app", ErrForbidden)
	}
	if v.All() {
		return v, "all", nil
	}
	return v, "led", nil
}

// Recall is a recall of a sent notice.
type Recall struct {
	Caller  *access.Principal
	Message yidu.Message
}

// Recall recalls every card of the notice (the caller must be allowed to
// send through its app), claimed in MySQL as a reminder is: one recall
// or reminder of a notice runs at a time across replicas (ErrBusy), so a
// recall never misses a reminder's batches and WeCom is asked once.
func (s *Service) Recall(ctx context.Context, r Recall) (rep RecallReport, err error) {
	m := r.Message
	defer func() {
		due(&rep.Acts, &err, Act{Action: yidu.ActionRecall, MsgID: m.MsgID, People: int64(rep.Recalled)})
	}()
	if err := s.authorize(ctx, VerbRecall, r.Caller, MessageTarget(m)); err != nil {
		return RecallReport{}, err
	}
	if s.o.Reminders == nil || s.o.Readers == nil {
		return RecallReport{}, ErrNoReminderLog
	}
	release, err := s.claim(ctx, m, "recall")
	if err != nil {
		return RecallReport{}, err
	}
	defer release()
	read, err := s.o.Readers.ReadNow(ctx, m)
	if err != nil {
		return RecallReport{}, err
	}
	done, err := s.o.Messenger.Recall(ctx, m, read)
	return RecallReport{RecallReport: done, Read: read}, err
}

// RecallReport is what a recall did, with the read count it froze.
type RecallReport struct {
	yidu.RecallReport
	Read int64
	Acts []Act // the audit rows due, a refusal's included
}

// Reconfirmer sends the 通知已更新，请重新确认 card (tracker.Registry); a
// Messenger that is one can ask acknowledgers to confirm a material
// version (issue 39).
type Reconfirmer interface {
	Reconfirm(ctx context.Context, m yidu.Message, userIDs []string) (yidu.RemindReport, error)
}

// Reconfirmables lists who acknowledged an earlier version and was not
// yet sent version's update card (store.ReminderLog.Reconfirmable).
type Reconfirmables interface {
	Reconfirmable(ctx context.Context, corpID, msgID string, version int) (map[uint32]string, error)
}

// Reconfirm sends each member who acknowledged a version of m older than
// version (a material one, under read_rule acknowledged) one card
// 通知已更新，请重新确认, once across replicas: the notice is claimed in
// MySQL (ErrBusy while another act holds it), and the people are recorded
// (manual_reminders, scope "reack:v<version>") before the cards leave, so
// a second call, on any replica, finds nobody left. It returns how many
// were sent the card. A Messenger or ReminderLog that cannot do it: 0, nil.
func (s *Service) Reconfirm(ctx context.Context, m yidu.Message, version int, by string) (int, error) {
	rc, ok1 := s.o.Messenger.(Reconfirmer)
	who, ok2 := s.o.Reminders.(Reconfirmables)
	if !ok1 || !ok2 || m.Recalled() {
		return 0, nil
	}
	// The update card reaches people: the gate's approval holds for it.
	if err := s.mayReach(ctx, m); err != nil {
		return 0, err
	}
	release, err := s.claim(ctx, m, "reconfirm")
	if err != nil {
		return 0, err
	}
	defer release()
	people, err := who.Reconfirmable(ctx, m.CorpID, m.MsgID, version)
	if err != nil || len(people) == 0 {
		return 0, err
	}
	now := s.o.Now().UTC().Truncate(time.Millisecond)
	sent, err := s.recordThenSend(ctx, m, now, by, store.ReconfirmScope(version), "reconfirm", people, rc.Reconfirm)
	if err != nil {
		return 0, err
	}
	s.log.InfoContext(ctx, "update card sent", "corp", m.CorpID, "msgid", m.MsgID, "version", version, "reminded", sent.Reminded, "by", by)
	return sent.Reminded, nil
}

// recordThenSend records people (uid → UserID) as sent a card of m at
// now under scope, by by, and then sends them the card with send:
// recorded first, so that a second act, on any replica, finds them
// recorded. When send fails before any batch left, the record is taken
// back: the people were not reached, and the interval does not hold them.
// act names the act in the error and the log.
func (s *Service) recordThenSend(ctx context.Context, m yidu.Message, now time.Time, by, scope, act string, people map[uint32]string,
	send func(context.Context, yidu.Message, []string) (yidu.RemindReport, error)) (yidu.RemindReport, error) {
	uids := make([]uint32, 0, len(people))
	ids := make([]string, 0, len(people))
	for uid, id := range people {
		uids = append(uids, uid)
		ids = append(ids, id)
	}
	slices.Sort(uids)
	if err := s.o.Reminders.Record(ctx, m.CorpID, m.MsgID, now, by, scope, uids); err != nil {
		return yidu.RemindReport{}, err
	}
	sent, err := send(ctx, m, ids)
	if err != nil {
		if sent.Batches == 0 {
			if uerr := s.o.Reminders.Unrecord(context.WithoutCancel(ctx), m.CorpID, m.MsgID, now); uerr != nil {
				s.log.Warn("card not sent, its record kept", "act", act, "corp", m.CorpID, "msgid", m.MsgID, "err", uerr)
			}
		}
		return yidu.RemindReport{}, fmt.Errorf("campaign: %s: %w", act, err)
	}
	return sent, nil
}

// claim claims m in MySQL for act: ErrBusy while another act holds it.
func (s *Service) claim(ctx context.Context, m yidu.Message, act string) (release func(), err error) {
	release, ok, err := s.o.Reminders.Claim(ctx, m.CorpID, m.MsgID, act)
	if err == nil && !ok {
		err = ErrBusy
	}
	return release, err
}
