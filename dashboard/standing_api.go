package dashboard

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/dashboard/internal/disclose"
)

// utf8BOM and neutralise are the CSV's (disclose's export, yidu.CSVCell).
const utf8BOM = disclose.UTF8BOM

var neutralise = yidu.CSVCell

// Standing is what the dashboard asks of standing notices (issue 51;
// loops.StandingLoop): a notice's standing view within a scope and the
// rules in force (their end is campaign's: Acting.EndStanding).
type Standing interface {
	Info(ctx context.Context, corp, msgid string, scope *roaring.Bitmap) (loops.StandingInfo, error)
	// Report is the rules in force the caller sees, within its View
	// (seer: progress), and the audit row of their disclosure.
	Report(ctx context.Context, who *access.Principal, seer loops.Seer) ([]loops.StandingRule, audit.Event, error)
	All(ctx context.Context, corps []string) ([]string, error)
	IsStanding(ctx context.Context, corp, msgid string) (bool, error)
	Cycles(ctx context.Context, corp, msgid string, scope *roaring.Bitmap) ([]loops.Cycle, error)
}

// byCycle is m's cycles within the caller's View for its progress; nil
// for a notice that is not standing (or when they cannot be read: the
// progress is answered without them, and the error logged).
func (s *Server) byCycle(r *http.Request, m yidu.Message) []loops.Cycle {
	if !s.isStanding(r.Context(), m) {
		return nil
	}
	cs, err := s.standing.Cycles(r.Context(), m.CorpID, m.MsgID, viewFrom(r.Context()).UIDs())
	if err != nil {
		s.log.ErrorContext(r.Context(), "progress: cycles", "msgid", m.MsgID, "err", err)
		return nil
	}
	return cs
}

// isStanding says whether the message page shows m's standing section; an
// error is logged, the page shown without it.
func (s *Server) isStanding(ctx context.Context, m yidu.Message) bool {
	if s.standing == nil {
		return false
	}
	ok, err := s.standing.IsStanding(ctx, m.CorpID, m.MsgID)
	if err != nil {
		s.log.ErrorContext(ctx, "message page: standing", "err", err)
	}
	return ok
}

// handleStanding is GET /messages/{msgid}/standing: 常驻, 新入职待确认 N 人,
// the last 30 days' joiners and by_cycle, within the caller's View.
func (s *Server) handleStanding(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	if s.standing == nil {
		s.fail(w, r, errNotFound)
		return
	}
	info, err := s.standing.Info(r.Context(), m.CorpID, m.MsgID, viewFrom(r.Context()).UIDs())
	if errors.Is(err, loops.ErrNotStanding) {
		s.fail(w, r, errNotFound)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// handleEndStanding is PATCH /messages/{msgid}/standing {"until": time or
// null}: an admin ends a standing notice (null: now); nobody is enrolled
// after it.
func (s *Server) handleEndStanding(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	if s.standing == nil {
		s.fail(w, r, errNotFound)
		return
	}
	var b struct {
		Until *time.Time `json:"until"`
	}
	if err := decodeStrict(http.MaxBytesReader(w, r.Body, 4096), &b); err != nil {
		s.failBody(w, r, err)
		return
	}
	acts, err := s.acts.EndStanding(r.Context(), principalFrom(r.Context()), m, b.Until)
	s.recordActs(r, m.CorpID, m.App, acts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.handleStanding(w, r, m)
}

// handleStandingRules is GET /standing (and /standing.csv): every
// standing rule in force the caller may see, who is current on it (has
// acknowledged it in its current cycle, or read it), by department
// (loops.StandingLoop.Report, over progress).
func (s *Server) handleStandingRules(w http.ResponseWriter, r *http.Request) {
	if s.standing == nil {
		s.fail(w, r, errNotFound)
		return
	}
	out, row, err := s.standing.Report(r.Context(), principalFrom(r.Context()), s.prog)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// Fail closed, as every export: no report leaves without its row.
	if !s.base.Disclose(w, r, row, "standing report") {
		return
	}
	if r.URL.Path == "/api/v1/standing.csv" {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.Header().Set("Content-Disposition", `attachment; filename="standing.csv"`)
		_, _ = w.Write([]byte(utf8BOM))
		cw := csv.NewWriter(w)
		_ = cw.Write([]string{"msgid", "title", "cycle", "department_id", "department", "recipients", "current", "not_current"})
		for _, j := range out {
			_ = cw.Write([]string{j.MsgID, neutralise(j.Title), strconv.Itoa(j.Cycle), "", "全部", strconv.FormatInt(j.Recipients, 10),
				strconv.FormatInt(j.Current, 10), strconv.FormatInt(j.NotCurrent, 10)})
			for _, d := range j.Departments {
				_ = cw.Write([]string{j.MsgID, neutralise(j.Title), strconv.Itoa(j.Cycle), strconv.FormatInt(d.ID, 10), neutralise(d.Name),
					strconv.FormatUint(d.Recipients, 10), strconv.FormatUint(d.Read, 10), strconv.FormatUint(d.Unread, 10)})
			}
		}
		cw.Flush()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"rules": out})
}

// listStanding is the list of messages filtered to standing notices
// (?standing=true): every one the caller sees, oldest first, one page,
// narrowed by ?q= and ?app= as the list is.
func (s *Server) listStanding(ctx context.Context, p *access.Principal, f listFilter) (listJSON, error) {
	out := listJSON{Messages: []messageJSON{}}
	if s.standing == nil {
		return out, nil
	}
	ids, err := s.standing.All(ctx, p.Corps())
	if err != nil {
		return out, err
	}
	for _, id := range ids {
		m, v, err := s.prog.Find(ctx, p, id)
		if errors.Is(err, yidu.ErrNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		if (f.app != "" && m.App != f.app) || (f.title != "" && !strings.Contains(m.Title, f.title)) {
			continue
		}
		c, err := s.prog.Counts(ctx, m, v)
		if err != nil {
			return out, err
		}
		j := toJSON(m)
		j.setCounts(c)
		out.Messages = append(out.Messages, j)
	}
	return out, nil
}
