package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yidu-io/yidu/cmd/internal/process"
	"github.com/yidu-io/yidu/content"
	"github.com/yidu-io/yidu/internal/pagereader"
	"github.com/yidu-io/yidu/internal/rig"
)

// The page arm's attachment phase (issue 50): after the readers' storm,
// each of them (up to Config.AttachmentReaders) fetches a 2 MB PDF of a
// second notice as the page's pdf.js does (disableStream,
// disableAutoFetch, rangeChunkSize 64 KiB: one GET cut after its
// headers, then the last chunk, where the cross-reference table is, then
// every chunk in order as the pages are drawn), then asks for it again
// with its ETag, as a phone that kept it. Its figures are reported apart
// (MB/s, CPU per MB served, 304s, MySQL rows read), so the page arm's per
// reader figures stay comparable with the card path's.

const (
	// attachmentSize is the phase's PDF: 2 MiB.
	attachmentSize = 2 << 20
	// attachmentChunk is pdf.js's rangeChunkSize in page/web/page.js.
	attachmentChunk = 65536
	// attachmentMsgID is the notice that carries the PDF.
	attachmentMsgID = "storm-page-pdf"
	// DefaultAttachmentReaders is Config.AttachmentReaders' default: every
	// reader of a 100,000-member storm would move 200 GB here.
	DefaultAttachmentReaders = 2000
)

// attachmentFigures are the attachment phase's.
type attachmentFigures struct {
	// Readers fetched the PDF whole, range by range; Requests were sent
	// in all, Ranges answered 206 with the right bytes, NotModified the
	// repeated fetches answered 304; Errors anything else.
	Readers, Requests, Ranges, NotModified, Errors int
	// Bytes is the PDF bytes served (206 bodies, and whole bodies a
	// repeated fetch downloaded again: Refetched); MBPerSecond those over
	// the phase. NoETag counts first answers without the hash's ETag.
	Bytes, Refetched int64
	NoETag           int
	Seconds          float64
	MBPerSecond      float64
	// CPUmsPerMB is the CPU of every process (bench with yidu in it,
	// Kafka, mysqld, Redis) per MiB served; MySQLdCPUmsPerMB mysqld's
	// alone.
	CPUmsPerMB, MySQLdCPUmsPerMB float64
	// MySQLRowsRead is what the phase read of the bench's database, per
	// table (information_schema.TABLE_STATISTICS, MariaDB's userstat on
	// for the phase); nil when the server does not count them.
	MySQLRowsRead map[string]int64 `json:",omitempty"`
	// RangeP50ms, RangeP99ms: one range; RevalidateP99ms: the repeated
	// fetch with the ETag.
	RangeP50ms, RangeP99ms, RevalidateP99ms float64
	// Status is "exact" when every range held the PDF's own bytes and
	// every repeated fetch was 304, else the first problem.
	Status string
}

// benchPDF returns attachmentSize bytes that sniff as a PDF.
func benchPDF() []byte {
	b := bytes.Repeat([]byte("0123456789 yidu attachment phase 0123456789 abcdef\n"), attachmentSize/51+1)[:attachmentSize]
	copy(b, "%PDF-1.7\n")
	copy(b[len(b)-6:], "%%EOF\n")
	return b
}

// uploadAttachment uploads data as name through the dashboard's API; it
// returns the attachment's id.
func (b *bench) uploadAttachment(ctx context.Context, dashAddr, name string, data []byte) (string, error) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", name)
	_, _ = fw.Write(data)
	_ = mw.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+dashAddr+"/api/v1/attachments?app="+b.app.Name, &body)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return "", fmt.Errorf("upload: %w", err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var a struct {
		ID string `json:"id"`
	}
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(out, &a) != nil || a.ID == "" {
		return "", fmt.Errorf("upload: %s: %s", resp.Status, out)
	}
	return a.ID, nil
}

// attachmentPhase runs the phase on m with the readers of the page arm
// (signed in; nil entries are skipped), up to b.cfg.AttachmentReaders of
// them (0: none, the phase is off; negative: all).
func (b *bench) attachmentPhase(ctx context.Context, m *process.Main, readers []*pagereader.Reader) (*attachmentFigures, error) {
	n := b.cfg.AttachmentReaders
	if n == 0 {
		return nil, nil
	}
	var rs []*pagereader.Reader
	for _, rd := range readers {
		if rd != nil && (n < 0 || len(rs) < n) {
			rs = append(rs, rd)
		}
	}
	data := benchPDF()
	id, err := b.uploadAttachment(ctx, m.DashboardAddr, "评分表.pdf", data)
	if err != nil {
		return nil, err
	}
	if err := b.postMessage(ctx, m.DashboardAddr, "send the PDF", map[string]any{
		"msgid": attachmentMsgID, "app": b.app.Name, "title": "评分表", "send": true,
		"audience": map[string]any{"all": true},
		"content":  map[string]any{"markdown": "# 评分表\n\n见附件。", "attachments": []string{id}},
	}); err != nil {
		return nil, err
	}
	sum := content.Sum(data).String()
	s := &attachmentStorm{rs: rs, data: data, path: "/r/" + b.app.Name + "/" + attachmentMsgID + "/a/" + sum, etag: `"` + sum + `"`}
	chunks := (len(data) + attachmentChunk - 1) / attachmentChunk
	// pdf.js's order: the last chunk (the trailer), then from the start.
	s.order = append([]int{chunks - 1}, make([]int, 0, chunks-1)...)
	for i := range chunks - 1 {
		s.order = append(s.order, i)
	}

	pids := b.kafkaPids()
	stats := startRowStats(ctx, b.db)
	rows0 := stats.read(ctx, b.dbName())
	cpu0, ext0, my0, rd0 := selfCPU(), sumCPU(pids), sumCPU(b.mysqld), sumCPU(b.redisd)
	b.logf("attachment: %d readers fetch a %d MiB PDF in %d KiB ranges, then with its ETag", len(rs), len(data)>>20, attachmentChunk>>10)

	var f attachmentFigures
	lctx, cancel := context.WithTimeout(ctx, b.cfg.ArmTimeout)
	defer cancel()
	start := time.Now()
	s.run(lctx, b.cfg.Conns)
	elapsed := time.Since(start)
	ext := sumCPU(pids) - ext0
	cpu := selfCPU() - cpu0 + ext + sumCPU(b.mysqld) - my0 + sumCPU(b.redisd) - rd0
	my := sumCPU(b.mysqld) - my0
	f.MySQLRowsRead = diffRows(stats.read(ctx, b.dbName()), rows0)
	stats.stop(ctx)

	s.figures(&f, elapsed)
	mb := float64(f.Bytes) / (1 << 20)
	if mb > 0 {
		f.CPUmsPerMB = float64(cpu.Microseconds()) / 1000 / mb
		f.MySQLdCPUmsPerMB = float64(my.Microseconds()) / 1000 / mb
	}
	b.logf("attachment: %.1f MiB in %s (%.0f MB/s), %d ranges, %d 304s, %s", mb, elapsed.Round(time.Millisecond), f.MBPerSecond, f.Ranges, f.NotModified, f.Status)
	return &f, ctx.Err()
}

// attachmentStorm is the attachment phase's load: each reader of rs
// fetches the PDF data at path in ranges, in order, then again with its
// ETag; and what they measured.
type attachmentStorm struct {
	rs         []*pagereader.Reader
	data       []byte
	path, etag string
	order      []int // the chunks, in pdf.js's order

	mu                             sync.Mutex
	ranges, revalidate             []time.Duration
	next, requests, okRanges, n304 atomic.Int64
	served, errs, done             atomic.Int64
	noETag, refetched              atomic.Int64
	firstErr                       atomic.Value
}

func (s *attachmentStorm) fail(err error) {
	s.errs.Add(1)
	s.firstErr.CompareAndSwap(nil, err.Error())
}

// run fetches with conns readers at a time until every reader fetched or
// lctx ends.
func (s *attachmentStorm) run(lctx context.Context, conns int) {
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			var rg, rv []time.Duration
			defer func() {
				s.mu.Lock()
				s.ranges, s.revalidate = append(s.ranges, rg...), append(s.revalidate, rv...)
				s.mu.Unlock()
			}()
			buf := make([]byte, 0, attachmentChunk)
			for {
				i := int(s.next.Add(1) - 1)
				if i >= len(s.rs) || lctx.Err() != nil {
					return
				}
				buf = s.fetch(lctx, s.rs[i], buf, &rg, &rv)
			}
		})
	}
	wg.Wait()
}

// fetch is one reader's fetches: the first GET, the ranges, the GET with
// the ETag. It returns buf for the next reader.
func (s *attachmentStorm) fetch(lctx context.Context, rd *pagereader.Reader, buf []byte, rg, rv *[]time.Duration) []byte {
	// The first GET, cut after its headers.
	s.requests.Add(1)
	code, h, _, err := rd.Fetch(lctx, s.path, nil, nil, true)
	if err == nil && (code != http.StatusOK || h.Get("Accept-Ranges") != "bytes" || h.Get("Content-Length") != strconv.Itoa(len(s.data))) {
		err = fmt.Errorf("first GET = %d, Accept-Ranges %q, Content-Length %q", code, h.Get("Accept-Ranges"), h.Get("Content-Length"))
	}
	if err == nil && h.Get("ETag") != s.etag {
		s.noETag.Add(1)
	}
	if err != nil {
		s.fail(err)
		return buf
	}
	for _, c := range s.order {
		lo, hi := c*attachmentChunk, min((c+1)*attachmentChunk, len(s.data))
		t0 := time.Now()
		s.requests.Add(1)
		code, _, body, err := rd.Fetch(lctx, s.path, http.Header{"Range": {fmt.Sprintf("bytes=%d-%d", lo, hi-1)}}, buf, false)
		*rg = append(*rg, time.Since(t0))
		buf = body
		if err == nil && (code != http.StatusPartialContent || !bytes.Equal(body, s.data[lo:hi])) {
			err = fmt.Errorf("range %d-%d = %d with %d bytes", lo, hi-1, code, len(body))
		}
		if err != nil {
			s.fail(err)
			return buf
		}
		s.okRanges.Add(1)
		s.served.Add(int64(len(body)))
	}
	s.done.Add(1)
	// Again, as a phone that kept it.
	t0 := time.Now()
	s.requests.Add(1)
	code, _, body, err := rd.Fetch(lctx, s.path, http.Header{"If-None-Match": {s.etag}}, buf, false)
	*rv = append(*rv, time.Since(t0))
	if err == nil && code == http.StatusOK && bytes.Equal(body, s.data) {
		// Without an ETag the phone downloads it again.
		s.refetched.Add(int64(len(body)))
		return buf
	}
	if err == nil && (code != http.StatusNotModified || len(body) != 0) {
		err = fmt.Errorf("repeated fetch with the ETag = %d with %d bytes; want 304", code, len(body))
	}
	if err != nil {
		s.fail(err)
		return buf
	}
	s.n304.Add(1)
	return buf
}

// figures sets f's counts, rates and latencies of the load, which took
// elapsed, and its status.
func (s *attachmentStorm) figures(f *attachmentFigures, elapsed time.Duration) {
	f.Readers, f.Requests, f.Ranges, f.NotModified, f.Errors = int(s.done.Load()), int(s.requests.Load()), int(s.okRanges.Load()), int(s.n304.Load()), int(s.errs.Load())
	f.Refetched, f.NoETag = s.refetched.Load(), int(s.noETag.Load())
	f.Bytes, f.Seconds = s.served.Load()+f.Refetched, elapsed.Seconds()
	mb := float64(f.Bytes) / (1 << 20)
	if f.Seconds > 0 {
		f.MBPerSecond = mb / f.Seconds
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	slices.Sort(s.ranges)
	slices.Sort(s.revalidate)
	f.RangeP50ms, f.RangeP99ms = ms(rig.Percentile(s.ranges, .50)), ms(rig.Percentile(s.ranges, .99))
	f.RevalidateP99ms = ms(rig.Percentile(s.revalidate, .99))
	f.Status = "exact"
	switch {
	case s.firstErr.Load() != nil:
		f.Status = "first error: " + s.firstErr.Load().(string)
	case f.Readers != len(s.rs) || f.NotModified != len(s.rs) || f.NoETag > 0:
		f.Status = fmt.Sprintf("%d readers fetched it, %d were answered 304 (%d MiB downloaded again), %d without an ETag; want %d, %d, 0, 0",
			f.Readers, f.NotModified, f.Refetched>>20, f.NoETag, len(s.rs), len(s.rs))
	}
}

// dbName is the bench database's name (its DSN's).
func (b *bench) dbName() string {
	var name string
	_ = b.db.QueryRow("SELECT DATABASE()").Scan(&name)
	return name
}

// rowStats counts the rows read per table of a database while it runs:
// MariaDB's user statistics (userstat), turned on for the phase when it
// was off, and off again after.
type rowStats struct {
	db      *sql.DB
	enabled bool // turned on by us
	ok      bool
}

func startRowStats(ctx context.Context, db *sql.DB) *rowStats {
	s := &rowStats{db: db}
	var on int
	if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.userstat").Scan(&on); err != nil {
		return s
	}
	if on == 0 {
		if _, err := db.ExecContext(ctx, "SET GLOBAL userstat = 1"); err != nil {
			return s
		}
		s.enabled = true
	}
	s.ok = true
	return s
}

func (s *rowStats) read(ctx context.Context, schema string) map[string]int64 {
	if !s.ok {
		return nil
	}
	rows, err := s.db.QueryContext(ctx, "SELECT TABLE_NAME, ROWS_READ FROM information_schema.TABLE_STATISTICS WHERE TABLE_SCHEMA = ?", schema)
	if err != nil {
		return nil
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var t string
		var n int64
		if rows.Scan(&t, &n) == nil {
			out[t] = n
		}
	}
	return out
}

func (s *rowStats) stop(ctx context.Context) {
	if s.enabled {
		_, _ = s.db.ExecContext(ctx, "SET GLOBAL userstat = 0")
	}
}

// diffRows is after - before, tables that read nothing left out; nil when
// either is unknown.
func diffRows(after, before map[string]int64) map[string]int64 {
	if after == nil || before == nil {
		return nil
	}
	out := map[string]int64{}
	for t, n := range after {
		if d := n - before[t]; d > 0 {
			out[t] = d
		}
	}
	return out
}

// writeAttachment prints the attachment phase of r, if it ran.
func writeAttachment(w io.Writer, r ArmResult) {
	f := r.Attachment
	if f == nil {
		return
	}
	var rows int64
	for _, n := range f.MySQLRowsRead {
		rows += n
	}
	rowsCell := "unknown"
	if f.MySQLRowsRead != nil {
		rowsCell = fmt.Sprintf("%d %v", rows, f.MySQLRowsRead)
	}
	fmt.Fprintf(w, "\nattachment phase (%s): %d readers × %d MiB in %d KiB ranges: %d requests, %d ranges, %d × 304, %d MiB downloaded again, %d errors; %.0f MB/s; CPU %.2f ms per MiB (mysqld %.3f); range p50 %.2f ms p99 %.2f ms, 304 p99 %.2f ms; MySQL rows read %s\n",
		f.Status, f.Readers, attachmentSize>>20, attachmentChunk>>10, f.Requests, f.Ranges, f.NotModified, f.Refetched>>20, f.Errors, f.MBPerSecond,
		f.CPUmsPerMB, f.MySQLdCPUmsPerMB, f.RangeP50ms, f.RangeP99ms, f.RevalidateP99ms, rowsCell)
}
