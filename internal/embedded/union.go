package embedded

import (
	gmssql "github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"
	"github.com/dolthub/go-mysql-server/sql/types"
)

// unionTimesRule is the analyzer rule id of unionTimes; any id outside
// go-mysql-server's own list does (it is a name for debug output only).
const unionTimesRule analyzer.RuleId = 10_001

// unionTimes makes a UNION of two date-time columns of different
// precision a DATETIME of the larger one, as MariaDB does. go-mysql-server
// v0.20.0 (planbuilder.mergeSetOpSchemas, expression.GetConvertToType)
// converts both sides of any non-numeric pair of unequal types to
// LONGTEXT, so `SELECT reminded_at FROM reminder_log` (DATETIME) UNION ALL
// `SELECT reminded_at FROM manual_reminders` (DATETIME(3)) answered text,
// which the driver hands back as []byte and no time.Time scans
// (TestUnionDatetime; the evidence record's follow-ups, issue 49).
func unionTimes(_ *gmssql.Context, _ *analyzer.Analyzer, n gmssql.Node, _ *plan.Scope, _ analyzer.RuleSelector, _ *gmssql.QueryFlags) (gmssql.Node, transform.TreeIdentity, error) {
	return transform.Node(n, func(n gmssql.Node) (gmssql.Node, transform.TreeIdentity, error) {
		u, ok := n.(*plan.SetOp)
		if !ok {
			return n, transform.SameTree, nil
		}
		l, lok := u.Left().(*plan.Project)
		r, rok := u.Right().(*plan.Project)
		if !lok || !rok || len(l.Projections) != len(r.Projections) {
			return n, transform.SameTree, nil
		}
		lp, rp := append([]gmssql.Expression(nil), l.Projections...), append([]gmssql.Expression(nil), r.Projections...)
		changed := false
		for i := range lp {
			lc, lprec, lok := convertedTime(lp[i])
			rc, rprec, rok := convertedTime(rp[i])
			if !lok || !rok {
				continue
			}
			prec := max(lprec, rprec)
			lp[i] = expression.NewAlias(lp[i].(*expression.Alias).Name(), expression.NewConvertWithLengthAndScale(lc, expression.ConvertToDatetime, prec, 0))
			rp[i] = expression.NewAlias(rp[i].(*expression.Alias).Name(), expression.NewConvertWithLengthAndScale(rc, expression.ConvertToDatetime, prec, 0))
			changed = true
		}
		if !changed {
			return n, transform.SameTree, nil
		}
		nl, err := l.WithExpressions(lp...)
		if err != nil {
			return nil, transform.SameTree, err
		}
		nr, err := r.WithExpressions(rp...)
		if err != nil {
			return nil, transform.SameTree, err
		}
		out, err := u.WithChildren(nl, nr)
		if err != nil {
			return nil, transform.SameTree, err
		}
		return out, transform.NewTree, nil
	})
}

// convertedTime reports whether e is the planner's Alias(Convert(x AS
// CHAR)) of a DATETIME or TIMESTAMP x, and x with its fractional digits.
func convertedTime(e gmssql.Expression) (gmssql.Expression, int, bool) {
	a, ok := e.(*expression.Alias)
	if !ok {
		return nil, 0, false
	}
	c, ok := a.Child.(*expression.Convert)
	if !ok || c.Type() != types.LongText {
		return nil, 0, false
	}
	t := c.Child.Type()
	dt, ok := t.(gmssql.DatetimeType)
	if !ok || !(types.IsDatetimeType(t) || types.IsTimestampType(t)) {
		return nil, 0, false
	}
	return c.Child, dt.Precision(), true
}
