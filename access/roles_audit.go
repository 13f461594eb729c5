package access

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
)

// Role changes. Roles are configuration (dashboard.users[], tokens[],
// roles[]): nobody clicks "grant". So that a change of roles is as
// attributable as a send (issue 31 item 4), each dashboard at start
// compares the grants it was given with the ones the last start saw
// (table role_grants) and records every grant added or removed as one
// role_change audit event; the first start records the grants it finds.
// A lock in MySQL makes one of several replicas starting together do
// it, once.

// Holder is one configured grant: who holds it (a password user, a
// token's name, a WeCom UserID) and the grant. AllCorps is an admin of
// every corp ("*").
type Holder struct {
	Kind     Kind
	Name     string
	AllCorps bool
	Grant    Grant
}

// KindLeaders holds the grant dashboard.leaders_see gives every
// department leader the directory names (LeadersHolder).
const KindLeaders Kind = "leaders"

// LeadersHolder is dashboard.leaders_see as a held grant: a viewer grant
// of every corp held by "department leaders", so that turning it on or
// off is a role_change event like any grant (issue 38).
func LeadersHolder() Holder {
	return Holder{Kind: KindLeaders, Name: "department_leaders", AllCorps: true, Grant: Grant{Role: yidu.RoleViewer}}
}

// key identifies a held grant: its holder, corp, role and scope.
func (h Holder) key() (key, scope string) {
	corp := h.Grant.Scope.Corp
	if h.AllCorps {
		corp = "*"
	}
	apps := slices.Clone(h.Grant.Scope.Apps)
	slices.Sort(apps)
	depts := slices.Clone(h.Grant.Scope.Departments)
	slices.Sort(depts)
	var parts []string
	if len(apps) > 0 {
		parts = append(parts, "apps="+strings.Join(apps, ","))
	}
	if len(depts) > 0 {
		ds := make([]string, len(depts))
		for i, d := range depts {
			ds[i] = strconv.FormatInt(d, 10)
		}
		parts = append(parts, "departments="+strings.Join(ds, ","))
	}
	// A sender's audience (issue 41): absent from the scope of a grant
	// without one, so the keys of grants before it are unchanged.
	for _, f := range []struct {
		name string
		ids  []int64
	}{{"audience.departments", h.Grant.Scope.Audience.Departments}, {"audience.tags", h.Grant.Scope.Audience.Tags}} {
		ids := slices.Clone(f.ids)
		slices.Sort(ids)
		if len(ids) > 0 {
			ss := make([]string, len(ids))
			for i, d := range ids {
				ss[i] = strconv.FormatInt(d, 10)
			}
			parts = append(parts, f.name+"="+strings.Join(ss, ","))
		}
	}
	scope = strings.Join(parts, " ")
	sum := sha256.Sum256([]byte(strings.Join([]string{string(h.Kind), h.Name, corp, string(h.role()), scope}, "\x00")))
	return hex.EncodeToString(sum[:]), scope
}

func (h Holder) role() yidu.Role { return cmp.Or(h.Grant.Role, yidu.RoleAdmin) }

func (h Holder) corp() string {
	if h.AllCorps {
		return "*"
	}
	return h.Grant.Scope.Corp
}

// roleLockTimeout bounds the wait for another replica's comparison.
const roleLockTimeout = 10 // seconds

// RecordRoleChanges compares holders with role_grants, records one
// role_change event (actor "yidu.yaml", kind "config") per grant added
// (detail "grant …") or removed ("revoke …"), and stores holders as the
// grants now in force. It returns how many it recorded.
func RecordRoleChanges(ctx context.Context, db *sql.DB, rec audit.Recorder, holders []Holder, now time.Time) (int, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("access: role changes: %w", err)
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK('yidu_role_grants', ?)", roleLockTimeout).Scan(&got); err != nil {
		return 0, fmt.Errorf("access: role changes: lock: %w", err)
	}
	if !got.Valid || got.Int64 != 1 {
		return 0, fmt.Errorf("access: role changes: another dashboard holds the lock")
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK('yidu_role_grants')") //nolint:errcheck // the session's end releases it too

	type row struct{ kind, holder, corp, role, scope string }
	old := map[string]row{}
	rows, err := conn.QueryContext(ctx, "SELECT grant_key, holder_kind, holder, corp_id, role, scope FROM role_grants")
	if err != nil {
		return 0, fmt.Errorf("access: role changes: read: %w", err)
	}
	for rows.Next() {
		var k string
		var r row
		if err := rows.Scan(&k, &r.kind, &r.holder, &r.corp, &r.role, &r.scope); err != nil {
			rows.Close()
			return 0, fmt.Errorf("access: role changes: read: %w", err)
		}
		old[k] = r
	}
	if err := rows.Close(); err != nil {
		return 0, fmt.Errorf("access: role changes: read: %w", err)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("access: role changes: read: %w", err)
	}

	type change struct {
		key    string
		r      row
		action string
	}
	var changes []change
	seen := map[string]bool{}
	for _, h := range holders {
		k, scope := h.key()
		if seen[k] {
			continue
		}
		seen[k] = true
		if _, ok := old[k]; !ok {
			changes = append(changes, change{k, row{string(h.Kind), h.Name, h.corp(), string(h.role()), scope}, "grant"})
		}
	}
	for k, r := range old {
		if !seen[k] {
			changes = append(changes, change{k, r, "revoke"})
		}
	}
	// Stable order: revocations after grants, each by holder.
	slices.SortFunc(changes, func(a, b change) int {
		return cmp.Or(cmp.Compare(a.action, b.action), cmp.Compare(a.r.kind+a.r.holder+a.r.corp+a.r.role+a.r.scope, b.r.kind+b.r.holder+b.r.corp+b.r.role+b.r.scope))
	})
	for _, c := range changes {
		detail := fmt.Sprintf("%s %s %s of %s to %s %s", c.action, c.r.role, strings.TrimSpace(c.r.scope), c.r.corp, c.r.kind, c.r.holder)
		detail = strings.Join(strings.Fields(detail), " ")
		corp := c.r.corp
		if corp == "*" {
			corp = ""
		}
		if err := rec.Record(ctx, audit.Event{At: now, Actor: "yidu.yaml", ActorKind: "config", Role: c.r.role, Action: yidu.ActionRoleChange,
			CorpID: corp, People: 1, Outcome: "ok", Detail: detail}); err != nil {
			return 0, fmt.Errorf("access: role changes: %w", err)
		}
		var err error
		if c.action == "grant" {
			_, err = conn.ExecContext(ctx, `INSERT INTO role_grants (grant_key, holder_kind, holder, corp_id, role, scope, since) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				c.key, c.r.kind, c.r.holder, c.r.corp, c.r.role, c.r.scope, now.UTC())
		} else {
			_, err = conn.ExecContext(ctx, "DELETE FROM role_grants WHERE grant_key = ?", c.key)
		}
		if err != nil {
			return 0, fmt.Errorf("access: role changes: store: %w", err)
		}
	}
	return len(changes), nil
}
