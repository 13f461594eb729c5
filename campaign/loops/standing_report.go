package loops

import (
	"context"
	"errors"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/progress"
)

// StandingRule is one standing rule in force as a caller sees it (GET
// /standing): who is current on it (has acknowledged it in its current
// cycle, or read it), within the caller's View, by department.
type StandingRule struct {
	MsgID       string                `json:"msgid"`
	App         string                `json:"app"`
	Title       string                `json:"title"`
	Spec        yidu.Standing         `json:"spec"`
	Recipients  int64                 `json:"recipients"`
	Current     int64                 `json:"current"`
	NotCurrent  int64                 `json:"not_current"`
	Pending     int                   `json:"pending_joiners"`
	Cycle       int                   `json:"cycle"`
	Departments []progress.Department `json:"departments"`
}

// Seer is what the standing report asks of progress (progress.Progress):
// which notice a caller sees and within which View (yidu.ErrNotFound:
// none of it), and its counts and departments within that View.
type Seer interface {
	Find(ctx context.Context, who *access.Principal, msgID string) (yidu.Message, access.View, error)
	Counts(ctx context.Context, m yidu.Message, v access.View) (progress.Counts, error)
	Departments(ctx context.Context, m yidu.Message, v access.View, who *access.Principal) ([]progress.Department, bool, error)
}

// Report is every standing rule in force that who sees (InForce of its
// corps, each within its View through seer), and the audit row of its
// disclosure: an export of who (detail "standing", people the rules
// reported), due however few the rules. The caller writes the row
// before the report leaves and sends nothing when it cannot (fail
// closed: personal data leaves only with its trace). An error is due no
// row: nothing left.
func (l *StandingLoop) Report(ctx context.Context, who *access.Principal, seer Seer) ([]StandingRule, audit.Event, error) {
	ids, err := l.InForce(ctx, who.Corps())
	if err != nil {
		return nil, audit.Event{}, err
	}
	out := []StandingRule{}
	for _, id := range ids {
		m, v, err := seer.Find(ctx, who, id)
		if errors.Is(err, yidu.ErrNotFound) {
			continue // outside who's scope
		}
		if err != nil {
			return nil, audit.Event{}, err
		}
		r, err := l.rule(ctx, who, seer, m, v)
		if err != nil {
			return nil, audit.Event{}, err
		}
		out = append(out, r)
	}
	row := who.Event(yidu.ActionExport, "", "", "")
	row.People, row.Detail, row.Outcome = int64(len(out)), "standing", "ok"
	return out, row, nil
}

// rule is m's line of the report within v.
func (l *StandingLoop) rule(ctx context.Context, who *access.Principal, seer Seer, m yidu.Message, v access.View) (StandingRule, error) {
	c, err := seer.Counts(ctx, m, v)
	if err != nil {
		return StandingRule{}, err
	}
	info, err := l.Info(ctx, m.CorpID, m.MsgID, v.UIDs())
	if err != nil {
		return StandingRule{}, err
	}
	depts, _, err := seer.Departments(ctx, m, v, who)
	if err != nil {
		return StandingRule{}, err
	}
	r := StandingRule{MsgID: m.MsgID, App: m.App, Title: m.Title, Spec: info.Spec, Recipients: c.Recipients,
		Current: c.Read, NotCurrent: c.Recipients - c.Read, Pending: info.PendingJoiners, Departments: depts}
	if n := len(info.ByCycle); n > 0 {
		r.Cycle = info.ByCycle[n-1].Cycle
	}
	return r, nil
}
