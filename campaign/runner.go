package campaign

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
	noticev "github.com/yidu-io/yidu/notice"
)

// Runner defaults.
const (
	DefaultMaxLateness  = 2 * time.Hour
	DefaultLeaseTTL     = 30 * time.Second
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
	OnHeld func(ctx context.Context, n Notice) error
	// Check decides, when a scheduled notice's time has come and before
	// it is claimed, whether it may still be sent (Service.AtItsTime):
	// "" sends it; any other answer holds it with that reason. An error
	// leaves it for the next poll (never sent unchecked). nil: no check.
	Check func(ctx context.Context, n Notice) (hold string, err error)
	// Publisher publishes a notice's kept full text as its version 1
	// before its cards leave (notice.Store); nil: a notice with full text
	// fails instead of going out without it.
	Publisher Publisher
}

// Publisher renders and stores a notice's version 1 (notice.Store):
// storing the same content again is a no-op, so a resumed send
// publishes once.
type Publisher interface {
	Prepare(ctx context.Context, corp string, d noticev.Draft) (noticev.Version, error)
	Create(ctx context.Context, corp, msgid string, v noticev.Version, set noticev.Settings, by string) (noticev.Version, error)
}

// Runner sends due notices: a bounded poll loop (Run) that claims each due
// notice with a Lease and registers and sends it through the Registrar.
type Runner struct {
	s     *Store
	reg   Registrar
	lease Lease
	o     RunnerOptions
	sem   chan struct{}
	wg    sync.WaitGroup
}

// NewRunner returns a Runner over s sending through reg.
func NewRunner(s *Store, reg Registrar, o RunnerOptions) (*Runner, error) {
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
	return &Runner{s: s, reg: reg, o: o, sem: make(chan struct{}, o.Concurrency),
		lease: Lease{Table: "campaigns", Owner: o.Owner, TTL: o.LeaseTTL}}, nil
}

func or[T int | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

// DefaultOwner is host-pid-random: unique per process, readable in
// campaigns.owner.
func DefaultOwner() string {
	h, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", h, os.Getpid(), hex.EncodeToString(b[:]))
}

// Run polls every Poll until ctx is done, then drains: it waits for the
// sends in flight, whose context is ctx too. A cancelled send releases
// its lease at once for another replica to resume; the tracker recorded
// each batch before calling WeCom, so the resume skips the delivered
// batches and resends an interrupted one once, under WeCom's duplicate
// check (tracker.Send).
func (r *Runner) Run(ctx context.Context) error {
	t := time.NewTicker(r.o.Poll)
	defer t.Stop()
	defer r.wg.Wait()
	for {
		if _, err := r.poll(ctx, false); err != nil && ctx.Err() == nil {
			r.s.log.Error("campaign poll", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Tick is one poll that waits for the sends it started: it holds notices
// past MaxLateness, claims due (or abandoned) ones and sends them. It
// returns how many it claimed. For tests and `yidu` commands.
func (r *Runner) Tick(ctx context.Context) (int, error) {
	n, err := r.poll(ctx, true)
	return n, err
}

func (r *Runner) poll(ctx context.Context, wait bool) (int, error) {
	now := r.s.now().UTC()
	if err := r.hold(ctx, now); err != nil {
		return 0, err
	}
	rows, err := r.s.db.QueryContext(ctx, `SELECT msgid, state FROM campaigns
		WHERE (state = 'scheduled' AND send_at <= ?) OR (state = 'sending' AND lease_until <= ?)
		ORDER BY send_at LIMIT ?`, now, now, r.o.Batch)
	if err != nil {
		return 0, fmt.Errorf("campaign: due notices: %w", err)
	}
	var due, first []string
	for rows.Next() {
		var id, state string
		if err := rows.Scan(&id, &state); err != nil {
			rows.Close()
			return 0, fmt.Errorf("campaign: due notices: %w", err)
		}
		due = append(due, id)
		if state == string(yidu.StateScheduled) {
			first = append(first, id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("campaign: due notices: %w", err)
	}
	var wg sync.WaitGroup
	claimed := 0
	for _, id := range due {
		if slices.Contains(first, id) {
			// A first send is checked at its time; a resume was checked
			// before its first claim and may have sent batches already.
			ok, err := r.atItsTime(ctx, id)
			if err != nil {
				r.s.log.Error("campaign check at its time", "msgid", id, "err", err)
				continue
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
			r.fire(ctx, id)
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
	rows, err := r.s.db.QueryContext(ctx, `SELECT msgid FROM campaigns
		WHERE state = 'scheduled' AND send_at < ? AND state_reason <> ? LIMIT ?`, now.Add(-r.o.MaxLateness), reasonSendNow, r.o.Batch)
	if err != nil {
		return fmt.Errorf("campaign: late notices: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("campaign: late notices: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("campaign: late notices: %w", err)
	}
	at := now.UTC().Truncate(time.Millisecond)
	for _, id := range ids {
		n, err := r.s.Get(ctx, nil, id)
		if err != nil {
			return err
		}
		// Each hold is an audit row in its transaction and its author is
		// told, as a hold at its time is (issue 41).
		reason := HeldReason(int64(now.Sub(n.SendAt)/time.Minute), r.o.MaxLateness)
		held := false
		err = r.s.inTx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `UPDATE campaigns SET state = 'held', state_reason = ?, updated_at = ?
				WHERE msgid = ? AND state = 'scheduled' AND send_at < ? AND state_reason <> ?`,
				reason, at, id, now.Add(-r.o.MaxLateness), reasonSendNow)
			if err != nil {
				return err
			}
			if c, _ := res.RowsAffected(); c == 0 {
				return nil // claimed, edited or held by another replica meanwhile
			}
			held = true
			return audit.Insert(ctx, tx, stepEvent(nil, n, yidu.ActionHold, at, "version="+n.ApprovalHash+" reason="+reason))
		})
		if err != nil {
			return fmt.Errorf("campaign: hold late %s: %w", id, err)
		}
		if !held {
			continue
		}
		r.s.met.transitions.WithLabelValues(string(yidu.StateHeld)).Inc()
		r.s.log.Warn("late notice held", "corp", n.App.CorpID, "msgid", id, "max_lateness", r.o.MaxLateness)
		n.State, n.Reason = yidu.StateHeld, reason
		r.tellHeld(ctx, n)
	}
	return nil
}

// claim claims msgID: from scheduled (a first send) or from sending with
// an expired lease (a resume). The first claim sets started_at and
// sent_late_by; MySQL evaluates the assignments left to right, so
// sent_late_by reads started_at before it is set.
func (r *Runner) claim(ctx context.Context, msgID string) (bool, error) {
	now := r.s.now().UTC().Truncate(time.Millisecond)
	// Only a notice that needs no approval, or is approved, is claimed
	// (issue 41).
	ok, err := r.lease.Claim(ctx, r.s.db, now, []yidu.NoticeState{yidu.StateScheduled},
		`sent_late_by = IF(started_at IS NULL, GREATEST(0, TIMESTAMPDIFF(SECOND, send_at, ?)), sent_late_by),
		started_at = COALESCE(started_at, ?), updated_at = ?`,
		"msgid = ? AND approval IN ('', 'approved')", now, now, now, msgID)
	if err != nil {
		return false, err
	}
	if !ok {
		r.s.met.claims.WithLabelValues("lost").Inc()
	}
	return ok, nil
}

// fire registers and sends a claimed notice, renewing the lease while it
// runs. The registration uses the notice's msgid, so a resumed fire
// finds the registration done and sends only the batches without a
// final outcome (tracker: the send report in message_sends).
func (r *Runner) fire(ctx context.Context, msgID string) {
	where := "msgid = ?"
	n, err := r.s.Get(ctx, nil, msgID)
	if err != nil {
		r.s.log.Error("campaign fire", "msgid", msgID, "err", err)
		_ = r.lease.Release(context.WithoutCancel(ctx), r.s.db, r.s.now().UTC(), where, msgID)
		return
	}
	if n.Attempts > 1 {
		r.s.met.claims.WithLabelValues("resumed").Inc()
	} else {
		r.s.met.claims.WithLabelValues("won").Inc()
		r.s.met.lateness.Observe(n.SentLateBy.Seconds())
	}
	log := r.s.log.With("corp", n.App.CorpID, "msgid", msgID, "attempt", n.Attempts)
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
		_ = r.lease.Release(context.WithoutCancel(ctx), r.s.db, r.s.now().UTC(), where, msgID)
	case n.Attempts >= r.o.MaxAttempts:
		reason := "WeCom did not take every batch"
		if err != nil {
			reason = err.Error()
		}
		r.finish(ctx, log, n, yidu.StateFailed, yidu.Truncate(fmt.Sprintf("after %d attempts: %s", n.Attempts, reason), 500))
	default:
		log.Warn("campaign send incomplete, retrying later", "err", err, "backoff", r.o.RetryBackoff)
		_ = r.lease.Release(context.WithoutCancel(ctx), r.s.db, r.s.now().UTC().Add(r.o.RetryBackoff), where, msgID)
	}
}

// publish stores n's kept full text as its version 1, by its author;
// nothing without one. A text that no longer checks (an attachment gone)
// is yidu.ErrInvalid: the notice fails rather than going out without it.
func (r *Runner) publish(ctx context.Context, n Notice) error {
	if n.Content == nil {
		return nil
	}
	if r.o.Publisher == nil {
		return yidu.Invalidf("content: this server keeps no notice content; the notice was not sent")
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
}, n Notice, state yidu.NoticeState, reason string) {
	now := r.s.now().UTC()
	ok, err := r.lease.Finish(context.WithoutCancel(ctx), r.s.db, state, "state_reason = ?, finished_at = ?, updated_at = ?",
		"msgid = ?", reason, now, now, n.MsgID)
	switch {
	case err != nil:
		log.Warn("campaign finish", "err", err)
	case !ok:
		log.Warn("campaign lease lost before finishing", "state", state)
	default:
		r.s.met.transitions.WithLabelValues(string(state)).Inc()
		log.Info("notice "+string(state), "reason", reason, "late_by", n.SentLateBy)
	}
}

// heartbeat renews the lease every LeaseTTL/3 until stopped; a lost lease
// cancels the send (another replica owns it now).
func (r *Runner) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, msgID string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(r.o.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			ok, err := r.lease.Renew(ctx, r.s.db, r.s.now().UTC(), "msgid = ?", msgID)
			if err == nil && !ok {
				cancel(errors.New("lease lost"))
				return
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// HeldReason is the state_reason of a notice held minutes after its
// send_at under maxLateness: a person decides, since a notice sent that
// late (yidu was down) may no longer be true or wanted.
func HeldReason(minutes int64, maxLateness time.Duration) string {
	head, tail := heldReasonParts(maxLateness)
	return fmt.Sprintf("%s%d%s", head, minutes, tail)
}

// lateReasonHead begins the reason of a notice held for lateness.
const lateReasonHead = "held: sent "

func heldReasonParts(maxLateness time.Duration) (head, tail string) {
	return lateReasonHead, fmt.Sprintf(" minutes late would exceed max_lateness (%d minutes); send it now or cancel it",
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
	rows, err := r.s.db.QueryContext(ctx, `SELECT msgid FROM campaigns
		WHERE state = 'scheduled' AND send_at <= ? AND approval IN ('pending', 'rejected') LIMIT ?`, now, r.o.Batch)
	if err != nil {
		return fmt.Errorf("campaign: unapproved due notices: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("campaign: unapproved due notices: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("campaign: unapproved due notices: %w", err)
	}
	at := now.Truncate(time.Millisecond)
	for _, id := range ids {
		n, err := r.s.Get(ctx, nil, id)
		if err != nil {
			return err
		}
		held := false
		err = r.s.inTx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `UPDATE campaigns SET state = 'held', state_reason = ?, updated_at = ?
				WHERE msgid = ? AND state = 'scheduled' AND approval IN ('pending', 'rejected')`, ReasonAwaitingApproval, at, id)
			if err != nil {
				return err
			}
			if c, _ := res.RowsAffected(); c == 0 {
				return nil // approved, edited or held by another replica meanwhile
			}
			held = true
			return insertStep(ctx, tx, n, ApprovalStep{Hash: n.ApprovalHash, Step: StepHeld, Actor: System, At: at},
				stepEvent(nil, n, yidu.ActionHold, at, "version="+n.ApprovalHash+" reason=待审批"))
		})
		if err != nil {
			return fmt.Errorf("campaign: hold unapproved %s: %w", id, err)
		}
		if !held {
			continue
		}
		r.s.met.transitions.WithLabelValues(string(yidu.StateHeld)).Inc()
		r.s.log.Warn("notice held: not approved by its time", "corp", n.App.CorpID, "msgid", id)
		n.State, n.Reason = yidu.StateHeld, ReasonAwaitingApproval
		r.tellHeld(ctx, n)
	}
	return nil
}

// tellHeld tells the author of held notice n (OnHeld) and records it.
func (r *Runner) tellHeld(ctx context.Context, n Notice) {
	if r.o.OnHeld == nil {
		return
	}
	err := r.o.OnHeld(ctx, n)
	if err != nil {
		r.s.log.Warn("author of a held notice not told", "corp", n.App.CorpID, "msgid", n.MsgID, "err", err)
	}
	r.s.told(ctx, n, "to=author "+n.CreatedBy+" step="+StepHeld+" version="+n.ApprovalHash, err)
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
	at := r.s.now().UTC().Truncate(time.Millisecond)
	held := false
	err = r.s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE campaigns SET state = 'held', state_reason = ?, updated_at = ?
			WHERE msgid = ? AND state = 'scheduled'`, yidu.Truncate(reason, 500), at, msgID)
		if err != nil {
			return err
		}
		if c, _ := res.RowsAffected(); c == 0 {
			return nil // claimed, edited or held by another replica meanwhile
		}
		held = true
		e := stepEvent(nil, n, yidu.ActionHold, at, "version="+n.ApprovalHash+" reason="+reason)
		if reason == ReasonAwaitingApproval {
			return insertStep(ctx, tx, n, ApprovalStep{Hash: n.ApprovalHash, Step: StepHeld, Actor: System, At: at}, e)
		}
		return audit.Insert(ctx, tx, e)
	})
	if err != nil {
		return false, fmt.Errorf("campaign: hold %s at its time: %w", msgID, err)
	}
	if held {
		r.s.met.transitions.WithLabelValues(string(yidu.StateHeld)).Inc()
		r.s.log.Warn("notice held at its time", "corp", n.App.CorpID, "msgid", msgID, "reason", reason)
		n.State, n.Reason = yidu.StateHeld, reason
		r.tellHeld(ctx, n)
	}
	return false, nil
}
