package evidence

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
)

// sendDepartments is a notice's send_departments (written by the
// tracker's first send): each department set of its recipients.
type sendDepartments struct {
	corp, msgid string
	at          time.Time
	sets        []deptSet
}

type deptSet struct {
	depts []Department
	uids  *roaring.Bitmap
}

// atSend is a member's departments when the notice was first sent.
type atSend struct {
	at    time.Time
	depts []Department
}

// departmentsAtSend returns uid's departments at msgid's first send, or
// nil when the send kept none (sent before yidu kept them). The rows are
// written once, so the last notice's are kept in memory: a ZIP reads
// them once for all its people.
func (s *Service) departmentsAtSend(ctx context.Context, corp, msgid string, uid uint32) (*atSend, error) {
	sd, err := s.loadDepartments(ctx, corp, msgid)
	if err != nil || sd == nil {
		return nil, err
	}
	for _, set := range sd.sets {
		if set.uids.Contains(uid) {
			return &atSend{at: sd.at, depts: slices.Clone(set.depts)}, nil
		}
	}
	return nil, nil
}

func (s *Service) loadDepartments(ctx context.Context, corp, msgid string) (*sendDepartments, error) {
	s.deptMu.Lock()
	if c := s.deptCache; c != nil && c.corp == corp && c.msgid == msgid {
		s.deptMu.Unlock()
		return c, nil
	}
	s.deptMu.Unlock()
	rows, err := s.db.QueryContext(ctx, `SELECT taken_at, depts, names, uids FROM send_departments
		WHERE corp_id = ? AND msgid = ? ORDER BY set_no`, corp, msgid)
	if err != nil {
		return nil, fmt.Errorf("evidence: departments at send of %s: %w", msgid, err)
	}
	defer rows.Close()
	sd := &sendDepartments{corp: corp, msgid: msgid}
	for rows.Next() {
		var (
			depts, names string
			uids         []byte
		)
		if err := rows.Scan(&sd.at, &depts, &names, &uids); err != nil {
			return nil, fmt.Errorf("evidence: departments at send of %s: %w", msgid, err)
		}
		var byID map[string]string
		if err := json.Unmarshal([]byte(names), &byID); err != nil {
			return nil, fmt.Errorf("evidence: departments at send of %s: names: %w", msgid, err)
		}
		set := deptSet{depts: []Department{}, uids: roaring.New()}
		if err := set.uids.UnmarshalBinary(uids); err != nil {
			return nil, fmt.Errorf("evidence: departments at send of %s: uids: %w", msgid, err)
		}
		for _, f := range strings.Split(depts, ",") {
			if id, err := strconv.ParseInt(f, 10, 64); err == nil {
				set.depts = append(set.depts, Department{ID: id, Name: byID[f]})
			}
		}
		sd.sets = append(sd.sets, set)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("evidence: departments at send of %s: %w", msgid, err)
	}
	if len(sd.sets) == 0 {
		return nil, nil
	}
	sd.at = sd.at.UTC()
	s.deptMu.Lock()
	s.deptCache = sd
	s.deptMu.Unlock()
	return sd, nil
}
