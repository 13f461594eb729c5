package tracker

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/testenv"
)

// deptSet is one send_departments row as a test reads it.
type deptSet struct {
	depts string
	names map[string]string
	uids  *roaring.Bitmap
}

func (e *env) deptSets(tb testing.TB, msgID string) []deptSet {
	tb.Helper()
	rows, err := e.db.Query("SELECT depts, names, uids FROM send_departments WHERE corp_id = ? AND msgid = ? ORDER BY set_no", e.app.CorpID, msgID)
	testenv.Check(tb, "send_departments", err)
	defer rows.Close()
	var out []deptSet
	for rows.Next() {
		var s deptSet
		var names string
		var uids []byte
		testenv.Check(tb, "scan", rows.Scan(&s.depts, &names, &uids))
		testenv.Check(tb, "names", json.Unmarshal([]byte(names), &s.names))
		s.uids = roaring.New()
		testenv.Check(tb, "uids", s.uids.UnmarshalBinary(uids))
		out = append(out, s)
	}
	testenv.Check(tb, "rows", rows.Err())
	return out
}

// TestSendKeepsDepartments: the first send keeps each recipient's
// departments and their names as they were, grouped by set; a later
// directory change and a resumed send leave the snapshot as it was.
func TestSendKeepsDepartments(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	uids := e.users(t, map[string][]int64{"amy": {2, 1}, "bo": {1, 2}, "cy": {3}, "di": nil})
	for id, name := range map[int64]string{1: "总公司", 2: "销售部", 3: "研发部"} {
		_, err := e.db.Exec("INSERT INTO departments (corp_id, dept_id, parent_id, name) VALUES (?, ?, 0, ?)", e.app.CorpID, id, name)
		testenv.Check(t, "department", err)
	}
	reg := e.registration("depts", yidu.Audience{UserIDs: []string{"amy", "bo", "cy", "di"}})
	reg.Send = true
	if _, err := e.reg.RegisterAndSend(ctx, reg); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		got := e.deptSets(t, "depts")
		want := []struct {
			depts string
			names map[string]string
			who   []uint32
		}{
			{"", map[string]string{}, []uint32{uids["di"]}},
			{"1,2", map[string]string{"1": "总公司", "2": "销售部"}, []uint32{uids["amy"], uids["bo"]}},
			{"3", map[string]string{"3": "研发部"}, []uint32{uids["cy"]}},
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d sets %+v; want %d", when, len(got), got, len(want))
		}
		for i, w := range want {
			g := got[i]
			if g.depts != w.depts || fmt.Sprint(g.names) != fmt.Sprint(w.names) || !g.uids.Equals(roaring.BitmapOf(w.who...)) {
				t.Errorf("%s: set %d = %q %v %v; want %q %v %v", when, i, g.depts, g.names, g.uids.ToArray(), w.depts, w.names, w.who)
			}
		}
	}
	check("after the send")
	// The directory moves cy and renames 研发部; a resumed send (nothing
	// left to send) keeps what the first one saw.
	_, err := e.db.Exec("UPDATE users SET departments = '2' WHERE corp_id = ? AND uid = ?", e.app.CorpID, uids["cy"])
	testenv.Check(t, "move cy", err)
	_, err = e.db.Exec("UPDATE departments SET name = '产品研发部' WHERE corp_id = ? AND dept_id = 3", e.app.CorpID)
	testenv.Check(t, "rename", err)
	m, _, _, _, _, err := e.reg.LoadReads(ctx, e.app.CorpID, "depts")
	testenv.Check(t, "load", err)
	if _, err := e.reg.Send(ctx, e.app, m); err != nil {
		t.Fatal(err)
	}
	check("after the directory changed and the send was resumed")
}

// TestSend100k measures the send of one notice to 100,000 recipients in
// 500 department sets (WeCom faked over HTTP, 100 calls), and the part of
// it that keeps their departments at send time.
//
//	YIDU_TEST_REAL=1 go test -run TestSend100k -v ./tracker/
func TestSend100k(t *testing.T) {
	if testing.Short() {
		t.Skip("100k rows")
	}
	e := newEnv(t)
	ctx := context.Background()
	seed100k(t, e)
	_, err := e.db.Exec("UPDATE users SET departments = CONCAT(uid % 500 + 2, ',1') WHERE corp_id = ?", e.app.CorpID)
	testenv.Check(t, "departments", err)
	for id := 1; id <= 501; id++ {
		_, err := e.db.Exec("INSERT INTO departments (corp_id, dept_id, parent_id, name) VALUES (?, ?, 1, ?)", e.app.CorpID, id, fmt.Sprintf("部门%d", id))
		testenv.Check(t, "department", err)
	}
	reg := e.rawRegistration("send-100k", yidu.Audience{All: true})
	m, _, err := e.reg.Register(ctx, reg)
	testenv.Check(t, "register", err)
	start := time.Now()
	rep, err := e.reg.Send(ctx, e.app, m)
	took := time.Since(start)
	if err != nil || rep.Sent != 100_000 || rep.Batches != 100 {
		t.Fatalf("Send = %+v, %v; want 100,000 sent in 100 batches", rep, err)
	}
	sets := e.deptSets(t, "send-100k")
	n := uint64(0)
	for _, s := range sets {
		n += s.uids.GetCardinality()
	}
	if len(sets) != 500 || n != 100_000 {
		t.Fatalf("%d sets of %d recipients; want 500 of 100,000", len(sets), n)
	}
	// The snapshot alone, again.
	_, err = e.db.Exec("DELETE FROM send_departments WHERE corp_id = ?", e.app.CorpID)
	testenv.Check(t, "delete", err)
	snap := time.Now()
	testenv.Check(t, "snapshot", e.reg.snapshotDepartments(ctx, m))
	snapTook := time.Since(snap)
	var size int64
	testenv.Check(t, "size", e.db.QueryRow("SELECT SUM(LENGTH(uids) + LENGTH(names) + LENGTH(depts)) FROM send_departments WHERE corp_id = ?", e.app.CorpID).Scan(&size))
	t.Logf("send of 100,000 recipients: %v; of which departments at send: %v (%d rows, %d bytes)", took.Round(time.Millisecond), snapTook.Round(time.Millisecond), len(sets), size)
}
