// Package disclose serves the dashboard's routes by which members'
// personal data leaves yidu, and the proofs auditors check it by: a page
// of a notice's recipients (recipients), the CSV export (export.csv),
// each member's evidence record and PDF and the ZIP of a selection
// (evidence), and the evidence log's signed checkpoints and consistency
// proofs (ledger).
//
// Every answer is within the caller's View (handle.ViewFrom, put there by
// the dashboard's gate, which also decided the act), and nobody's data
// leaves without its audit row written first (handle.Base.Disclose: fail
// closed); a streamed download writes a second row saying how it ended.
package disclose

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/dashboard/internal/handle"
	"github.com/yidu-io/yidu/internal/webedge"
	"github.com/yidu-io/yidu/progress"
)

// Selector selects a notice's recipients within a View
// (progress.Progress.Select).
type Selector interface {
	Select(ctx context.Context, m yidu.Message, v access.View, who *access.Principal, q progress.Query) (*progress.Selection, error)
}

// Handlers serve the routes of this package; the dashboard builds them
// with New and mounts them behind its gate.
type Handlers struct {
	*handle.Base
	// Prog selects recipients (the tests swap it, as the dashboard's).
	Prog Selector
	// Evidence makes evidence records (nil: the evidence routes are
	// 404); Ledger is the evidence log (nil: 404).
	Evidence Records
	Ledger   Log
	// apps are the apps by name (an export's time zone).
	apps map[string]yidu.App
	// exportStall: how long one chunk of a download may take to reach
	// its client.
	exportStall time.Duration
	exportRows  prometheus.Counter
}

// New builds the Handlers over base; exportRows counts the CSV rows and
// ZIP members written.
func New(base *handle.Base, prog Selector, evidence Records, ledger Log, apps map[string]yidu.App,
	exportStall time.Duration, exportRows prometheus.Counter) *Handlers {
	return &Handlers{Base: base, Prog: prog, Evidence: evidence, Ledger: ledger, apps: apps,
		exportStall: exportStall, exportRows: exportRows}
}

var (
	writeJSON       = webedge.WriteJSON
	writeError      = webedge.WriteError
	writeFieldError = handle.WriteFieldError
	principalFrom   = webedge.Caller
	viewFrom        = handle.ViewFrom
	event           = handle.Event
	errNotFound     = handle.ErrNotFound
	badParam        = handle.BadParam
)
