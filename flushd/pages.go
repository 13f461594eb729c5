package flushd

import (
	"context"
	"fmt"
	"time"

	"github.com/yidu-io/yidu"
)

// PageSignal is one reading-page signal flushd kept (page_signals): the
// signal on a version, its first time, IP and User-Agent.
type PageSignal struct {
	Signal    yidu.Signal
	Version   int
	At        time.Time
	ClientIP  string
	UserAgent string
}

// PageSignals reads member uid's reading-page signals of message msgID,
// oldest first (a member's evidence record, issue 40).
func PageSignals(ctx context.Context, db DB, corpID, msgID string, uid uint32) ([]PageSignal, error) {
	rows, err := db.QueryContext(ctx, `SELECT source, version, seen_at, ip, user_agent FROM page_signals
		WHERE corp_id = ? AND msgid = ? AND uid = ? ORDER BY seen_at, version, source`, corpID, msgID, uid)
	if err != nil {
		return nil, fmt.Errorf("flushd: page signals of %s: %w", msgID, err)
	}
	defer rows.Close()
	var out []PageSignal
	for rows.Next() {
		var (
			source uint8
			e      PageSignal
		)
		if err := rows.Scan(&source, &e.Version, &e.At, &e.ClientIP, &e.UserAgent); err != nil {
			return nil, fmt.Errorf("flushd: page signals of %s: %w", msgID, err)
		}
		e.Signal, e.At = yidu.Signal(source), e.At.UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("flushd: page signals of %s: %w", msgID, err)
	}
	return out, nil
}

// HasPageSignal reports whether flushd kept member uid's signal sig on
// version of message msgID (page_signals).
func HasPageSignal(ctx context.Context, db DB, corpID, msgID string, uid uint32, sig yidu.Signal, version int) (bool, error) {
	rows, err := db.QueryContext(ctx, "SELECT 1 FROM page_signals WHERE corp_id = ? AND msgid = ? AND uid = ? AND source = ? AND version = ?",
		corpID, msgID, uid, int(sig), version)
	if err != nil {
		return false, fmt.Errorf("flushd: page signal of %s: %w", msgID, err)
	}
	defer rows.Close()
	found := rows.Next()
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("flushd: page signal of %s: %w", msgID, err)
	}
	return found, nil
}

// CountingPageSignals calls each with every member who gave message
// msgID's reading page read_to_end (of any version) or acknowledged (of
// the current material version or later: yidu.ReadRule.Acknowledging;
// those of earlier versions are kept in page_signals, not counted), once
// per member and signal.
func CountingPageSignals(ctx context.Context, db DB, corpID, msgID string, each func(uid uint32, sig yidu.Signal)) error {
	rows, err := db.QueryContext(ctx, "SELECT DISTINCT uid, source FROM page_signals WHERE corp_id = ? AND msgid = ?"+
		" AND (source = ? OR source = ? AND version >= (SELECT COALESCE(MAX(version), 1) FROM notice_versions"+
		" WHERE corp_id = ? AND msgid = ? AND reacknowledge = 1))",
		corpID, msgID, int(yidu.SignalReadToEnd), int(yidu.SignalAcknowledged), corpID, msgID)
	if err != nil {
		return fmt.Errorf("flushd: page signals of %s: %w", msgID, err)
	}
	defer rows.Close()
	var uid uint32
	var src uint8
	for rows.Next() {
		if err := rows.Scan(&uid, &src); err != nil {
			return fmt.Errorf("flushd: page signals of %s: %w", msgID, err)
		}
		each(uid, yidu.Signal(src))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("flushd: page signals of %s: %w", msgID, err)
	}
	return nil
}
