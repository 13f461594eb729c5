package process

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/ledger"
	"github.com/yidu-io/yidu/wecom"
)

// TestStandingNotice (issue 51, done when): a standing notice to 销售部;
// a new member added to the fake WeCom and a directory sync run; within
// a poll the joiner receives the card, is a recipient with their own
// deadline, reads and acknowledges on the page, and their evidence names
// when they joined; the first recipients' counts, cards and rounds are
// unchanged; a member who joins 研发部 gets nothing. Then a
// re-acknowledgement cycle, on an injected clock, asks everyone again and
// by_cycle shows both cycles.
func TestStandingNotice(t *testing.T) {
	addr := freeAddr(t)
	fake := fakewecom.New(fakewecom.Corp{CorpID: testCorp,
		Apps: []fakewecom.App{{AgentID: testAgent, Secret: pageSecret, RedirectDomain: addr}},
		Users: []fakewecom.User{{UserID: "zhangsan", Name: "张三", Departments: []int{2}}, {UserID: "lisi", Name: "李四", Departments: []int{2}},
			{UserID: "wangwu", Name: "王五", Departments: []int{3}}},
		Departments: []fakewecom.Department{{ID: 1, Name: "总公司"}, {ID: 2, ParentID: 1, Name: "销售部"}, {ID: 3, ParentID: 1, Name: "研发部"}}})
	base := fakewecom.Start(t, fake)
	m := mustRunMainWith(t, func(c *config.Config) {
		c.WeCom.APIBase, c.WeCom.OAuthBase, c.WeCom.LoginBase = base, base, base
		c.Apps[0].Secret = pageSecret
		c.Receiver.Listen = addr
		c.Receiver.PublicURL = "http://" + addr
	})
	dir, err := wecom.NewDirectory(wecom.App{CorpID: testCorp, AgentID: testAgent, Secret: pageSecret}, wecom.DirectoryOptions{})
	testenv.Check(t, "NewDirectory", err)
	syncer, err := idmap.NewSyncer(m.Mapper, map[string]idmap.Directory{testCorp: dir}, idmap.Options{Registerer: prometheus.NewRegistry()})
	testenv.Check(t, "NewSyncer", err)
	sync := func() {
		t.Helper()
		_, err := syncer.Sync(context.Background(), testCorp)
		testenv.Check(t, "directory sync", err)
	}
	sync()

	const msg, page = "handbook", "/r/hr/handbook"
	post := map[string]any{"msgid": msg, "app": "hr", "title": "员工手册", "send": true,
		"audience": map[string]any{"departments": []int{2}},
		"content":  map[string]any{"markdown": "# 员工手册\n\n第一条：诚实守信。"}, "read_rule": "acknowledged",
		"follow_up": map[string]any{"reminders": []string{"1d"}},
		"standing":  map[string]any{"join_deadline": "7d", "until": nil, "reacknowledge_every": "1y"}}

	// Hostile and wrong specs: 400 naming the field, nothing written.
	for _, tc := range []struct {
		spec  any
		field string
	}{
		{map[string]any{"join_deadline": "7x"}, "standing.join_deadline"},
		{map[string]any{"join_deadline": "-7d"}, "standing.join_deadline"},
		{map[string]any{"join_deadline": "99999y"}, "standing.join_deadline"},
		{map[string]any{"reacknowledge_every": "1h"}, "standing.reacknowledge_every"},
		{map[string]any{"until": "2001-01-01T00:00:00Z"}, "standing.until"},
	} {
		bad := map[string]any{}
		for k, v := range post {
			bad[k] = v
		}
		bad["standing"] = tc.spec
		code, out := apiJSON(t, m, "POST", "/messages", bad)
		if code != http.StatusBadRequest || out["field"] != tc.field {
			t.Errorf("standing %v = %d %v; want 400 naming %s", tc.spec, code, out, tc.field)
		}
	}
	if n := testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM messages WHERE msgid = ?", msg)[0] +
		testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM standing_notices WHERE msgid = ?", msg)[0]; n != 0 {
		t.Fatalf("refused posts wrote %d rows", n)
	}
	bad := map[string]any{"msgid": "only-ids", "app": "hr", "title": "x", "send": true,
		"audience": map[string]any{"userids": []string{"zhangsan"}}, "standing": map[string]any{}}
	if code, out := apiJSON(t, m, "POST", "/messages", bad); code != http.StatusBadRequest || out["field"] != "standing.audience" {
		t.Errorf("standing to UserIDs only = %d %v; want 400 standing.audience", code, out)
	}

	if code := api(t, m, "POST", "/messages", post, nil); code != http.StatusCreated {
		t.Fatalf("post = %d; want 201", code)
	}
	type progressJSON struct {
		Recipients int            `json:"recipients"`
		Read       int            `json:"read"`
		BySignal   map[string]int `json:"by_signal"`
	}
	var p progressJSON
	if code := api(t, m, "GET", "/messages/"+msg+"/progress", nil, &p); code != http.StatusOK || p.Recipients != 2 {
		t.Fatalf("progress = %d %+v; want 2 recipients", code, p)
	}
	cardsTo := func(user string) []string {
		var out []string
		for _, s := range fake.Sent() {
			raw := string(s.Raw)
			if strings.Contains(raw, `"task_id":"`+msg+`@`) && strings.Contains(raw, user) {
				out = append(out, raw)
			}
		}
		return out
	}
	first := len(fake.Sent())

	// A second replica's loop polls the same notice meanwhile: each
	// joiner is still enrolled and sent once.
	// The loops of the test's own are the process's standing loop as it
	// is wired (its versions published to the reading pages: announcing),
	// with their own owner and clock.
	wing, err := m.notices()
	testenv.Check(t, "notice wing", err)
	standingAs := func(owner string, now func() time.Time) *loops.StandingLoop {
		l := *wing.standing
		l.Owner, l.Now, l.Guard = owner, now, nil
		return &l
	}
	replica := standingAs("replica-2", time.Now)
	rctx, stopReplica := context.WithCancel(context.Background())
	replicaDone := make(chan struct{})
	go func() { defer close(replicaDone); _ = replica.Run(rctx, 100*time.Millisecond) }()
	stop := func() { stopReplica(); <-replicaDone }
	t.Cleanup(stop)

	// A new hire in 销售部, another in 研发部; the sync brings them in.
	fake.AddUser(testCorp, fakewecom.User{UserID: "zhaoliu", Name: "赵六", Departments: []int{2}})
	fake.AddUser(testCorp, fakewecom.User{UserID: "sunqi", Name: "孙七", Departments: []int{3}})
	before := time.Now()
	sync()
	type standingJSON struct {
		InForce        bool `json:"in_force"`
		PendingJoiners int  `json:"pending_joiners"`
		Joiners        []struct {
			UserID   string     `json:"userid"`
			JoinedAt time.Time  `json:"joined_at"`
			SentAt   *time.Time `json:"sent_at"`
			Deadline time.Time  `json:"deadline"`
			Read     bool       `json:"read"`
		} `json:"joiners"`
		ByCycle []loops.Cycle `json:"by_cycle"`
	}
	var st standingJSON
	testenv.WaitFor(t, 15*time.Second, "the joiner enrolled and sent the card", func() bool {
		st = standingJSON{}
		return api(t, m, "GET", "/messages/"+msg+"/standing", nil, &st) == http.StatusOK && len(st.Joiners) == 1 && st.Joiners[0].SentAt != nil
	})
	j := st.Joiners[0]
	if j.UserID != "zhaoliu" || !st.InForce || st.PendingJoiners != 1 || j.JoinedAt.Before(before.Add(-time.Second)) ||
		!j.Deadline.Equal(j.JoinedAt.AddDate(0, 0, 7)) {
		t.Errorf("standing = %+v; want zhaoliu, joined now, deadline 7 days later, 1 pending", st)
	}
	if c := cardsTo(`"touser":"zhaoliu"`); len(c) != 1 || !strings.Contains(c[0], `"task_id":"`+msg+`@1000000"`) {
		t.Errorf("zhaoliu's cards = %q; want one, task_id %s@1000000", c, msg)
	}
	if c := cardsTo("sunqi"); len(c) != 0 {
		t.Errorf("sunqi (研发部) got %q; want nothing", c)
	}
	if got := len(fake.Sent()) - first; got != 1 {
		t.Errorf("messages after the sync = %d; want 1 (the joiner's card only)", got)
	}
	p = progressJSON{}
	if code := api(t, m, "GET", "/messages/"+msg+"/progress", nil, &p); code != http.StatusOK || p.Recipients != 3 {
		t.Errorf("progress = %d %+v; want 3 recipients (the denominator grows)", code, p)
	}
	// Once per member: another sync and poll enrol nobody again.
	sync()
	time.Sleep(2500 * time.Millisecond)
	if n := testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM standing_enrolments WHERE msgid = ?", msg)[0]; n != 1 || len(cardsTo(`"touser":"zhaoliu"`)) != 1 {
		t.Errorf("after a second sync: %d enrolments, %d cards to zhaoliu; want 1 and 1", n, len(cardsTo(`"touser":"zhaoliu"`)))
	}
	if n := testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM audit_events WHERE action = 'enrol' AND msgid = ?", msg)[0]; n != 1 {
		t.Errorf("enrol audit rows = %d; want 1", n)
	}
	if n := testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM ledger_blocks WHERE kind = 'enrol' AND msgid = ?", msg)[0]; n != 1 {
		t.Errorf("enrol ledger blocks = %d; want 1", n)
	}

	// zhaoliu reads and acknowledges on the page.
	time.Sleep(1100 * time.Millisecond)
	rd := newReader(t, addr, "zhaoliu")
	view := rd.open(page)
	for _, ev := range []string{"read_to_end", "acknowledged"} {
		if code, e := rd.event(page, ev, 1, view); code != 200 {
			t.Fatalf("%s = %d %s", ev, code, e)
		}
	}
	testenv.WaitFor(t, 20*time.Second, "zhaoliu's acknowledgement counted and in MySQL", func() bool {
		p = progressJSON{}
		return api(t, m, "GET", "/messages/"+msg+"/progress", nil, &p) == http.StatusOK && p.Read == 1 && p.Recipients == 3 &&
			testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM message_read_record WHERE msgid = ? AND is_read = 1", msg)[0] == 1
	})
	var rec struct {
		Joined *struct {
			JoinedAt time.Time  `json:"joined_at"`
			SentAt   *time.Time `json:"sent_at"`
			Version  int        `json:"version"`
		} `json:"joined"`
		Deliveries []struct {
			Batch  int    `json:"batch"`
			Status string `json:"status"`
		} `json:"deliveries"`
		Read   bool `json:"read"`
		Ledger []struct {
			Kind string `json:"kind"`
		} `json:"ledger"`
	}
	if code := api(t, m, "GET", "/messages/"+msg+"/evidence/zhaoliu", nil, &rec); code != http.StatusOK || rec.Joined == nil ||
		!rec.Joined.JoinedAt.Equal(j.JoinedAt) || rec.Joined.SentAt == nil || rec.Joined.Version != 1 || !rec.Read ||
		len(rec.Deliveries) != 1 || rec.Deliveries[0].Batch != 1_000_000 || rec.Deliveries[0].Status != "sent" {
		t.Errorf("zhaoliu's evidence = %d %+v; want joined at %v, told, v1, read, delivered by batch 1000000", code, rec, j.JoinedAt)
	}
	if !slices.ContainsFunc(rec.Ledger, func(e struct {
		Kind string `json:"kind"`
	}) bool {
		return e.Kind == "enrol"
	}) {
		t.Errorf("zhaoliu's ledger entries = %+v; want an enrol entry", rec.Ledger)
	}
	led, err := ledger.New(m.DB, ledger.Options{})
	testenv.Check(t, "ledger.New", err)
	if rep, err := led.Verify(context.Background(), testCorp, ledger.Day(time.Now())); err != nil || len(rep.Problems) != 0 {
		t.Errorf("ledger verify: %v %v; want clean", err, rep.Problems)
	}
	// The first recipients keep their history: zhangsan's delivery is the
	// first send's batch 0, and nobody joined in his record.
	rec.Joined, rec.Deliveries = nil, nil
	if code := api(t, m, "GET", "/messages/"+msg+"/evidence/zhangsan", nil, &rec); code != http.StatusOK || rec.Joined != nil ||
		len(rec.Deliveries) != 1 || rec.Deliveries[0].Batch != 0 {
		t.Errorf("zhangsan's evidence = %d %+v; want the first send's batch 0, not joined", code, rec)
	}
	if n := testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM follow_up_rounds WHERE msgid = ?", msg)[0] +
		testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM standing_rounds WHERE msgid = ?", msg)[0]; n != 0 {
		t.Errorf("rounds = %d; want none yet (round 1 is a day after each card)", n)
	}

	// A joiner in week 10 gets round 1 a day after their own card, not on
	// the first send's schedule (the injected clock of a loop of the
	// test's own over the same database, directory, tracker and bitmaps).
	stop()
	fake.AddUser(testCorp, fakewecom.User{UserID: "qianjiu", Name: "钱九", Departments: []int{2}})
	sync()
	testenv.WaitFor(t, 15*time.Second, "qianjiu enrolled and sent", func() bool {
		return len(cardsTo(`"touser":"qianjiu"`)) == 1 &&
			testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM standing_enrolments WHERE msgid = ? AND userid = 'qianjiu' AND sent_at IS NOT NULL", msg)[0] == 1
	})
	qSent := testenv.Column[time.Time](t, m.DB, "SELECT sent_at FROM standing_enrolments WHERE msgid = ? AND userid = 'qianjiu'", msg)[0]
	clock := qSent.Add(23 * time.Hour)
	dayLoop := standingAs("test-day", func() time.Time { return clock })
	sentBefore := len(fake.Sent())
	testenv.Check(t, "Tick 23 h on", dayLoop.Tick(context.Background()))
	if got := len(fake.Sent()) - sentBefore; got != 0 {
		t.Errorf("23 h after qianjiu's card: %d messages; want none", got)
	}
	clock = qSent.Add(24*time.Hour + time.Minute)
	testenv.Check(t, "Tick a day on", dayLoop.Tick(context.Background()))
	var round []string
	for _, s := range fake.Sent()[sentBefore:] {
		round = append(round, string(s.Raw))
	}
	if len(round) != 1 || !strings.Contains(round[0], `"touser":"qianjiu"`) || !strings.Contains(round[0], "提醒") {
		t.Errorf("a day after qianjiu's card: %q; want one reminder, to qianjiu only (zhaoliu read, the first recipients are on their own schedule)", round)
	}
	testenv.Check(t, "Tick again", dayLoop.Tick(context.Background()))
	if got := len(fake.Sent()) - sentBefore; got != 1 {
		t.Errorf("messages after a second tick = %d; want still 1 (a round once)", got)
	}
	if n := testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM follow_up_rounds WHERE msgid = ?", msg)[0]; n != 0 {
		t.Errorf("the notice's own rounds = %d; want none (its round 1 is a day after the first send, by the real clock)", n)
	}

	// lisi has the page open on version 1 when the cycle begins.
	ls := newReader(t, addr, "lisi")
	lsView := ls.open(page)

	// A cycle, a year on.
	later := time.Now().AddDate(1, 0, 1)
	loop := standingAs("test-clock", func() time.Time { return later })
	sentBefore = len(fake.Sent())
	testenv.Check(t, "Tick a year on", loop.Tick(context.Background()))
	testenv.WaitFor(t, 10*time.Second, "cycle 2 asks everyone again", func() bool {
		st = standingJSON{}
		return api(t, m, "GET", "/messages/"+msg+"/standing", nil, &st) == http.StatusOK && len(st.ByCycle) == 2
	})
	c1, c2 := st.ByCycle[0], st.ByCycle[1]
	if c1.Cycle != 1 || c1.EndedAt == nil || c1.Recipients != 4 || c1.Acknowledged != 1 || c2.Cycle != 2 || c2.Version != 2 ||
		c2.Recipients != 4 || c2.Acknowledged != 0 {
		t.Errorf("by_cycle = %+v; want cycle 1 ended 1 of 4, cycle 2 (version 2) 0 of 4", st.ByCycle)
	}
	var asked []string
	for _, s := range fake.Sent()[sentBefore:] {
		asked = append(asked, string(s.Raw))
	}
	if len(asked) != 1 || !strings.Contains(asked[0], `"touser":"lisi|qianjiu|zhangsan|zhaoliu"`) {
		t.Errorf("cycle 2's cards = %q; want one to the four of 销售部", asked)
	}
	// The reading page asks for version 2 from the moment the cycle
	// stored it: lisi's acknowledgement of version 1 is stale, and the
	// page opened again shows version 2.
	if code, e := ls.event(page, "acknowledged", 1, lsView); code != http.StatusConflict || e != "stale_version" {
		t.Errorf("lisi's acknowledgement of version 1 after cycle 2 = %d %q; want 409 stale_version", code, e)
	}
	if _, body := ls.getPage(page); !strings.Contains(body, `data-version="2"`) {
		t.Errorf("the page after cycle 2 does not serve version 2: %.300s", body)
	}
	var pc struct {
		progressJSON
		ByCycle []loops.Cycle `json:"by_cycle"`
	}
	if code := api(t, m, "GET", "/messages/"+msg+"/progress", nil, &pc); code != http.StatusOK || pc.Read != 0 || pc.Recipients != 4 ||
		len(pc.ByCycle) != 2 || pc.ByCycle[0].Acknowledged != 1 || pc.ByCycle[1].Acknowledged != 0 {
		t.Errorf("progress in cycle 2 = %d %+v; want 0 of 4 (everyone due again), by_cycle 1 then 0", code, pc)
	}
	// The list filtered to standing notices, and the rules in force for a
	// compliance officer.
	var list struct {
		Messages []struct {
			MsgID string `json:"msgid"`
		} `json:"messages"`
	}
	if code := api(t, m, "GET", "/messages?standing=true", nil, &list); code != http.StatusOK || len(list.Messages) != 1 || list.Messages[0].MsgID != msg {
		t.Errorf("GET /messages?standing=true = %d %+v; want the handbook only", code, list)
	}
	var rules struct {
		Rules []struct {
			MsgID       string `json:"msgid"`
			Recipients  int    `json:"recipients"`
			Current     int    `json:"current"`
			Cycle       int    `json:"cycle"`
			Departments []struct {
				Name       string `json:"name"`
				Recipients int    `json:"recipients"`
			} `json:"departments"`
		} `json:"rules"`
	}
	if code := api(t, m, "GET", "/standing", nil, &rules); code != http.StatusOK || len(rules.Rules) != 1 || rules.Rules[0].Recipients != 4 ||
		rules.Rules[0].Current != 0 || rules.Rules[0].Cycle != 2 || len(rules.Rules[0].Departments) == 0 {
		t.Errorf("GET /standing = %d %+v; want the handbook, 0 of 4 current in cycle 2, by department", code, rules)
	}
	code, csvBody := getRaw(t, m, "/standing.csv")
	if code != http.StatusOK || !strings.Contains(csvBody, "handbook,员工手册,2,,全部,4,0,4") || !strings.Contains(csvBody, "销售部") {
		t.Errorf("GET /standing.csv = %d %q", code, csvBody)
	}

	// Ended by an admin: nobody new is enrolled.
	if code := api(t, m, "PATCH", "/messages/"+msg+"/standing", map[string]any{"until": nil}, &st); code != http.StatusOK || st.InForce {
		t.Fatalf("end = %d %+v; want 200, not in force", code, st)
	}
	fake.AddUser(testCorp, fakewecom.User{UserID: "zhouba", Name: "周八", Departments: []int{2}})
	sync()
	time.Sleep(2500 * time.Millisecond)
	if c := cardsTo("zhouba"); len(c) != 0 {
		t.Errorf("zhouba joined after the end and got %q; want nothing", c)
	}

	// A joiner found and enrolled by a replica that died before sending
	// (its enrolment is written, its card is not) is sent by the next
	// poll, once, even after the end (it was enrolled before it).
	ctx := context.Background()
	fake.AddUser(testCorp, fakewecom.User{UserID: "crash1", Name: "甲", Departments: []int{2}})
	uids, err := m.Mapper.Assign(ctx, testCorp, []string{"crash1"})
	testenv.Check(t, "assign", err)
	mm, _, _, _, err := m.Tracker.LoadMessage(ctx, testCorp, msg)
	testenv.Check(t, "load", err)
	if n, got, err := m.Tracker.Enrol(ctx, mm, map[uint32]string{uids["crash1"]: "crash1"}, 2, time.Now(), time.Now().AddDate(0, 0, 7)); err != nil || n == 0 || len(got) != 1 {
		t.Fatalf("Enrol crash1 = %d %v %v", n, got, err)
	}
	testenv.WaitFor(t, 15*time.Second, "crash1's card sent by the next poll", func() bool {
		return len(cardsTo(`"touser":"crash1"`)) == 1 &&
			testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM standing_enrolments WHERE msgid = ? AND userid = 'crash1' AND sent_at IS NOT NULL", msg)[0] == 1
	})
	time.Sleep(2500 * time.Millisecond)
	if c := cardsTo(`"touser":"crash1"`); len(c) != 1 {
		t.Errorf("crash1's cards = %d; want 1", len(c))
	}
}

// apiJSON is apiRaw with body marshalled as JSON.
func apiJSON(tb testing.TB, m *Main, method, path string, body any) (int, map[string]any) {
	tb.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		tb.Fatal(err)
	}
	return apiRaw(tb, m, method, path, "application/json", b)
}

// getRaw GETs an API path with the token and returns the status and body.
func getRaw(tb testing.TB, m *Main, path string) (int, string) {
	tb.Helper()
	req, _ := http.NewRequest("GET", "http://"+m.DashboardAddr+"/api/v1"+path, nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
