// Package loops schedules and claims the notice service's work in the
// background, each item under its own recover and backoff: the Runner
// sends due scheduled notices, Rounds runs the follow-up rounds
// (reminders, escalation digests, the daily quota) and StandingLoop the
// standing notices' joiners and cycles. Each claims its item in MySQL
// (store.Lease), so exactly one replica works on it. What may be sent is
// the notice service's decision (package campaign), asked through the
// functions each loop is given (RunnerOptions.Check, Rounds.Gate).
package loops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/loop"
	noticev "github.com/yidu-io/yidu/notice"
)

// Runner defaults.
const (
	DefaultMaxLateness  = 2 * time.Hour
	DefaultLeaseTTL     = store.DefaultLeaseTTL
	DefaultPoll         = time.Second
	DefaultBatch        = 10
	DefaultConcurrency  = 2
	DefaultMaxAttempts  = 5
	DefaultRetryBackoff = time.Minute
)

// RunnerOptions configures a Runner; zero values take the defaults.
type RunnerOptions struct {
	// Owner names this replica in campaigns.owner (default host-pid-random).
	Owner string
	// LeaseTTL is how long a claim lasts without renewal: how soon another
	// replica resumes the send of one that died. Renewed every LeaseTTL/3.
	LeaseTTL time.Duration
	// Poll is the time between two polls for due notices.
	Poll time.Duration
	// MaxLateness: a scheduled notice more than this past its send_at
	// (yidu was down) is held for a person instead of sent
	// (dashboard.max_lateness).
	MaxLateness time.Duration
	// Batch is the most due notices one poll claims; Concurrency the most
	// sent at once by this replica.
	Batch, Concurrency int
	// MaxAttempts: after this many claims a notice that still has batches
	// WeCom refused or that never left is failed.
	MaxAttempts int
	// RetryBackoff is the wait before such a notice is tried again.
	RetryBackoff time.Duration
	// OnHeld tells the author of a notice held at its time (issue 41:
	// not approved, or outside the author's audience now); n.Reason says
	// why. Its outcome is an audit row (notify). nil: the page and the
	// log only.
	OnHeld func(ctx context.Context, n yidu.Notice) error
	// Check decides, when a scheduled notice's time has come and before
	// it is claimed, whether it may still be sent (Service.AtItsTime):
	// "" sends it; any other answer holds it with that reason. An error
	// leaves it for the next poll (never sent unchecked). nil: no check.
	Check func(ctx context.Context, n yidu.Notice) (hold string, err error)
	// Publisher publishes a notice's kept full text as its version 1
	// before its cards leave (notice.Store); nil: a notice with full text
	// fails instead of going out without it.
	Publisher Publisher
	// Guard runs each notice's send and hold under its own recover and
	// backoff (yidu_loop_*{loop="runner"}): one that panics or fails
	// waits, the others go on. Nil: one counting nowhere.
	Guard *loop.Guard
}

// Publisher renders and stores a notice's version 1 (notice.Store):
// storing the same content again is a no-op, so a resumed send
// publishes once.
type Publisher interface {
	Prepare(ctx context.Context, corp string, d noticev.Draft) (noticev.Version, error)
	Create(ctx context.Context, corp, msgid string, v noticev.Version, set noticev.Settings, by string) (noticev.Version, error)
}

// Registrar registers and sends (tracker.Registry.RegisterAndSend): a
// repeated call with the same msgid resumes, never resending a batch an
// earlier call delivered.
type Registrar interface {
	RegisterAndSend(ctx context.Context, reg yidu.Registration) (yidu.Registered, error)
}

// Runner sends due notices: a bounded poll loop (Run) that claims each due
// notice with a Lease and registers and sends it through the Registrar.
type Runner struct {
	s     *store.Store
	reg   Registrar
	lease store.Lease
	log   *slog.Logger
	o     RunnerOptions
	sem   chan struct{}
	wg    sync.WaitGroup
}

// NewRunner returns a Runner over s sending through reg.
func NewRunner(s *store.Store, reg Registrar, o RunnerOptions) (*Runner, error) {
	if s == nil || reg == nil {
		return nil, errors.New("campaign: store and registrar are required")
	}
	if o.Owner == "" {
		o.Owner = DefaultOwner()
	}
	o.LeaseTTL = or(o.LeaseTTL, DefaultLeaseTTL)
	o.Poll = or(o.Poll, DefaultPoll)
	o.MaxLateness = or(o.MaxLateness, DefaultMaxLateness)
	o.RetryBackoff = or(o.RetryBackoff, DefaultRetryBackoff)
	o.Batch = or(o.Batch, DefaultBatch)
	o.Concurrency = or(o.Concurrency, DefaultConcurrency)
	o.MaxAttempts = or(o.MaxAttempts, DefaultMaxAttempts)
	if o.Guard == nil {
		o.Guard, _ = loop.New("runner", loop.Options{Logger: s.Logger(), Now: s.Now}) // no Registerer: no error
	}
	return &Runner{s: s, reg: reg, o: o, sem: make(chan struct{}, o.Concurrency), log: s.Logger(),
		lease: store.SendLease(o.Owner, o.LeaseTTL)}, nil
}

// noticeItem is a notice's id in the Runner's log and backoff.
func noticeItem(msgID string) string { return "notice " + msgID }

func or[T int | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

// DefaultOwner is host-pid-random: unique per process, readable in
// campaigns.owner.
func DefaultOwner() string { return store.DefaultOwner() }

// Run polls every Poll until ctx is done, then drains: it waits for the
// sends in flight, whose context is ctx too. A cancelled send releases
// its lease at once for another replica to resume; the tracker recorded
// each batch before calling WeCom, so the resume skips the delivered
// batches and resends an interrupted one once, under WeCom's duplicate
// check (tracker.Send).
func (r *Runner) Run(ctx context.Context) error {
	defer r.wg.Wait()
	// Each notice runs under its own recover (poll); the poll itself
	// under one more, so nothing ends the loop but ctx.
	loop.EveryFromStart(ctx, r.o.Poll, func(ctx context.Context) {
		_ = r.o.Guard.Run(ctx, "campaign poll", func(ctx context.Context) error {
			_, err := r.poll(ctx, false)
			return err
		})
	})
	return nil
}

// Tick is one poll that waits for the sends it started: it holds notices
// past MaxLateness, claims due (or abandoned) ones and sends them. It
// returns how many it claimed. For tests and `yidu` commands.
func (r *Runner) Tick(ctx context.Context) (int, error) {
	n, err := r.poll(ctx, true)
	return n, err
}

func (r *Runner) poll(ctx context.Context, wait bool) (int, error) {
	now := r.s.Now().UTC()
	if err := r.hold(ctx, now); err != nil {
		return 0, err
	}
	due, first, err := r.s.Due(ctx, now, r.o.Batch)
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	claimed := 0
	for _, id := range due {
		if r.o.Guard.BackedOff(noticeItem(id)) {
			continue // its hold, check or send failed lately: the others first
		}
		if slices.Contains(first, id) {
			// A first send is checked at its time; a resume was checked
			// before its first claim and may have sent batches already.
			var ok bool
			_, err := r.o.Guard.Do(ctx, noticeItem(id), func(ctx context.Context) (err error) {
				ok, err = r.atItsTime(ctx, id)
				return err
			})
			if err != nil {
				continue // logged, counted and backed off by the guard
			}
			if !ok {
				continue
			}
		}
		select {
		case r.sem <- struct{}{}:
		case <-ctx.Done():
			return claimed, nil
		}
		ok, err := r.claim(ctx, id)
		if err != nil || !ok {
			<-r.sem
			if err != nil {
				return claimed, err
			}
			continue
		}
		claimed++
		r.wg.Add(1)
		wg.Add(1)
		go func() {
			defer func() { <-r.sem; wg.Done(); r.wg.Done() }()
			// A panic in one send is recovered here, logged, counted and
			// backed off; its lease runs out and a replica resumes it.
			_, _ = r.o.Guard.Do(ctx, noticeItem(id), func(ctx context.Context) error {
				r.fire(ctx, id)
				return nil
			})
		}()
	}
	if wait {
		wg.Wait()
	}
	return claimed, nil
}

// hold moves the scheduled notices more than MaxLateness past their
// send_at to held (not those a person asked to send now). The reason
// says how late each would have been, for the page and the API
// (HeldReason's words).
func (r *Runner) hold(ctx context.Context, now time.Time) error {
	if err := r.holdUnapproved(ctx, now); err != nil {
		return err
	}
	ids, err := r.s.Late(ctx, now.Add(-r.o.MaxLateness), r.o.Batch)
	if err != nil {
		return err
	}
	at := now.UTC().Truncate(time.Millisecond)
	for _, id := range ids {
		// One notice that cannot be held never stops the others' holds
		// nor the sends after them.
		_, _ = r.o.Guard.Do(ctx, noticeItem(id), func(ctx context.Context) error { return r.holdLate(ctx, id, now, at) })
	}
	return nil
}

// holdLate holds the late scheduled notice id.
func (r *Runner) holdLate(ctx context.Context, id string, now, at time.Time) error {
	n, err := r.s.Get(ctx, nil, id)
	if err != nil {
		return err
	}
	// Each hold is an audit row in its transaction and its author is
	// told, as a hold at its time is (issue 41).
	reason := HeldReason(int64(now.Sub(n.SendAt)/time.Minute), r.o.MaxLateness)
	e := store.StepEvent(nil, n, yidu.ActionHold, at, "version="+n.ApprovalHash+" reason="+reason)
	held, err := r.s.Hold(ctx, n, store.HoldLate, now.Add(-r.o.MaxLateness), reason, at, nil, e)
	if err != nil {
		return fmt.Errorf("campaign: hold late %s: %w", id, err)
	}
	if !held {
		return nil
	}
	r.log.Warn("late notice held", "corp", n.App.CorpID, "msgid", id, "max_lateness", r.o.MaxLateness)
	n.State, n.Reason = yidu.StateHeld, reason
	r.tellHeld(ctx, n)
	return nil
}

// claim claims msgID (store.ClaimSend).
func (r *Runner) claim(ctx context.Context, msgID string) (bool, error) {
	return r.s.ClaimSend(ctx, r.lease, r.s.Now().UTC().Truncate(time.Millisecond), msgID)
}

// fire registers and sends a claimed notice, renewing the lease while it
// runs. The registration uses the notice's msgid, so a resumed fire
// finds the registration done and sends only the batches without a
// final outcome (tracker: the send report in message_sends).
func (r *Runner) fire(ctx context.Context, msgID string) {
	n, err := r.s.Get(ctx, nil, msgID)
	if err != nil {
		r.log.Error("campaign fire", "msgid", msgID, "err", err)
		_ = r.s.ReleaseSend(ctx, r.lease, r.s.Now().UTC(), msgID)
		return
	}
	r.s.Sending(n)
	log := r.log.With("corp", n.App.CorpID, "msgid", msgID, "attempt", n.Attempts)
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := r.heartbeat(fctx, cancel, msgID)
	defer stop()

	if n.App.AgentID == 0 {
		r.finish(ctx, log, n, yidu.StateFailed, fmt.Sprintf("app %s is not configured", n.App.Name))
		return
	}
	reg := yidu.Registration{MsgID: n.MsgID, App: n.App, Title: n.Title, Body: n.Body, URL: n.URL,
		SentAt: n.StartedAt, Audience: n.Audience, Send: true, FromNotice: true}
	var res yidu.Registered
	// Its full text is version 1 before the first card can be opened.
	err = r.publish(fctx, n)
	if err == nil {
		if n.Content != nil {
			reg.ReadRule = n.Content.ReadRule
		}
		res, err = r.reg.RegisterAndSend(fctx, reg)
	}
	switch {
	case err == nil && complete(res.Send):
		r.finish(ctx, log, n, yidu.StateSent, "")
	case errors.Is(err, yidu.ErrInvalid), errors.Is(err, yidu.ErrConflict), errors.Is(err, yidu.ErrRecalled):
		r.finish(ctx, log, n, yidu.StateFailed, yidu.Truncate(err.Error(), 500))
	case fctx.Err() != nil:
		// Shutdown or a lost lease: the next owner resumes at once.
		log.Info("campaign send interrupted", "cause", context.Cause(fctx))
		_ = r.s.ReleaseSend(ctx, r.lease, r.s.Now().UTC(), msgID)
	case n.Attempts >= r.o.MaxAttempts:
		reason := "WeCom did not take every batch"
		if err != nil {
			reason = err.Error()
		}
		r.finish(ctx, log, n, yidu.StateFailed, yidu.Truncate(fmt.Sprintf("after %d attempts: %s", n.Attempts, reason), 500))
	default:
		log.Warn("campaign send incomplete, retrying later", "err", err, "backoff", r.o.RetryBackoff)
		_ = r.s.ReleaseSend(ctx, r.lease, r.s.Now().UTC().Add(r.o.RetryBackoff), msgID)
	}
}

// publish stores n's kept full text as its version 1, by its author;
// nothing without one. A text that no longer checks (an attachment gone)
// is yidu.ErrInvalid: the notice fails rather than going out without it.
func (r *Runner) publish(ctx context.Context, n yidu.Notice) error {
	if n.Content == nil {
		return nil
	}
	if r.o.Publisher == nil {
		return yidu.Fieldf("content", "content: this server keeps no notice content; the notice was not sent")
	}
	v, err := r.o.Publisher.Prepare(ctx, n.App.CorpID, noticev.Draft{Title: n.Title, Markdown: n.Content.Markdown, Attachments: n.Content.Attachments})
	if err != nil {
		return err
	}
	set := noticev.Settings{ReadRule: n.Content.ReadRule, MinReadSeconds: n.Content.MinReadSeconds}
	if _, err := r.o.Publisher.Create(ctx, n.App.CorpID, n.MsgID, v, set, n.CreatedBy); err != nil {
		return fmt.Errorf("campaign: publish %s: %w", n.MsgID, err)
	}
	return nil
}

// complete reports whether every batch has a final outcome: sent,
// unknown (maybe delivered: never sent again) or nobody. Refused and
// unsent batches are tried again by the next attempt.
func complete(rep yidu.SendReport) bool {
	for _, o := range rep.Outcomes {
		if o.Status == yidu.SendRefused || o.Status == yidu.SendUnsent {
			return false
		}
	}
	return true
}

func (r *Runner) finish(ctx context.Context, log interface {
	Info(string, ...any)
	Warn(string, ...any)
}, n yidu.Notice, state yidu.NoticeState, reason string) {
	ok, err := r.s.FinishSend(ctx, r.lease, n.MsgID, state, reason)
	switch {
	case err != nil:
		log.Warn("campaign finish", "err", err)
	case !ok:
		log.Warn("campaign lease lost before finishing", "state", state)
	default:
		log.Info("notice "+string(state), "reason", reason, "late_by", n.SentLateBy)
	}
}

// heartbeat renews the lease every LeaseTTL/3 until stopped; a lost lease
// cancels the send (another replica owns it now).
func (r *Runner) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, msgID string) (stop func()) {
	// beats ends with stop or ctx; a renewal in flight finishes under ctx.
	beats, end := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		loop.Every(beats, r.o.LeaseTTL/3, func(context.Context) {
			if ok, err := r.s.RenewSend(ctx, r.lease, msgID); err == nil && !ok {
				cancel(errors.New("lease lost"))
				end()
			}
		})
	})
	return func() { end(); wg.Wait() }
}

// HeldReason is the state_reason of a notice held minutes after its
// send_at under maxLateness: a person decides, since a notice sent that
// late (yidu was down) may no longer be true or wanted.
func HeldReason(minutes int64, maxLateness time.Duration) string {
	head, tail := heldReasonParts(maxLateness)
	return fmt.Sprintf("%s%d%s", head, minutes, tail)
}

// Reasons a scheduled notice is held at its time (state_reason), besides
// ReasonAwaitingApproval and the lateness of HeldReason (set by
// campaign.Service.AtItsTime).
const (
	// ReasonOutsideAudience starts the reason of a notice outside its
	// author's sender audience now (the configuration narrowed it since
	// compose); the field and why follow.
	ReasonOutsideAudience = "held: outside its author's sender audience now (超出发送范围); it was not sent: "
	// ReasonAuthorMayNotSend: the author may no longer send through the
	// app (role removed, or left the company).
	ReasonAuthorMayNotSend = "held: its author may no longer send through this app; it was not sent"
)

// LateReasonHead begins the reason of a notice held for lateness.
const LateReasonHead = "held: sent "

func heldReasonParts(maxLateness time.Duration) (head, tail string) {
	return LateReasonHead, fmt.Sprintf(" minutes late would exceed max_lateness (%d minutes); send it now or cancel it",
		int64(maxLateness/time.Minute))
}

// ReasonAwaitingApproval is the state_reason of a notice held because
// its time came before its approval (issue 41, 待审批).
const ReasonAwaitingApproval = "held: not approved by its time (待审批); it was not sent"

// holdUnapproved holds every due scheduled notice whose approval is
// pending or rejected: it is never sent at its time without one. Each is
// one step of its approval trail, and its author is told
// (RunnerOptions.OnHeld).
func (r *Runner) holdUnapproved(ctx context.Context, now time.Time) error {
	ids, err := r.s.Unapproved(ctx, now, r.o.Batch)
	if err != nil {
		return err
	}
	at := now.Truncate(time.Millisecond)
	for _, id := range ids {
		_, _ = r.o.Guard.Do(ctx, noticeItem(id), func(ctx context.Context) error { return r.holdOneUnapproved(ctx, id, at) })
	}
	return nil
}

// holdOneUnapproved holds the unapproved due notice id.
func (r *Runner) holdOneUnapproved(ctx context.Context, id string, at time.Time) error {
	n, err := r.s.Get(ctx, nil, id)
	if err != nil {
		return err
	}
	st := store.ApprovalStep{Hash: n.ApprovalHash, Step: store.StepHeld, Actor: store.System, At: at}
	e := store.StepEvent(nil, n, yidu.ActionHold, at, "version="+n.ApprovalHash+" reason=待审批")
	held, err := r.s.Hold(ctx, n, store.HoldUnapproved, time.Time{}, ReasonAwaitingApproval, at, &st, e)
	if err != nil {
		return fmt.Errorf("campaign: hold unapproved %s: %w", id, err)
	}
	if !held {
		return nil
	}
	r.log.Warn("notice held: not approved by its time", "corp", n.App.CorpID, "msgid", id)
	n.State, n.Reason = yidu.StateHeld, ReasonAwaitingApproval
	r.tellHeld(ctx, n)
	return nil
}

// tellHeld tells the author of held notice n (OnHeld) and records it.
func (r *Runner) tellHeld(ctx context.Context, n yidu.Notice) {
	if r.o.OnHeld == nil {
		return
	}
	err := r.o.OnHeld(ctx, n)
	if err != nil {
		r.log.Warn("author of a held notice not told", "corp", n.App.CorpID, "msgid", n.MsgID, "err", err)
	}
	e := store.StepEvent(nil, n, yidu.ActionNotify, r.s.Now().UTC(), "to=author userid="+n.CreatedBy+" step="+store.StepHeld+" version="+n.ApprovalHash)
	if err != nil {
		e.Outcome = "failed"
	}
	_ = r.s.Audit(ctx, e)
}

// atItsTime checks due notice msgID with Check before its first claim
// (issue 41): false when Check holds it (state held, its reason, an
// audit row, the author told; a hold for approval is a step of its
// trail too) or it is no longer scheduled.
func (r *Runner) atItsTime(ctx context.Context, msgID string) (bool, error) {
	if r.o.Check == nil {
		return true, nil
	}
	n, err := r.s.Get(ctx, nil, msgID)
	if err != nil {
		return false, err
	}
	if n.State != yidu.StateScheduled {
		return false, nil
	}
	reason, err := r.o.Check(ctx, n)
	if err != nil || reason == "" {
		return err == nil, err
	}
	// Check may have asked for approval: the trail's version is the
	// one asked for now.
	if reason == ReasonAwaitingApproval {
		if n, err = r.s.Get(ctx, nil, msgID); err != nil {
			return false, err
		}
	}
	at := r.s.Now().UTC().Truncate(time.Millisecond)
	e := store.StepEvent(nil, n, yidu.ActionHold, at, "version="+n.ApprovalHash+" reason="+reason)
	var st *store.ApprovalStep
	if reason == ReasonAwaitingApproval {
		st = &store.ApprovalStep{Hash: n.ApprovalHash, Step: store.StepHeld, Actor: store.System, At: at}
	}
	held, err := r.s.Hold(ctx, n, store.HoldScheduled, time.Time{}, yidu.Truncate(reason, 500), at, st, e)
	if err != nil {
		return false, fmt.Errorf("campaign: hold %s at its time: %w", msgID, err)
	}
	if held {
		r.log.Warn("notice held at its time", "corp", n.App.CorpID, "msgid", msgID, "reason", reason)
		n.State, n.Reason = yidu.StateHeld, reason
		r.tellHeld(ctx, n)
	}
	return false, nil
}
