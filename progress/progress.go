// Package progress answers "how far is this notice, for this viewer": a
// notice's counts (each signal's too), its recipients and readers as
// bitmaps, its reads per minute and the ETAs (Report), the department
// breakdown (Departments), recipient pages and export rows (Select),
// and for campaign who is unread and their UserIDs, all within an
// access.View. It reads the live bitmaps and, when Redis lost a notice's
// keys, puts them back from MySQL once (restore-on-miss, written here
// once for every answer), so the HTTP edge only translates.
package progress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"golang.org/x/sync/singleflight"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/internal/opt"
)

// ErrUnavailable: a notice's keys are still missing from Redis after a
// restore (Redis is losing them as fast as they are written): try later.
var ErrUnavailable = errors.New("temporarily unavailable")

// Bitmaps is what progress reads of the live bitmaps (bitmap.Store).
type Bitmaps interface {
	CountsBySignal(ctx context.Context, corpID, msgID string) (recipients, read int64, bySignal yidu.SignalCounts, found bool, err error)
	CountsWithin(ctx context.Context, corpID, msgID string, scope *roaring.Bitmap) (recipients, read int64, bySignal yidu.SignalCounts, found bool, err error)
	ReadBitmap(ctx context.Context, corpID, msgID string) (*roaring.Bitmap, bool, error)
	RecipientBitmap(ctx context.Context, corpID, msgID string) (*roaring.Bitmap, bool, error)
	RestoreReads(ctx context.Context, m yidu.Message, recipients, read *roaring.Bitmap, signals map[yidu.Signal]*roaring.Bitmap) error
}

// Archive is what progress reads of MySQL (tracker.Registry): a
// notice's rows as bitmaps, to restore them, and its readers' times.
type Archive interface {
	LoadReads(ctx context.Context, corpID, msgID string) (m yidu.Message, recipients, read *roaring.Bitmap, signals map[yidu.Signal]*roaring.Bitmap, found bool, err error)
	ReadTimes(ctx context.Context, corpID, msgID string, uids []uint32) (map[uint32]time.Time, error)
}

// History is what progress reads of the flushed reads beyond Archive
// (tracker.Registry): the whole notice's curve and each reader's first
// signal.
type History interface {
	ReadsPerMinute(ctx context.Context, corpID, msgID string) ([]yidu.MinuteCount, error)
	FirstReads(ctx context.Context, corpID, msgID string, uids []uint32) (map[uint32]yidu.FirstRead, error)
}

// Directory is what progress reads of the synced directory
// (idmap.Mapper): the department tree and who the uids are.
type Directory interface {
	// UserIDs maps uids to UserIDs (uids without a user are left out).
	UserIDs(ctx context.Context, corpID string, uids []uint32) (map[uint32]string, error)
	Departments(ctx context.Context, corpID string) ([]yidu.Department, error)
	// DepartmentMemberSets returns each department's active direct members.
	DepartmentMemberSets(ctx context.Context, corpID string) (map[int64]*roaring.Bitmap, error)
}

// UserDirectory is implemented by a Directory that also knows names,
// departments and status (idmap.Mapper.Users). Without it recipients
// show UserIDs only and their departments come from the member sets.
type UserDirectory interface {
	Users(ctx context.Context, corpID string, uids []uint32) (map[uint32]yidu.User, error)
}

// Options configures a Progress.
type Options struct {
	// Logger receives the restores (nil: discarded).
	Logger *slog.Logger
	// Directory gives departments and people (nil: departments,
	// recipients and export answer nothing).
	Directory Directory
	// History gives curves and first reads (nil: empty curves).
	History History
	// Viewer says whom a principal sees (nil: an admin of the corp
	// sees everyone, anyone else nobody).
	Viewer Viewer
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Progress reads notices' numbers. Safe for concurrent use.
type Progress struct {
	archive   Archive
	bms       Bitmaps
	dir       Directory
	history   History
	viewer    Viewer
	now       func() time.Time
	log       *slog.Logger
	restoring singleflight.Group
	// depts keeps each corp's department tree (1 min, stale while
	// rebuilt); curves and scopedCurves the curves (5 s).
	depts                *cache[*deptTree]
	curves, scopedCurves *cache[[]yidu.MinuteCount]
}

// New returns a Progress over the archive and the live bitmaps.
func New(archive Archive, bms Bitmaps, opts Options) (*Progress, error) {
	if archive == nil || bms == nil {
		return nil, errors.New("progress: archive and bitmaps are required")
	}
	opt.Logger(&opts.Logger)
	opt.Clock(&opts.Now)
	p := &Progress{archive: archive, bms: bms, dir: opts.Directory, history: opts.History, viewer: opts.Viewer, now: opts.Now,
		log: opts.Logger.With("component", "progress")}
	p.depts = newDeptCache(opts.Directory, opts.Now, time.Minute)
	p.newCurveCaches(5 * time.Second)
	return p, nil
}

// Counts are a notice's numbers within a View.
type Counts struct {
	Recipients, Read int64
	BySignal         yidu.SignalCounts
}

// Frozen returns c with a recalled message's recipients and read as they
// were at its recall (the signals stay live).
func Frozen(m yidu.Message, c Counts) Counts {
	if m.Recalled() {
		c.Recipients, c.Read = m.Recipients, m.ReadAtRecall
	}
	return c
}

// Live returns m's counts from the live bitmaps only: BITCOUNT for
// everyone, the View's intersections otherwise (found=false: the keys
// are gone; nothing is restored, for a list of many notices).
func (p *Progress) Live(ctx context.Context, m yidu.Message, v access.View) (Counts, bool, error) {
	var rec, read int64
	var by yidu.SignalCounts
	var found bool
	var err error
	if v.All() {
		rec, read, by, found, err = p.bms.CountsBySignal(ctx, m.CorpID, m.MsgID)
	} else {
		rec, read, by, found, err = p.bms.CountsWithin(ctx, m.CorpID, m.MsgID, v.UIDs())
	}
	if err != nil {
		return Counts{}, false, fmt.Errorf("progress: counts of %s: %w", m.MsgID, err)
	}
	return Counts{Recipients: rec, Read: read, BySignal: by}, found, nil
}

// Counts returns m's counts within v, restoring the keys from MySQL once
// if Redis lost them: for everyone BITCOUNT of the live bitmaps, a
// recalled message's recipients and read frozen at its recall;
// |recipients ∩ v|, |read ∩ recipients ∩ v| and each signal's
// |signal ∩ recipients ∩ v| otherwise, in one round trip without decoding
// the notice's bitmaps.
func (p *Progress) Counts(ctx context.Context, m yidu.Message, v access.View) (Counts, error) {
	var c Counts
	err := p.onMiss(ctx, m, func() (found bool, err error) {
		c, found, err = p.Live(ctx, m, v)
		return found, err
	})
	if err != nil {
		return Counts{}, err
	}
	if v.All() {
		c = Frozen(m, c)
	}
	return c, nil
}

// Bitmaps returns m's recipients within v and those of them who read
// (read ∩ recipients ∩ v, so a stray bit never counts), restoring the
// keys once if Redis lost them.
func (p *Progress) Bitmaps(ctx context.Context, m yidu.Message, v access.View) (rec, readRec *roaring.Bitmap, err error) {
	err = p.onMiss(ctx, m, func() (bool, error) {
		r, found, err := p.bms.RecipientBitmap(ctx, m.CorpID, m.MsgID)
		if err != nil || !found {
			if err != nil {
				err = fmt.Errorf("progress: recipient bitmap: %w", err)
			}
			return false, err
		}
		read, _, err := p.bms.ReadBitmap(ctx, m.CorpID, m.MsgID)
		if err != nil {
			return false, fmt.Errorf("progress: read bitmap: %w", err)
		}
		if read == nil { // nobody has read yet: the key may not exist
			read = roaring.New()
		}
		rec = v.Restrict(r)
		readRec = roaring.And(read, rec)
		return true, nil
	})
	return rec, readRec, err
}

// Curve returns m's reads per minute within v from its readers' read
// times (MySQL): the curve of a scoped viewer, whose people's reads the
// whole notice's per-minute counts cannot split.
func (p *Progress) Curve(ctx context.Context, m yidu.Message, v access.View) ([]yidu.MinuteCount, error) {
	_, readRec, err := p.Bitmaps(ctx, m, v)
	if err != nil {
		return nil, err
	}
	times, err := p.archive.ReadTimes(ctx, m.CorpID, m.MsgID, readRec.ToArray())
	if err != nil {
		return nil, fmt.Errorf("progress: read times: %w", err)
	}
	per := map[int64]int64{}
	for _, t := range times {
		per[t.Truncate(time.Minute).Unix()]++
	}
	keys := slices.Sorted(maps.Keys(per))
	out := make([]yidu.MinuteCount, 0, len(keys))
	for _, k := range keys {
		out = append(out, yidu.MinuteCount{Minute: time.Unix(k, 0).UTC(), Reads: per[k]})
	}
	return out, nil
}

// onMiss runs read; when it finds m's keys gone it restores them from
// MySQL and runs it once more. The one restore-on-miss of every answer.
func (p *Progress) onMiss(ctx context.Context, m yidu.Message, read func() (found bool, err error)) error {
	for attempt := 0; ; attempt++ {
		found, err := read()
		if err != nil {
			return err
		}
		if found {
			return nil
		}
		if attempt == 1 {
			return fmt.Errorf("progress: keys of %s still missing after restore: %w", m.MsgID, ErrUnavailable)
		}
		if err := p.Restore(ctx, m); err != nil {
			return err
		}
	}
}

// Restore rebuilds m's Redis keys from MySQL (recipients, readers, each
// signal's members); concurrent callers for one notice share one
// rebuild, which outlives a caller that gives up. yidu.ErrNotFound: MySQL
// has no such active notice.
func (p *Progress) Restore(ctx context.Context, m yidu.Message) error {
	key := m.CorpID + "\x00" + m.MsgID
	_, err, _ := p.restoring.Do(key, func() (any, error) {
		ctx := context.WithoutCancel(ctx)
		lm, rec, read, signals, ok, err := p.archive.LoadReads(ctx, m.CorpID, m.MsgID)
		if err != nil {
			return nil, fmt.Errorf("progress: load %s: %w", m.MsgID, err)
		}
		if !ok {
			return nil, fmt.Errorf("%w: %s", yidu.ErrNotFound, m.MsgID)
		}
		if read == nil {
			read = roaring.New()
		}
		if err := p.bms.RestoreReads(ctx, lm, rec, read, signals); err != nil {
			return nil, fmt.Errorf("progress: restore %s: %w", m.MsgID, err)
		}
		p.log.InfoContext(ctx, "restored message keys from MySQL", "corp", m.CorpID, "msgid", m.MsgID)
		return nil, nil
	})
	return err
}
