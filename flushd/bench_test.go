package flushd

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/testenv"
)

// benchRows is the message size of every benchmark: 10 full batches.
const benchRows = 50_000

func benchSetup(b *testing.B) (*sql.DB, []Read) {
	b.Helper()
	db := testenv.MySQL(b)
	db.SetMaxOpenConns(64)
	db.SetMaxIdleConns(64)
	insertRecipients(b, db, "corp", "bench", 0, benchRows)
	reads := make([]Read, benchRows)
	for i := range reads {
		at := base + int64(i%3600)
		reads[i] = Read{UID: uint32(i), At: at, Source: delta.SourceCard, Button: at} // a card press, as its delta writes it
	}
	return db, reads
}

// resetBench makes every row of the benchmark's message unread again.
const resetBench = "UPDATE message_read_record SET is_read = 0, read_time = NULL, source = 0, button_at = NULL WHERE corp_id = 'corp' AND msgid = 'bench'"

// benchLoop runs write b.N times on unread rows and reports rows/s; the
// reset between iterations is outside the timer.
func benchLoop(b *testing.B, db *sql.DB, write func(ctx context.Context) error) {
	b.Helper()
	ctx := context.Background()
	var elapsed time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		_, err := db.ExecContext(ctx, resetBench)
		testenv.Check(b, "reset", err)
		b.StartTimer()
		start := time.Now()
		testenv.Check(b, "write", write(ctx))
		elapsed += time.Since(start)
	}
	b.StopTimer()
	b.ReportMetric(float64(benchRows*b.N)/elapsed.Seconds(), "rows/s")
	if n := countRead(b, db); n != benchRows {
		b.Fatalf("%d rows read after the benchmark; want %d", n, benchRows)
	}
}

// BenchmarkFlush is the Writer: one UPDATE JSON_TABLE(?) … statement per
// 5000 uids.
func BenchmarkFlush(b *testing.B) {
	db, reads := benchSetup(b)
	w, err := NewWriter(db, WriterOptions{BatchSize: DefaultBatchSize})
	testenv.Check(b, "NewWriter", err)
	benchLoop(b, db, func(ctx context.Context) error {
		_, _, err := w.Write(ctx, "corp", "bench", reads)
		return err
	})
}

// BenchmarkFlushCase is the statement the contract first named: CASE uid
// WHEN ? THEN ? … END per column, uid IN (…), 5000 uids each.
func BenchmarkFlushCase(b *testing.B) {
	db, reads := benchSetup(b)
	benchLoop(b, db, func(ctx context.Context) error {
		for chunk := range slices.Chunk(reads, DefaultBatchSize) {
			q, args := testenv.CaseFlush("corp", "bench", len(chunk), func(i int) (uid, at, source any) {
				return chunk[i].UID, datetime(chunk[i].At), uint8(chunk[i].Source)
			})
			if _, err := db.ExecContext(ctx, q, args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// BenchmarkRawUpdateIn is the ceiling the issue named: the bare UPDATE …
// IN (5000 uids) flipping is_read only. It is not the Writer's work: it
// leaves read_time NULL. Writing a read_time into a NULL column grew the row
// and cost about 1.7x as much on MariaDB 10.11 while the table was DYNAMIC
// (see BenchmarkRawUpdateInTimes); since migration 00009 (REDUNDANT) the
// row is rewritten in place either way (BenchmarkRowFormat).
func BenchmarkRawUpdateIn(b *testing.B) {
	rawUpdateIn(b, "is_read = 1")
}

// BenchmarkRawUpdateInTimes is the ceiling for what the Writer writes: the
// same UPDATE … IN (5000 uids) also setting read_time and source, to one
// value for all uids instead of each uid's own.
func BenchmarkRawUpdateInTimes(b *testing.B) {
	rawUpdateIn(b, "is_read = 1, read_time = '2025-01-01 00:00:00', source = 1")
}

func rawUpdateIn(b *testing.B, set string) {
	db, reads := benchSetup(b)
	benchLoop(b, db, func(ctx context.Context) error { return rawUpdateInAll(ctx, db, set, reads) })
}

// rawUpdateInAll runs UPDATE … SET set … IN (…) over reads' uids, 5000 a
// statement.
func rawUpdateInAll(ctx context.Context, db *sql.DB, set string, reads []Read) error {
	for chunk := range slices.Chunk(reads, DefaultBatchSize) {
		q := "UPDATE message_read_record SET " + set + " WHERE corp_id = ? AND msgid = ? AND is_read = 0 AND uid IN (" + testenv.Placeholders(len(chunk)) + ")"
		args := make([]any, 0, len(chunk)+2)
		args = append(args, "corp", "bench")
		for _, rd := range chunk {
			args = append(args, rd.UID)
		}
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkPerRow is the naive baseline: one UPDATE per read over 64
// connections.
func BenchmarkPerRow(b *testing.B) {
	db, reads := benchSetup(b)
	benchLoop(b, db, func(ctx context.Context) error {
		g, ctx := errgroup.WithContext(ctx)
		const workers = 64
		for w := range workers {
			g.Go(func() error {
				for i := w; i < len(reads); i += workers {
					rd := reads[i]
					if _, err := db.ExecContext(ctx, "UPDATE message_read_record SET is_read = 1, read_time = ?, source = ? WHERE corp_id = ? AND msgid = ? AND uid = ? AND is_read = 0",
						datetime(rd.At), uint8(rd.Source), "corp", "bench", rd.UID); err != nil {
						return err
					}
				}
				return nil
			})
		}
		return g.Wait()
	})
}

// BenchmarkFlushInterleaved runs the Writer (its compact statement: one
// time a read), the two UPDATE … IN ceilings, the Writer's full statement
// (four times a read, "full": the form every batch took before the compact
// one), its statement before read signals were kept apart ("prev") and
// an older one (a join against 5000 "SELECT ?,?,? UNION ALL" rows) one after
// the other in every iteration, so a shared machine's load weighs on all
// alike; it reports each one's rows/s and the Writer's share of each
// ceiling (%full: what the compact form saves; %prev: the signal
// columns' cost).
func BenchmarkFlushInterleaved(b *testing.B) {
	db, reads := benchSetup(b)
	w, err := NewWriter(db, WriterOptions{BatchSize: DefaultBatchSize})
	testenv.Check(b, "NewWriter", err)
	ctx := context.Background()
	forms := []benchForm{
		{"flush", func() error { _, _, err := w.Write(ctx, "corp", "bench", reads); return err }},
		{"raw", func() error { return rawUpdateInAll(ctx, db, "is_read = 1", reads) }},
		{"rawtimes", func() error {
			return rawUpdateInAll(ctx, db, "is_read = 1, read_time = '2025-01-01 00:00:00', source = 1", reads)
		}},
		{"full", func() error { return execChunks(ctx, db, reads, updateStatement) }},
		{"prev", func() error {
			return execChunks(ctx, db, reads, func(corpID, msgID string, chunk []Read) (string, []any) {
				return prevUpdateQuery, []any{prevReadsJSON(chunk), corpID, msgID}
			})
		}},
		{"union", func() error { return execChunks(ctx, db, reads, unionStatement) }},
	}
	elapsed := benchForms(b, db, forms)
	b.ReportMetric(100*elapsed[1].Seconds()/elapsed[0].Seconds(), "%raw")
	b.ReportMetric(100*elapsed[2].Seconds()/elapsed[0].Seconds(), "%rawtimes")
	b.ReportMetric(100*elapsed[3].Seconds()/elapsed[0].Seconds(), "%full")
	b.ReportMetric(100*elapsed[4].Seconds()/elapsed[0].Seconds(), "%prev")
}

// execChunks runs the statement build makes of each DefaultBatchSize
// chunk of the benchmark message's reads.
func execChunks(ctx context.Context, db *sql.DB, reads []Read, build func(corpID, msgID string, reads []Read) (string, []any)) error {
	for chunk := range slices.Chunk(reads, DefaultBatchSize) {
		q, args := build("corp", "bench", chunk)
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			return err
		}
	}
	return nil
}

// benchForm is one way of writing the benchmark's reads.
type benchForm struct {
	name  string
	write func() error
}

// benchForms runs the forms one after the other in every iteration, each on
// freshly reset rows and checked to have marked every one; it reports each
// form's rows/s and returns each one's total time.
func benchForms(b *testing.B, db *sql.DB, forms []benchForm) []time.Duration {
	b.Helper()
	ctx := context.Background()
	elapsed := make([]time.Duration, len(forms))
	b.ResetTimer()
	for range b.N {
		for i, f := range forms {
			b.StopTimer()
			_, err := db.ExecContext(ctx, resetBench)
			testenv.Check(b, "reset", err)
			b.StartTimer()
			start := time.Now()
			err = f.write()
			elapsed[i] += time.Since(start)
			testenv.Check(b, f.name, err)
			if n := countRead(b, db); n != benchRows {
				b.Fatalf("%s: %d rows read; want %d", f.name, n, benchRows)
			}
		}
	}
	b.StopTimer()
	for i, f := range forms {
		b.ReportMetric(float64(benchRows*b.N)/elapsed[i].Seconds(), f.name+"-rows/s")
	}
	return elapsed
}

// prevUpdateQuery is the Writer's statement before read signals were kept
// apart (is_read, read_time, source only; issue 12), to measure what the
// signal columns and their guards cost.
const prevUpdateQuery = updatePrefix + "?, '$[*]' COLUMNS(" +
	"uid INT UNSIGNED PATH '$[0]', read_time DATETIME PATH '$[1]', source TINYINT UNSIGNED PATH '$[2]')) AS d" +
	" STRAIGHT_JOIN message_read_record r ON r.corp_id = ? AND r.msgid = ? AND r.uid = d.uid" +
	" SET r.is_read = 1, r.read_time = d.read_time, r.source = d.source WHERE r.is_read = 0"

// prevReadsJSON is prevUpdateQuery's argument: [[uid,"read_time",source],…].
func prevReadsJSON(reads []Read) string {
	b := []byte{'['}
	for i, r := range reads {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendRead(b, r.UID, r.At, r.Source)
		b = append(b, ']')
	}
	return string(append(b, ']'))
}

// unionStatement is the Writer's previous batch UPDATE: a join against a
// derived table of 3 placeholders per uid.
func unionStatement(corpID, msgID string, reads []Read) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, len(reads)*3+2)
	b.WriteString("UPDATE message_read_record r JOIN (")
	for i, r := range reads {
		if i == 0 {
			b.WriteString("SELECT CAST(? AS UNSIGNED) AS uid, CAST(? AS DATETIME) AS read_time, CAST(? AS UNSIGNED) AS source")
		} else {
			b.WriteString(" UNION ALL SELECT ?,?,?")
		}
		args = append(args, r.UID, datetime(r.At), uint8(r.Source))
	}
	b.WriteString(") d ON d.uid = r.uid SET r.is_read = 1, r.read_time = d.read_time, r.source = d.source" +
		" WHERE r.corp_id = ? AND r.msgid = ? AND r.is_read = 0")
	return b.String(), append(args, corpID, msgID)
}

// BenchmarkRowFormat runs the Writer on freshly registered rows (every
// recipient unread, its DATETIMEs NULL, as registration writes them) in
// message_read_record's two row formats, alternately in one loop so the
// machine's load hits both alike: REDUNDANT (migration 00009, reads update
// the rows in place) and DYNAMIC (before it, reads grow the rows). It
// reports each format's rows/s and REDUNDANT's time as a percentage of
// DYNAMIC's.
func BenchmarkRowFormat(b *testing.B) {
	ctx := context.Background()
	formats := []string{"REDUNDANT", "DYNAMIC"}
	dbs := make([]*sql.DB, len(formats))
	writers := make([]*Writer, len(formats))
	var reads []Read
	for i, f := range formats {
		dbs[i], reads = benchSetup(b)
		_, err := dbs[i].ExecContext(ctx, "ALTER TABLE message_read_record ROW_FORMAT="+f)
		testenv.Check(b, "row format "+f, err)
		writers[i], err = NewWriter(dbs[i], WriterOptions{BatchSize: DefaultBatchSize})
		testenv.Check(b, "NewWriter", err)
	}
	elapsed := make([]time.Duration, len(formats))
	b.ResetTimer()
	for range b.N {
		for i, f := range formats {
			b.StopTimer()
			_, err := dbs[i].ExecContext(ctx, "DELETE FROM message_read_record WHERE corp_id = 'corp' AND msgid = 'bench'")
			testenv.Check(b, "delete", err)
			insertRecipients(b, dbs[i], "corp", "bench", 0, benchRows)
			b.StartTimer()
			start := time.Now()
			_, _, err = writers[i].Write(ctx, "corp", "bench", reads)
			elapsed[i] += time.Since(start)
			testenv.Check(b, "write "+f, err)
			if n := countRead(b, dbs[i]); n != benchRows {
				b.Fatalf("%s: %d rows read; want %d", f, n, benchRows)
			}
		}
	}
	b.StopTimer()
	for i, f := range formats {
		b.ReportMetric(float64(benchRows*b.N)/elapsed[i].Seconds(), strings.ToLower(f)+"-rows/s")
	}
	b.ReportMetric(100*elapsed[0].Seconds()/elapsed[1].Seconds(), "%dynamic")
}
