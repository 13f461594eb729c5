package evidence

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	flog "github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"

	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/internal/tsatest"
	"github.com/yidu-io/yidu/ledger"
)

// tsaLedger is fakeLedger whose day checkpoint covering an entry is the
// log's first seq leaves, signed with the log's key and stamped by a
// real TSA, with its consistency proof to the record's checkpoint. fork,
// when set, makes the day checkpoint one of a forked tree instead: the
// same size, its first leaf another, signed with the same key and
// stamped by the same TSA (what an operator holding the key could make).
type tsaLedger struct {
	*fakeLedger
	tb      testing.TB
	stamper *ledger.TSA
	fork    bool
}

func (l *tsaLedger) DayStamp(ctx context.Context, _ string, seq, to int64) (DayStamp, bool, error) {
	leaves := l.leaves[:seq]
	if l.fork {
		leaves = append([]ledger.Hash{ledger.LeafHash([]byte("forged"))}, leaves[1:]...)
	}
	root := ledger.Root(leaves)
	signed, err := note.Sign(&note.Note{Text: string(flog.Checkpoint{Origin: ledger.Origin("yidu.test", corp), Size: uint64(seq), Hash: root[:]}.Marshal())}, l.signer)
	testenv.Check(l.tb, "sign", err)
	sum := sha256.Sum256(signed)
	tok, err := l.stamper.Stamp(ctx, sum[:])
	testenv.Check(l.tb, "stamp", err)
	ts, err := ledger.ParseTimestamp(tok)
	testenv.Check(l.tb, "token", err)
	// The honest proof from seq to to: a forger keeps it, having no other.
	path, err := ledger.NewTree(l.leaves[:to]).Consistency(uint64(seq), uint64(to))
	testenv.Check(l.tb, "consistency", err)
	doc := &ConsistencyDoc{TreeSize: to, Path: []string{}}
	for _, h := range path {
		doc.Path = append(doc.Path, h.String())
	}
	return DayStamp{Day: "2026-11-02", Size: seq, Root: root.String(), Time: ts.Time, Token: tok, Note: string(signed), Consistency: doc}, true, nil
}

// TestPackDayCheckpointConsistent (issue 48): each record's day
// checkpoint carries a consistency proof to the checkpoint its entries
// are proved against, and Check verifies it: an honest pack passes; a
// pack whose day checkpoint is another validly signed and stamped
// checkpoint, of a forked tree, is refused naming the record's day
// checkpoint, though its signature and TSA token verify.
func TestPackDayCheckpointConsistent(t *testing.T) {
	tsa := tsatest.Start(t)
	stamper, err := ledger.NewTSA(tsa.URL, nil)
	testenv.Check(t, "tsa", err)
	f := newFixture(t, 3)
	// Entries after zhangsan's newest, so their day checkpoint is a
	// proper prefix of the pack's checkpoint.
	f.ledger.add("user00003", 3, "signal", ledger.Body{"read_time": "2026-11-03T01:00:00Z", "source": 1})
	f.ledger.add("user00003", 3, "signal", ledger.Body{"read_time": "2026-11-03T01:00:01Z", "source": 1})
	tl := &tsaLedger{fakeLedger: f.ledger, tb: t, stamper: stamper}
	opts := Options{PageEvents: f.page, Now: func() time.Time { return t0.Add(72 * time.Hour) }, Ledger: tl, Signer: f.ledger.signer, VerifierKey: f.ledger.vkey}
	s, err := New(f.db, f.versions, opts)
	testenv.Check(t, "New", err)

	z, _ := buildZIP(t, s, everyone{}, Filter{})
	rep, err := Check(bytes.NewReader(z), int64(len(z)), CheckOptions{Key: f.ledger.vkey})
	if err != nil || len(rep.Stamps) == 0 {
		t.Fatalf("Check(honest pack) = %v, %v; want OK with its day checkpoints", rep.Problems, err)
	}
	var rec Record
	rewrite(t, z, func(n string, b []byte) []byte {
		if n == "zhangsan/record.json" {
			testenv.Check(t, "record", json.Unmarshal(b, &rec))
		}
		return b
	})
	if rec.Stamp == nil || rec.Stamp.Consistency == nil || rec.Stamp.Size >= rec.Stamp.Consistency.TreeSize || len(rec.Stamp.Consistency.Path) == 0 {
		t.Fatalf("zhangsan's day checkpoint: %v; want a consistency proof from a smaller size", rec.Stamp != nil && rec.Stamp.Consistency != nil)
	}

	tl.fork = true
	z, _ = buildZIP(t, s, everyone{}, Filter{})
	rep, err = Check(bytes.NewReader(z), int64(len(z)), CheckOptions{Key: f.ledger.vkey})
	if !errors.Is(err, ErrCheck) {
		t.Fatalf("Check(forked day checkpoint) = %+v, %v; want ErrCheck", rep, err)
	}
	all := strings.Join(rep.Problems, "\n")
	if !strings.Contains(all, "zhangsan/record.json: the day checkpoint of 2026-11-02") || !strings.Contains(all, "is not consistent with the checkpoint the entries are proved against") {
		t.Errorf("problems:\n%s\nwant zhangsan's day checkpoint named not consistent", all)
	}
	if strings.Contains(all, "manifest") || strings.Contains(all, "TSA token") || strings.Contains(all, "signature") {
		t.Errorf("problems:\n%s\nwant only the consistency refused (the forgery is signed and stamped)", all)
	}
	// Without its consistency proof the day checkpoint proves nothing.
	tl.fork = false
	z, _ = buildZIP(t, s, everyone{}, Filter{})
	z = rehash(t, rewrite(t, z, func(n string, b []byte) []byte {
		if n == "zhangsan/record.json" {
			return dropConsistency(t, b)
		}
		return b
	}))
	rep, _ = Check(bytes.NewReader(z), int64(len(z)), CheckOptions{Key: f.ledger.vkey})
	if all := strings.Join(rep.Problems, "\n"); !strings.Contains(all, "zhangsan/record.json: the day checkpoint of 2026-11-02") || !strings.Contains(all, "carries no consistency proof") {
		t.Errorf("problems without the consistency proof:\n%s\nwant it named", all)
	}
}

// dropConsistency is record.json without its day checkpoint's
// consistency proof.
func dropConsistency(tb testing.TB, b []byte) []byte {
	tb.Helper()
	var m map[string]any
	testenv.Check(tb, "record", json.Unmarshal(b, &m))
	st, ok := m["day_checkpoint"].(map[string]any)
	if !ok {
		tb.Fatal("record.json has no day_checkpoint")
	}
	delete(st, "consistency")
	out, err := json.Marshal(m)
	testenv.Check(tb, "record", err)
	return out
}
