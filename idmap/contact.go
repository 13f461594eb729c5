package idmap

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrInvalidChange: a change_contact callback that can never be applied
// (bad ids, too many or negative departments). Retrying it cannot help.
var ErrInvalidChange = errors.New("idmap: invalid contact change")

// Change types of a change_contact callback whose ChangeType concerns members
// (shared/wecom-protocol.md, change_contact); the party and tag types are ignored here.
const (
	ChangeCreateUser = "create_user"
	ChangeUpdateUser = "update_user"
	ChangeDeleteUser = "delete_user"
)

// maxDepartmentsLen is the size of users.departments (VARCHAR(1024)).
const maxDepartmentsLen = 1024

// ContactChanged applies a change_contact callback: create_user assigns a
// uid (status active), update_user with newUserID renames keeping the uid,
// delete_user sets status 2 (left) and keeps the uid forever. UserIDs are
// matched case-insensitively (yidu.UserID.Fold), and a UserID that breaks
// WeCom's rule is stored flagged (users.bad_userid). departments
// replaces the member's departments when not nil (since 2022-08-15 callbacks
// carry only UserID and Department, shared/wecom-protocol.md). Applying a
// change twice is harmless. Other change types are ignored (nil error).
func (m *Mapper) ContactChanged(ctx context.Context, corpID, changeType, userID, newUserID string, departments []int64) error {
	if err := m.contactChanged(ctx, corpID, changeType, userID, newUserID, departments); err != nil {
		return err
	}
	if changeType != ChangeCreateUser && changeType != ChangeUpdateUser && changeType != ChangeDeleteUser {
		return nil
	}
	// The directory moved: in-memory indexes (Index) rebuild.
	m.metrics.query(opSync)
	if err := bumpVersion(ctx, m.db, corpID); err != nil {
		return err
	}
	m.dropIndex(corpID)
	return nil
}

func (m *Mapper) contactChanged(ctx context.Context, corpID, changeType, userID, newUserID string, departments []int64) error {
	if changeType != ChangeCreateUser && changeType != ChangeUpdateUser && changeType != ChangeDeleteUser {
		m.metrics.contact.WithLabelValues("ignored").Inc()
		return nil
	}
	if checkCorpID(corpID) != nil || checkUserID(userID) != nil ||
		(newUserID != "" && checkUserID(newUserID) != nil) {
		return fmt.Errorf("%w: bad corp or user id", ErrInvalidChange)
	}
	depts, err := FormatDepartments(departments)
	if err != nil {
		return err
	}
	switch {
	case changeType == ChangeDeleteUser:
		return m.deleteUser(ctx, corpID, userID)
	// A new UserID that differs only in case is the same member to WeCom:
	// a plain update.
	case changeType == ChangeUpdateUser && newUserID != "" && fold(newUserID) != fold(userID):
		uid, err := m.rename(ctx, corpID, userID, newUserID)
		if err != nil {
			return err
		}
		if departments != nil {
			return m.setDepartments(ctx, corpID, uid, departments, depts, false)
		}
		return nil
	}
	ids, err := m.Assign(ctx, corpID, []string{userID})
	if err != nil {
		return fmt.Errorf("idmap: contact %s: %w", changeType, err)
	}
	uid := ids[userID]
	activate := changeType == ChangeCreateUser
	if departments != nil || activate {
		if err := m.setDepartments(ctx, corpID, uid, departments, depts, activate); err != nil {
			return err
		}
	}
	if activate {
		m.metrics.contact.WithLabelValues("created").Inc()
	} else {
		m.metrics.contact.WithLabelValues("updated").Inc()
	}
	return nil
}

// setDepartments writes users.departments and replaces the member's
// user_departments rows in one transaction; departments nil leaves both.
func (m *Mapper) setDepartments(ctx context.Context, corpID string, uid uint32, departments []int64, depts string, activate bool) error {
	return m.inTx(ctx, opContact, func(tx *sql.Tx) error {
		if activate {
			m.metrics.query(opContact)
			if _, err := tx.ExecContext(ctx, "UPDATE users SET status = 1 WHERE corp_id = ? AND uid = ?", corpID, uid); err != nil {
				return fmt.Errorf("idmap: contact: activate: %w", err)
			}
		}
		if departments != nil {
			m.metrics.query(opContact)
			if _, err := tx.ExecContext(ctx, "UPDATE users SET departments = ? WHERE corp_id = ? AND uid = ?", depts, corpID, uid); err != nil {
				return fmt.Errorf("idmap: contact: departments: %w", err)
			}
			if err := m.replaceMemberships(ctx, tx, corpID, uid, departments); err != nil {
				return err
			}
		}
		return nil
	})
}

func (m *Mapper) replaceMemberships(ctx context.Context, tx *sql.Tx, corpID string, uid uint32, departments []int64) error {
	m.metrics.query(opContact)
	if _, err := tx.ExecContext(ctx, "DELETE FROM user_departments WHERE corp_id = ? AND uid = ?", corpID, uid); err != nil {
		return fmt.Errorf("idmap: contact: clear memberships: %w", err)
	}
	if len(departments) == 0 {
		return nil
	}
	args := make([]any, 0, 3*len(departments))
	for _, d := range departments {
		args = append(args, corpID, d, uid)
	}
	m.metrics.query(opContact)
	if _, err := tx.ExecContext(ctx,
		"INSERT IGNORE INTO user_departments (corp_id, dept_id, uid) VALUES "+rowMarks("(?,?,?)", len(departments)), args...); err != nil {
		return fmt.Errorf("idmap: contact: memberships: %w", err)
	}
	return nil
}

// deleteUser marks a member as left. An unknown member is not created: there
// is nothing to keep for them.
func (m *Mapper) deleteUser(ctx context.Context, corpID, userID string) error {
	var uid uint32
	left := false
	err := m.inTx(ctx, opContact, func(tx *sql.Tx) error {
		m.metrics.query(opContact)
		left = false
		err := tx.QueryRowContext(ctx,
			"SELECT uid FROM users WHERE corp_id = ? AND userid_key = ? ORDER BY uid LIMIT 1 FOR UPDATE", corpID, fold(userID)).Scan(&uid)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		left = true
		return m.leave(ctx, tx, corpID, uid)
	})
	if err != nil {
		return fmt.Errorf("idmap: contact delete_user: %w", err)
	}
	if left {
		m.revoke(ctx, corpID, []uint32{uid})
	}
	m.metrics.contact.WithLabelValues("deleted").Inc()
	return nil
}

// leave sets status 2 and drops the member from every department, so
// audiences expanded later no longer include them; the uid stays theirs.
func (m *Mapper) leave(ctx context.Context, tx *sql.Tx, corpID string, uid uint32) error {
	m.metrics.query(opContact)
	if _, err := tx.ExecContext(ctx, "UPDATE users SET status = 2 WHERE corp_id = ? AND uid = ?", corpID, uid); err != nil {
		return err
	}
	m.metrics.query(opContact)
	_, err := tx.ExecContext(ctx, "DELETE FROM user_departments WHERE corp_id = ? AND uid = ?", corpID, uid)
	return err
}

// rename moves userID's uid to newUserID under the uid_seq lock (the lock
// every UserID writer takes, so no instance can create newUserID meanwhile).
// Outcomes by what exists:
//   - old only: users.userid is updated, the uid is kept.
//   - new only: already applied; nothing to do.
//   - neither (we missed the create): newUserID gets a fresh uid.
//   - both (newUserID got its own uid first, e.g. a read arrived before the
//     callback): uids cannot be merged, so newUserID keeps its uid and the
//     old uid is marked left; counted as rename_conflict.
//
// Other instances may keep the old UserID cached until they restart; WeCom
// no longer sends it, so only a later re-use of the old UserID would be
// mis-mapped there.
func (m *Mapper) rename(ctx context.Context, corpID, oldID, newID string) (uint32, error) {
	c := m.corp(corpID)
	if err := m.ensureSeq(ctx, corpID, c); err != nil {
		return 0, err
	}
	var uid uint32
	var result string
	err := m.inTx(ctx, opContact, func(tx *sql.Tx) error {
		next, err := m.lockSeq(ctx, tx, corpID, opContact)
		if err != nil {
			return err
		}
		found, err := m.readUIDs(ctx, tx, corpID, []string{oldID, newID}, true)
		if err != nil {
			return err
		}
		oldUID, hasOld := found[fold(oldID)]
		newUID, hasNew := found[fold(newID)]
		switch {
		case hasOld && !hasNew:
			uid, result = oldUID, "renamed"
			m.metrics.query(opContact)
			if _, err := tx.ExecContext(ctx, "UPDATE users SET userid = ?, bad_userid = ? WHERE corp_id = ? AND uid = ?",
				newID, badFlag(newID), corpID, oldUID); err != nil {
				return err
			}
		case hasNew && !hasOld:
			uid, result = newUID, "updated"
		case !hasNew && !hasOld:
			uid, result = next, "created"
			m.metrics.assigned.Inc()
			m.metrics.query(opContact)
			if _, err := tx.ExecContext(ctx, "INSERT INTO users (corp_id, uid, userid, bad_userid, status) VALUES (?, ?, ?, ?, 1)",
				corpID, next, newID, badFlag(newID)); err != nil {
				return err
			}
			m.metrics.query(opContact)
			if _, err := tx.ExecContext(ctx, "UPDATE uid_seq SET next_uid = ? WHERE corp_id = ?", next+1, corpID); err != nil {
				return err
			}
		default:
			uid, result = newUID, "rename_conflict"
			if err := m.leave(ctx, tx, corpID, oldUID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("idmap: contact rename: %w", err)
	}
	m.forget(c, fold(oldID))
	m.store(c, fold(newID), uid)
	m.metrics.contact.WithLabelValues(result).Inc()
	if result == "rename_conflict" {
		m.log.Warn("rename target already had a uid; old uid marked left", "corp", corpID)
	}
	return uid, nil
}

// ParseDepartments parses a change_contact Department field ("1,2,3"),
// see shared/wecom-protocol.md, or users.departments. Empty input is no departments;
// duplicates are dropped; ids must be non-negative integers.
func ParseDepartments(s string) ([]int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return []int64{}, nil
	}
	if len(s) > maxDepartmentsLen {
		return nil, fmt.Errorf("%w: department list longer than %d bytes", ErrInvalidChange, maxDepartmentsLen)
	}
	parts := strings.Split(s, ",")
	out := make([]int64, 0, len(parts))
	seen := make(map[int64]struct{}, len(parts))
	for _, p := range parts {
		p = strings.TrimSpace(p)
		d, err := strconv.ParseInt(p, 10, 64)
		if err != nil || p[0] < '0' || p[0] > '9' {
			return nil, fmt.Errorf("%w: department %q", ErrInvalidChange, p)
		}
		if _, dup := seen[d]; dup {
			continue
		}
		seen[d] = struct{}{}
		out = append(out, d)
	}
	return out, nil
}

// FormatDepartments is the users.departments form of ids: "1,2,3" in the
// given order. It rejects negative ids and lists that do not fit the column.
func FormatDepartments(ids []int64) (string, error) {
	var b strings.Builder
	for i, d := range ids {
		if d < 0 {
			return "", fmt.Errorf("%w: negative department %d", ErrInvalidChange, d)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(d, 10))
	}
	if b.Len() > maxDepartmentsLen {
		return "", fmt.Errorf("%w: %d departments do not fit", ErrInvalidChange, len(ids))
	}
	return b.String(), nil
}
