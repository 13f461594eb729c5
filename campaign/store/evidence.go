package store

import (
	"context"

	"github.com/yidu-io/yidu/ledger"
)

// EvidenceLog appends evidence entries in the transaction of their facts
// (ledger.Ledger): each approval step (notice_approvals) and each manual
// reminder asked for (manual_reminders) is an entry of the corp's log
// (issue 48), so a row forged or edited in MySQL is named by verify.
type EvidenceLog interface {
	Append(ctx context.Context, tx ledger.Tx, corp string, facts []ledger.Fact) (uint64, error)
}

// appendEvidence appends facts with log in tx; nil log appends nothing.
func appendEvidence(ctx context.Context, log EvidenceLog, tx ledger.Tx, corp string, facts []ledger.Fact) error {
	if log == nil || len(facts) == 0 {
		return nil
	}
	_, err := log.Append(ctx, tx, corp, facts)
	return err
}
