package loops

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/internal/sqlrows"
)

// Cycle is one re-acknowledgement cycle of a standing notice: by_cycle.
type Cycle struct {
	Cycle     int        `json:"cycle"`
	Version   int        `json:"version"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// Recipients and Acknowledged: at the cycle's end, or live for the
	// current one.
	Recipients   int64 `json:"recipients"`
	Acknowledged int64 `json:"acknowledged"`
}

// StandingInfo is what the message page and the API show of a standing
// notice.
type StandingInfo struct {
	Spec      yidu.Standing `json:"spec"`
	InForce   bool          `json:"in_force"`
	CreatedBy string        `json:"created_by"`
	CreatedAt time.Time     `json:"created_at"`
	// PendingJoiners: enrolled and not yet read (新入职待确认).
	PendingJoiners int `json:"pending_joiners"`
	// Joiners are the last 30 days' (newest first).
	Joiners []Joiner `json:"joiners"`
	ByCycle []Cycle  `json:"by_cycle"`
}

// Joiner is one enrolment with its state.
type Joiner struct {
	UserID   string     `json:"userid"`
	Name     string     `json:"name"`
	Left     bool       `json:"left"`
	Version  int        `json:"version"`
	JoinedAt time.Time  `json:"joined_at"`
	SentAt   *time.Time `json:"sent_at"`
	Deadline time.Time  `json:"deadline"`
	Status   string     `json:"send_status"`
	Read     bool       `json:"read"`
	Overdue  bool       `json:"overdue"`
}

// ErrNotStanding is a standing view of a notice that is not one.
var ErrNotStanding = errors.New("not a standing notice")

// Info returns m's standing view within scope (nil: everyone).
func (l *StandingLoop) Info(ctx context.Context, corp, msgid string, scope *roaring.Bitmap) (StandingInfo, error) {
	var out StandingInfo
	var sj string
	err := l.DB.QueryRowContext(ctx, `SELECT spec, created_by, created_at FROM standing_notices WHERE corp_id = ? AND msgid = ?`, corp, msgid).
		Scan(&sj, &out.CreatedBy, &out.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return out, ErrNotStanding
	}
	if err != nil {
		return out, fmt.Errorf("campaign: standing notice %s: %w", msgid, err)
	}
	if err := json.Unmarshal([]byte(sj), &out.Spec); err != nil {
		return out, fmt.Errorf("campaign: standing notice %s: %w", msgid, err)
	}
	now := l.Now()
	out.InForce = out.Spec.Enrolling(now)
	out.CreatedAt = out.CreatedAt.UTC()
	read, _, err := l.Reads.ReadBitmap(ctx, corp, msgid)
	if err != nil {
		return out, err
	}
	all, err := l.Tracker.Enrolments(ctx, corp, msgid, time.Time{}, 0)
	if err != nil {
		return out, err
	}
	uids := make([]uint32, 0, len(all))
	for _, e := range all {
		uids = append(uids, e.UID)
	}
	active, err := l.Directory.Active(ctx, corp, uids)
	if err != nil {
		return out, err
	}
	out.Joiners = []Joiner{}
	since := now.AddDate(0, 0, -30)
	for i := len(all) - 1; i >= 0; i-- {
		e := all[i]
		if scope != nil && !scope.Contains(e.UID) {
			continue
		}
		isRead := read != nil && read.Contains(e.UID)
		_, act := active[e.UID]
		if !isRead && act {
			out.PendingJoiners++
		}
		if e.JoinedAt.Before(since) {
			continue
		}
		j := Joiner{UserID: e.UserID, Left: !act, Version: e.Version, JoinedAt: e.JoinedAt, SentAt: e.SentAt, Deadline: e.Deadline,
			Status: e.Status, Read: isRead, Overdue: !isRead && now.After(e.Deadline)}
		if act {
			j.Name = active[e.UID].Name
		}
		out.Joiners = append(out.Joiners, j)
	}
	out.ByCycle, err = l.cycles(ctx, corp, msgid, scope)
	return out, err
}

func (l *StandingLoop) cycles(ctx context.Context, corp, msgid string, scope *roaring.Bitmap) ([]Cycle, error) {
	rows, err := l.DB.QueryContext(ctx, `SELECT cycle, version, started_at, ended_at, recipients, acknowledged FROM standing_cycles
		WHERE corp_id = ? AND msgid = ? ORDER BY cycle`, corp, msgid)
	if err != nil {
		return nil, fmt.Errorf("campaign: cycles of %s: %w", msgid, err)
	}
	defer rows.Close()
	out := []Cycle{}
	for rows.Next() {
		var c Cycle
		var ended sql.NullTime
		if err := rows.Scan(&c.Cycle, &c.Version, &c.StartedAt, &ended, &c.Recipients, &c.Acknowledged); err != nil {
			return nil, fmt.Errorf("campaign: cycles of %s: %w", msgid, err)
		}
		c.StartedAt = c.StartedAt.UTC()
		if ended.Valid {
			t := ended.Time.UTC()
			c.EndedAt = &t
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if n := len(out); n > 0 && out[n-1].EndedAt == nil {
		rec, _, err := l.Reads.RecipientBitmap(ctx, corp, msgid)
		if err != nil {
			return nil, err
		}
		read, _, err := l.Reads.ReadBitmap(ctx, corp, msgid)
		if err != nil {
			return nil, err
		}
		rec, read = orEmpty(rec), orEmpty(read)
		if scope != nil {
			rec, read = roaring.And(rec, scope), roaring.And(read, scope)
		}
		out[n-1].Recipients, out[n-1].Acknowledged = int64(rec.GetCardinality()), int64(read.GetCardinality())
	}
	return out, nil
}

// InForce lists the msgids of corps' standing notices in force (sent, not
// recalled, not ended), oldest first.
func (l *StandingLoop) InForce(ctx context.Context, corps []string) ([]string, error) {
	return l.standings(ctx, corps, true)
}

// All lists the msgids of corps' standing notices, in force or ended
// (the list page's filter), oldest first.
func (l *StandingLoop) All(ctx context.Context, corps []string) ([]string, error) {
	return l.standings(ctx, corps, false)
}

func (l *StandingLoop) standings(ctx context.Context, corps []string, inForce bool) ([]string, error) {
	if corps != nil && len(corps) == 0 {
		return nil, nil // nil: every corp (access.Principal.Corps)
	}
	args := []any{l.Now(), !inForce}
	where := ""
	if corps != nil {
		where = " AND s.corp_id IN (?" + strings.Repeat(",?", len(corps)-1) + ")"
		for _, c := range corps {
			args = append(args, c)
		}
	}
	out, err := sqlrows.List(ctx, l.DB, func(rows *sql.Rows, id *string) error { return rows.Scan(id) },
		`SELECT s.msgid FROM standing_notices s JOIN messages m ON m.corp_id = s.corp_id AND m.msgid = s.msgid
		WHERE m.state = 1 AND m.recalled_at IS NULL AND (s.until_at IS NULL OR s.until_at > ? OR ?)`+where+`
		ORDER BY s.created_at, s.msgid LIMIT 1000`, args...)
	if err != nil {
		return nil, fmt.Errorf("campaign: standing notices in force: %w", err)
	}
	return out, nil
}

// End ends corp's msgid's standing at until (nil: now), by p. Whether p
// may is decided once, by the notice service (campaign.Service.EndStanding,
// its only caller), not again here.
func (l *StandingLoop) End(ctx context.Context, p *access.Principal, corp, msgid string, until *time.Time) error {
	return EndStanding(ctx, l.DB, p, corp, msgid, until, l.Now())
}

// orEmpty is b, or an empty bitmap for a key Redis does not hold (no
// read yet).
func orEmpty(b *roaring.Bitmap) *roaring.Bitmap {
	if b == nil {
		return roaring.New()
	}
	return b
}

// IsStanding reports whether corp's msgid is a standing notice.
func (l *StandingLoop) IsStanding(ctx context.Context, corp, msgid string) (bool, error) {
	var one int
	err := l.DB.QueryRowContext(ctx, `SELECT 1 FROM standing_notices WHERE corp_id = ? AND msgid = ?`, corp, msgid).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("campaign: standing notice %s: %w", msgid, err)
	}
	return true, nil
}

// Cycles is m's by_cycle within scope (nil: everyone).
func (l *StandingLoop) Cycles(ctx context.Context, corp, msgid string, scope *roaring.Bitmap) ([]Cycle, error) {
	return l.cycles(ctx, corp, msgid, scope)
}
