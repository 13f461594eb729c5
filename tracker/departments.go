package tracker

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/go-sql-driver/mysql"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/sqlrows"
)

// deptSetsPerInsert bounds one INSERT of send_departments rows (each a
// bitmap of a few bytes to a few KB).
const deptSetsPerInsert = 200

// snapshotDepartments keeps, once per notice, each recipient's
// departments as the directory holds them now, the moment before the
// first batch leaves (issue 40: an evidence record gives the departments
// at send time, not today's). The recipients are grouped by department
// set: one send_departments row per distinct set, with its departments'
// names and a roaring bitmap of its uids, all in one transaction. A
// resumed send finds the rows and keeps them; of two replicas sending at
// once, the second's INSERT hits the first's key and is dropped.
func (r *Registry) snapshotDepartments(ctx context.Context, m yidu.Message) error {
	var one int
	err := r.db.QueryRowContext(ctx, "SELECT 1 FROM send_departments WHERE corp_id = ? AND msgid = ? LIMIT 1", m.CorpID, m.MsgID).Scan(&one)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("tracker: departments at send of %s: %w", m.MsgID, err)
	}
	sets, err := r.departmentSets(ctx, m)
	if err != nil {
		return err
	}
	if len(sets) == 0 {
		return nil
	}
	names, err := r.departmentNames(ctx, m.CorpID)
	if err != nil {
		return err
	}
	keys := slices.Sorted(maps.Keys(sets))
	at := r.now().UTC().Truncate(time.Millisecond)
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("tracker: departments at send of %s: %w", m.MsgID, err)
	}
	defer tx.Rollback()
	for start := 0; start < len(keys); start += deptSetsPerInsert {
		chunk := keys[start:min(start+deptSetsPerInsert, len(keys))]
		args := make([]any, 0, 7*len(chunk))
		for i, k := range chunk {
			set := map[string]string{}
			for _, id := range strings.Split(k, ",") {
				if id != "" {
					set[id] = names[id]
				}
			}
			nb, err := json.Marshal(set)
			if err != nil {
				return fmt.Errorf("tracker: departments at send of %s: %w", m.MsgID, err)
			}
			ub, err := sets[k].ToBytes()
			if err != nil {
				return fmt.Errorf("tracker: departments at send of %s: %w", m.MsgID, err)
			}
			args = append(args, m.CorpID, m.MsgID, start+i, at, k, string(nb), ub)
		}
		q := "INSERT INTO send_departments (corp_id, msgid, set_no, taken_at, depts, names, uids) VALUES " +
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?),", len(chunk)), ",")
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			var me *mysql.MySQLError
			if errors.As(err, &me) && me.Number == 1062 {
				return nil // another replica's send took it first
			}
			return fmt.Errorf("tracker: departments at send of %s: %w", m.MsgID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("tracker: departments at send of %s: %w", m.MsgID, err)
	}
	return nil
}

// departmentSets groups m's recipients by their departments now
// (users.departments, normalised: ids sorted, each once).
func (r *Registry) departmentSets(ctx context.Context, m yidu.Message) (map[string]*roaring.Bitmap, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT r.uid, u.departments FROM message_read_record r
		JOIN users u ON u.corp_id = r.corp_id AND u.uid = r.uid WHERE r.corp_id = ? AND r.msgid = ?`, m.CorpID, m.MsgID)
	if err != nil {
		return nil, fmt.Errorf("tracker: departments at send of %s: %w", m.MsgID, err)
	}
	defer rows.Close()
	sets := map[string]*roaring.Bitmap{}
	canon := map[string]string{} // users.departments → its set's key
	var depts string
	var uid uint32
	for rows.Next() {
		if err := rows.Scan(&uid, &depts); err != nil {
			return nil, fmt.Errorf("tracker: departments at send of %s: %w", m.MsgID, err)
		}
		k, ok := canon[depts]
		if !ok {
			k = departmentKey(depts)
			canon[depts] = k
		}
		b := sets[k]
		if b == nil {
			b = roaring.New()
			sets[k] = b
		}
		b.Add(uid)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tracker: departments at send of %s: %w", m.MsgID, err)
	}
	for _, b := range sets {
		b.RunOptimize()
	}
	return sets, nil
}

// departmentKey is a users.departments list with its ids sorted
// numerically and each once ("" for none).
func departmentKey(depts string) string {
	var ids []int64
	for _, f := range strings.Split(depts, ",") {
		if id, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ",")
}

// departmentNames are corp's department names now, by id, read through
// idmap (which owns departments).
func (r *Registry) departmentNames(ctx context.Context, corpID string) (map[string]string, error) {
	names, err := idmap.DepartmentNames(ctx, r.db, corpID)
	if err != nil {
		return nil, fmt.Errorf("tracker: department names: %w", err)
	}
	out := make(map[string]string, len(names))
	for id, name := range names {
		out[strconv.FormatInt(id, 10)] = name
	}
	return out, nil
}

// bindingsAtSend are the names the directory gives uids now and their
// departments in the notice's send_departments (taken before its first
// batch), for the batch's send entries (issue 48: the recipient binding
// at send, which verify compares). A uid without a users row has no
// name; one outside every set, no departments.
func (r *Registry) bindingsAtSend(ctx context.Context, q interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}, m yidu.Message, uids []uint32) (map[uint32]string, map[uint32][]string, error) {
	args := make([]any, 0, len(uids)+1)
	args = append(args, m.CorpID)
	for _, u := range uids {
		if u != noUID {
			args = append(args, u)
		}
	}
	if len(args) == 1 {
		return map[uint32]string{}, nil, nil
	}
	names, err := sqlrows.Map[uint32, string](ctx, q, "SELECT uid, name FROM users WHERE corp_id = ? AND uid IN (?"+strings.Repeat(",?", len(args)-2)+")", args...)
	if err != nil {
		return nil, nil, fmt.Errorf("tracker: names at send of %s: %w", m.MsgID, err)
	}
	rows, err := q.QueryContext(ctx, "SELECT depts, uids FROM send_departments WHERE corp_id = ? AND msgid = ?", m.CorpID, m.MsgID)
	if err != nil {
		return nil, nil, fmt.Errorf("tracker: departments at send of %s: %w", m.MsgID, err)
	}
	defer rows.Close()
	depts := map[uint32][]string{}
	for rows.Next() {
		var key string
		var ub []byte
		if err := rows.Scan(&key, &ub); err != nil {
			return nil, nil, fmt.Errorf("tracker: departments at send of %s: %w", m.MsgID, err)
		}
		set := roaring.New()
		if err := set.UnmarshalBinary(ub); err != nil {
			return nil, nil, fmt.Errorf("tracker: departments at send of %s: %w", m.MsgID, err)
		}
		ids := []string{}
		if key != "" {
			ids = strings.Split(key, ",")
		}
		for _, u := range uids {
			if u != noUID && set.Contains(u) {
				depts[u] = ids
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("tracker: departments at send of %s: %w", m.MsgID, err)
	}
	return names, depts, nil
}
