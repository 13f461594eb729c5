package flushd

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/yidu-io/yidu/bitmap/delta"
	"github.com/yidu-io/yidu/internal/testenv"
)

func expSetup(b *testing.B, interpolate bool) (*sql.DB, []Read) {
	b.Helper()
	dsn := testenv.MySQLDSN(b)
	c, _ := mysql.ParseDSN(dsn)
	c.InterpolateParams = interpolate
	db, err := sql.Open("mysql", c.FormatDSN())
	testenv.Check(b, "open", err)
	b.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(64)
	db.SetMaxIdleConns(64)
	insertRecipients(b, db, "corp", "bench", 0, benchRows)
	reads := make([]Read, benchRows)
	for i := range reads {
		reads[i] = Read{UID: uint32(i), At: base + int64(i%3600), Source: delta.SourceCard}
	}
	return db, reads
}

func jsonReads(reads []Read) string {
	var b strings.Builder
	b.Grow(len(reads) * 36)
	b.WriteByte('[')
	for i, r := range reads {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		b.WriteString(strconv.FormatUint(uint64(r.UID), 10))
		b.WriteString(`,"`)
		b.WriteString(datetime(r.At))
		b.WriteString(`",`)
		b.WriteString(strconv.Itoa(int(r.Source)))
		b.WriteByte(']')
	}
	b.WriteByte(']')
	return b.String()
}

const jtCols = `'$[*]' COLUMNS(uid INT UNSIGNED PATH '$[0]', read_time DATETIME PATH '$[1]', source TINYINT UNSIGNED PATH '$[2]')`

var expJSON = "UPDATE message_read_record r JOIN JSON_TABLE(?, " + jtCols + ") AS d ON r.corp_id = ? AND r.msgid = ? AND r.uid = d.uid SET r.is_read = 1, r.read_time = d.read_time, r.source = d.source WHERE r.is_read = 0"
var expJSONStraight = "UPDATE JSON_TABLE(?, " + jtCols + ") AS d STRAIGHT_JOIN message_read_record r ON r.corp_id = ? AND r.msgid = ? AND r.uid = d.uid SET r.is_read = 1, r.read_time = d.read_time, r.source = d.source WHERE r.is_read = 0"

func expJSONLoop(b *testing.B, interpolate bool, q string) {
	db, reads := expSetup(b, interpolate)
	benchLoop(b, db, func(ctx context.Context) error {
		for i := 0; i < len(reads); i += DefaultBatchSize {
			chunk := reads[i:min(i+DefaultBatchSize, len(reads))]
			res, err := db.ExecContext(ctx, q, jsonReads(chunk), "corp", "bench")
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); int(n) != len(chunk) {
				b.Fatalf("affected %d", n)
			}
		}
		return nil
	})
}

func BenchmarkXJSON(b *testing.B)         { expJSONLoop(b, false, expJSON) }
func BenchmarkXJSONStraight(b *testing.B) { expJSONLoop(b, false, expJSONStraight) }
func BenchmarkXJSONInterp(b *testing.B)   { expJSONLoop(b, true, expJSON) }

func BenchmarkXUnionInterp(b *testing.B) {
	db, reads := expSetup(b, true)
	w, _ := NewWriter(db, DefaultBatchSize, nil, nil)
	benchLoop(b, db, func(ctx context.Context) error {
		_, _, err := w.Write(ctx, "corp", "bench", reads)
		return err
	})
}

func rawLoop(b *testing.B, interpolate, full bool) {
	db, reads := expSetup(b, interpolate)
	benchLoop(b, db, func(ctx context.Context) error {
		for i := 0; i < len(reads); i += DefaultBatchSize {
			chunk := reads[i:min(i+DefaultBatchSize, len(reads))]
			var q strings.Builder
			args := make([]any, 0, len(chunk)+4)
			if full {
				q.WriteString("UPDATE message_read_record SET is_read = 1, read_time = ?, source = ? WHERE corp_id = ? AND msgid = ? AND is_read = 0 AND uid IN (")
				args = append(args, datetime(base), 1, "corp", "bench")
			} else {
				q.WriteString("UPDATE message_read_record SET is_read = 1 WHERE corp_id = ? AND msgid = ? AND is_read = 0 AND uid IN (")
				args = append(args, "corp", "bench")
			}
			for j, rd := range chunk {
				if j > 0 {
					q.WriteByte(',')
				}
				q.WriteByte('?')
				args = append(args, rd.UID)
			}
			q.WriteByte(')')
			if _, err := db.ExecContext(ctx, q.String(), args...); err != nil {
				return err
			}
		}
		return nil
	})
}

func BenchmarkXRawInterp(b *testing.B)     { rawLoop(b, true, false) }
func BenchmarkXRawFull(b *testing.B)       { rawLoop(b, false, true) }
func BenchmarkXRawFullInterp(b *testing.B) { rawLoop(b, true, true) }
