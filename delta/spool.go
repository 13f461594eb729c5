package delta

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu/internal/loop"
	"github.com/yidu-io/yidu/internal/metric"
	"github.com/yidu-io/yidu/internal/opt"
)

// publisher is what a Spool forwards to: the Producer.
type publisher interface {
	Publish(ctx context.Context, ds []Delta) error
}

// SpoolOptions configure a Spool. Zero fields take the defaults noted.
type SpoolOptions struct {
	// Dir is the spool's directory, on the receiver's own volume; it is
	// created if missing. One receiver per directory (a lock file says so).
	Dir string
	// MaxBytes bounds the spool's files (default 1 GiB): at the limit a
	// delta Kafka did not acknowledge is refused (the receiver answers
	// 503, WeCom retries).
	MaxBytes int64
	// SegmentBytes is the size at which a segment file is closed and a new
	// one begun (default 8 MiB): a drained segment is deleted whole.
	SegmentBytes int64
	// DrainInterval is how often a non-empty spool tries Kafka again
	// (default 1 s).
	DrainInterval time.Duration
	// DrainBatch is the most deltas per Publish while draining (default
	// 1000).
	DrainBatch int
	// DrainTimeout bounds one Publish while draining (default 10 s).
	DrainTimeout time.Duration
	Logger       *slog.Logger
	Registerer   prometheus.Registerer

	// create opens a new segment file; nil: os.OpenFile. Tests inject a
	// file that fails as a full disk does (ENOSPC).
	create func(path string) (segmentFile, error)
}

// segmentFile is what the spool needs of a segment being written.
type segmentFile interface {
	io.Writer
	Truncate(size int64) error
	Seek(offset int64, whence int) (int64, error)
	Sync() error
	Close() error
}

func createSegment(path string) (segmentFile, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
}

// ErrSpoolFull is returned when a delta Kafka did not acknowledge does
// not fit in the spool.
var ErrSpoolFull = errors.New("delta: spool full")

// Spool is a Publisher that makes a delta durable on local disk when no
// broker acknowledges it, and forwards the spooled deltas to Kafka once
// the brokers are back (docs/reliability.md, "Kafka down"). Publish
// returns nil only when every delta is acknowledged by Kafka or written to
// the spool and fsync'd. While the spool holds anything, new deltas go
// straight to it (Kafka just failed; the drain is what tries it again),
// so a Kafka outage costs a callback an fsync, not a delivery timeout.
//
// Spooled deltas reach Kafka again at least once: a drain interrupted by
// a crash publishes its segment again after the restart. Duplicates are
// harmless downstream (flushd writes a read only while is_read = 0, a
// signal's time only while its column is empty).
//
// File format: segments named <seq>.spool, oldest first; each a sequence
// of records uvarint(len) · crc32c(value) (4 bytes, big endian) · value,
// value = Marshal(delta). A torn or corrupt record ends its segment's
// replay: it can only be the tail of a write whose Publish never returned
// nil.
type Spool struct {
	pub  publisher
	opts SpoolOptions
	log  *slog.Logger
	m    *spoolMetrics
	lock *os.File
	// guard recovers a drain that panics (issue 46).
	guard *loop.Guard

	syncMu sync.Mutex // held while syncing or sealing the current segment

	mu      sync.Mutex  // guards the fields below
	sealed  []segment   // oldest first
	cur     segmentFile // nil: none open
	curName string
	curSize int64
	bytes   int64 // every segment, the current one included
	gen     uint64
	synced  uint64 // gen of the last write fsync'd
	// unsynced is the last gen of a segment retired after a failed
	// write whose final fsync failed too: those writes are not durable.
	unsynced uint64
	seq      uint64
	down     bool // the spool is not empty: new deltas join it
	closed   bool

	stop chan struct{}
	done chan struct{}
}

type segment struct {
	name string
	size int64
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// NewSpool opens (or creates) the spool in opts.Dir in front of pub and
// starts its drain: deltas a previous process spooled are forwarded as
// soon as Kafka acknowledges them. Close stops it.
func NewSpool(pub publisher, opts SpoolOptions) (*Spool, error) {
	if pub == nil || opts.Dir == "" {
		return nil, errors.New("delta: spool: publisher and dir are required")
	}
	opt.Positive(&opts.MaxBytes, 1<<30)
	opt.Positive(&opts.SegmentBytes, 8<<20)
	opts.SegmentBytes = min(opts.SegmentBytes, opts.MaxBytes)
	opt.Positive(&opts.DrainInterval, time.Second)
	opt.Positive(&opts.DrainBatch, 1000)
	opt.Positive(&opts.DrainTimeout, 10*time.Second)
	opt.Logger(&opts.Logger)
	if opts.create == nil {
		opts.create = createSegment
	}
	m, err := newSpoolMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	log := opts.Logger.With("component", "delta.spool")
	// A panic in one drain (a segment, the publisher) is recovered and
	// counted, yidu_loop_panics_total{loop="spool_drain"}; the next tick
	// drains again, the spooled deltas stay on disk (issue 46).
	guard, err := loop.New("spool_drain", loop.Options{Registerer: opts.Registerer, Logger: log})
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("delta: spool: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(opts.Dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("delta: spool: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("delta: spool: %s is used by another process: %w", opts.Dir, err)
	}
	s := &Spool{
		pub: pub, opts: opts, m: m, lock: lock, guard: guard,
		log:  log,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if err := s.scan(); err != nil {
		lock.Close()
		return nil, err
	}
	if s.down {
		s.log.Warn("spooled deltas found; forwarding them to Kafka", "segments", len(s.sealed), "bytes", s.bytes)
	}
	go s.drainLoop()
	return s, nil
}

// scan finds the segments a previous process left.
func (s *Spool) scan() error {
	ents, err := os.ReadDir(s.opts.Dir)
	if err != nil {
		return fmt.Errorf("delta: spool: %w", err)
	}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".spool")
		if !ok || e.IsDir() {
			continue
		}
		n, err := strconv.ParseUint(name, 10, 64)
		if err != nil {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return fmt.Errorf("delta: spool: %w", err)
		}
		s.sealed = append(s.sealed, segment{name: e.Name(), size: info.Size()})
		s.bytes += info.Size()
		s.seq = max(s.seq, n)
	}
	slices.SortFunc(s.sealed, func(a, b segment) int { return strings.Compare(a.name, b.name) })
	s.down = len(s.sealed) > 0
	s.m.bytes.Set(float64(s.bytes))
	return nil
}

// Publish hands ds to Kafka and waits for the acks; when Kafka fails (or
// the spool is not empty) it writes ds to the spool and fsyncs. It
// returns nil only when every delta is durable in one or the other.
func (s *Spool) Publish(ctx context.Context, ds []Delta) error {
	if len(ds) == 0 {
		return nil
	}
	s.mu.Lock()
	down, closed := s.down, s.closed
	s.mu.Unlock()
	if closed {
		return errors.New("delta: spool closed")
	}
	var perr error
	if !down {
		if perr = s.pub.Publish(ctx, ds); perr == nil {
			return nil
		}
	}
	if err := s.write(ds); err != nil {
		if perr != nil {
			return fmt.Errorf("%w (kafka: %w)", err, perr)
		}
		return err
	}
	s.m.spooled.Add(float64(len(ds)))
	if !down {
		s.log.Warn("kafka did not acknowledge; deltas spooled to disk until it does", "deltas", len(ds), "err", perr)
	}
	return nil
}

// write appends ds to the current segment and returns once it is
// fsync'd; concurrent writers share one fsync.
func (s *Spool) write(ds []Delta) error {
	var rec []byte
	for _, d := range ds {
		rec = appendRecord(rec, Marshal(d))
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("delta: spool closed")
	}
	if s.bytes+int64(len(rec)) > s.opts.MaxBytes {
		s.mu.Unlock()
		s.m.full.Inc()
		return fmt.Errorf("%w: %d of %d bytes", ErrSpoolFull, s.bytes, s.opts.MaxBytes)
	}
	if s.cur == nil {
		if err := s.openLocked(); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	if _, err := s.cur.Write(rec); err != nil {
		// A full disk (ENOSPC) or an I/O error: this read alone is
		// refused (503, WeCom retries). Cut the torn record off, and
		// whether or not that worked, retire the segment: the next
		// record begins a new one, so a torn record can only ever be a
		// segment's tail and the records before it stay readable.
		_ = s.cur.Truncate(s.curSize)
		s.retireLocked()
		s.mu.Unlock()
		s.m.writeErrors.Inc()
		return fmt.Errorf("delta: spool: write: %w", err)
	}
	s.curSize += int64(len(rec))
	s.bytes += int64(len(rec))
	s.down = true
	s.gen++
	gen := s.gen
	s.m.bytes.Set(float64(s.bytes))
	s.mu.Unlock()
	return s.syncTo(gen)
}

// openLocked begins a new segment (and makes its name durable).
func (s *Spool) openLocked() error {
	s.seq++
	name := fmt.Sprintf("%020d.spool", s.seq)
	f, err := s.opts.create(filepath.Join(s.opts.Dir, name))
	if err != nil {
		_ = os.Remove(filepath.Join(s.opts.Dir, name)) // created before a full disk refused more
		return fmt.Errorf("delta: spool: %w", err)
	}
	if err := syncDir(s.opts.Dir); err != nil {
		f.Close()
		return err
	}
	s.cur, s.curName, s.curSize = f, name, 0
	return nil
}

// retireLocked closes the current segment after a failed write and
// queues it for the drain. With mu held.
func (s *Spool) retireLocked() {
	// Writes of other callbacks since the last fsync are in it: make
	// them durable, or tell their syncTo they are not.
	if err := s.cur.Sync(); err == nil {
		s.synced = s.gen
	} else {
		s.unsynced = s.gen
	}
	_ = s.cur.Close()
	if s.curSize > 0 {
		s.sealed = append(s.sealed, segment{name: s.curName, size: s.curSize})
	} else {
		_ = os.Remove(filepath.Join(s.opts.Dir, s.curName))
	}
	s.cur = nil
}

// syncTo returns once write gen is fsync'd.
func (s *Spool) syncTo(gen uint64) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	if s.synced >= gen {
		s.mu.Unlock()
		return nil
	}
	f, upTo := s.cur, s.gen
	lost := gen <= s.unsynced
	s.mu.Unlock()
	if f == nil || lost {
		if lost {
			return errors.New("delta: spool: fsync: the segment was retired after a failed write and could not be synced")
		}
		return nil // sealed meanwhile: sealing synced it
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("delta: spool: fsync: %w", err)
	}
	s.mu.Lock()
	s.synced = max(s.synced, upTo)
	full := s.curSize >= s.opts.SegmentBytes
	s.mu.Unlock()
	if full {
		return s.sealLocked()
	}
	return nil
}

// seal closes the current segment, so the drain may forward it.
func (s *Spool) seal() error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	return s.sealLocked()
}

// sealLocked is seal with syncMu held.
func (s *Spool) sealLocked() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return nil
	}
	if err := s.cur.Sync(); err != nil {
		// Keep it open: a later seal retries; its writes since the last
		// fsync were not acknowledged as durable.
		return fmt.Errorf("delta: spool: seal %s: %w", s.curName, err)
	}
	if err := s.cur.Close(); err != nil {
		return fmt.Errorf("delta: spool: seal %s: %w", s.curName, err)
	}
	s.synced = s.gen
	if s.curSize > 0 {
		s.sealed = append(s.sealed, segment{name: s.curName, size: s.curSize})
	} else {
		_ = os.Remove(filepath.Join(s.opts.Dir, s.curName))
	}
	s.cur = nil
	return nil
}

// Bytes returns the spool's size on disk.
func (s *Spool) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// Ready fails when the spool is full: the receiver could then answer
// only 503 while Kafka is down. An empty or partly used spool is ready,
// Kafka up or not.
func (s *Spool) Ready(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bytes+64<<10 > s.opts.MaxBytes {
		return fmt.Errorf("%w: %d of %d bytes", ErrSpoolFull, s.bytes, s.opts.MaxBytes)
	}
	return nil
}

// closeDrain bounds Close's last attempt to forward the spool.
const closeDrain = 5 * time.Second

// Close stops the drain, tries once more (for at most 5 s) to forward
// what the spool holds, and closes it; what is left is forwarded by the
// next process on this directory. Stop the receiver first.
func (s *Spool) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	s.drainUntil(nil, time.Now().Add(closeDrain))
	err := s.seal()
	if left := s.Bytes(); left > 0 {
		s.log.Warn("spool left for the next receiver on this volume", "dir", s.opts.Dir, "bytes", left)
	}
	s.lock.Close()
	return err
}

// spoolMetrics are the spool's series.
type spoolMetrics struct {
	spooled     prometheus.Counter
	drained     prometheus.Counter
	full        prometheus.Counter
	drainErrors prometheus.Counter
	writeErrors prometheus.Counter
	bytes       prometheus.Gauge
}

func newSpoolMetrics(reg prometheus.Registerer) (*spoolMetrics, error) {
	f := metric.New(reg)
	m := &spoolMetrics{
		spooled:     f.Counter("yidu_receiver_spool_spooled_total", "Deltas Kafka did not acknowledge, written to the receiver's spool (fsync'd) instead."),
		drained:     f.Counter("yidu_receiver_spool_drained_total", "Spooled deltas forwarded to Kafka and acknowledged (again after a restart: at least once)."),
		full:        f.Counter("yidu_receiver_spool_full_total", "Publishes refused because the spool reached receiver.spool_max_bytes (answered 503)."),
		drainErrors: f.Counter("yidu_receiver_spool_drain_errors_total", "Failed attempts to forward a spool segment to Kafka (retried every second)."),
		writeErrors: f.Counter("yidu_receiver_spool_write_errors_total", "Spool writes that failed (a full disk: ENOSPC), each answered 503 for that read alone."),
		bytes:       f.Gauge("yidu_receiver_spool_bytes", "Bytes in the receiver's spool, waiting for Kafka."),
	}
	return m, f.Err("delta")
}
