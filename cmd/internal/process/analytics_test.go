package process

import (
	"context"
	"database/sql"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/flushd"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/retention"
)

// analyticsDoc is the file whose every sql block TestAnalyticsDoc runs.
const analyticsDoc = "../../../docs/analytics.md"

// sqlBlock is one ```sql block of the doc and the check its
// <!-- check: NAME --> comment names.
type sqlBlock struct {
	check, query string
	line         int
}

var checkComment = regexp.MustCompile(`^<!-- check: ([a-z0-9-]+) -->$`)

// docBlocks returns every ```sql block of the Markdown file at path with
// its check name, failing tb on a block without one.
func docBlocks(tb testing.TB, path string) []sqlBlock {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out []sqlBlock
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```sql" {
			continue
		}
		blk := sqlBlock{line: i + 1}
		if i > 0 {
			if m := checkComment.FindStringSubmatch(strings.TrimSpace(lines[i-1])); m != nil {
				blk.check = m[1]
			}
		}
		if blk.check == "" {
			tb.Errorf("%s:%d: sql block without a <!-- check: NAME --> line before it", path, i+1)
		}
		var q []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			q = append(q, lines[i])
		}
		blk.query = strings.Join(q, "\n")
		out = append(out, blk)
	}
	return out
}

// queryStrings runs q on conn and returns its rows as text ("NULL" for
// NULL), as a client shows them.
func queryStrings(ctx context.Context, conn *sql.Conn, q string) ([][]string, error) {
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out [][]string
	for rows.Next() {
		raw := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range raw {
			ptrs[i] = &raw[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]string, len(cols))
		for i, v := range raw {
			row[i] = "NULL"
			if v != nil {
				row[i] = string(v)
			}
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// sameCell compares a cell MySQL returned with the one expected: equal
// numbers ("57.1000" and "57.1"), equal times ("2026-03-01T09:00:00Z" and
// "2026-03-01 09:00:00"), or equal text.
func sameCell(got, want string) bool {
	if got == want {
		return true
	}
	if g, ok := new(big.Rat).SetString(got); ok {
		if w, ok := new(big.Rat).SetString(want); ok {
			return g.Cmp(w) == 0
		}
	}
	if g, ok := parseTime(got); ok {
		if w, ok := parseTime(want); ok {
			return g.Equal(w)
		}
	}
	return false
}

// parseTime reads a DATETIME as the driver gives it (RFC 3339 with
// parseTime on) or as a client prints it.
func parseTime(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

func sameRows(got, want [][]string) bool {
	return slices.EqualFunc(got, want, func(g, w []string) bool { return slices.EqualFunc(g, w, sameCell) })
}

type messageNumbers struct {
	MsgID      string  `json:"msgid"`
	Title      string  `json:"title"`
	Recipients int64   `json:"recipients"`
	Read       int64   `json:"read"`
	Percent    float64 `json:"percent"`
	BySignal   struct {
		Button     int64 `json:"button"`
		Link       int64 `json:"link"`
		EnterAgent int64 `json:"enter_agent"`
	} `json:"by_signal"`
}

type deptNumbers struct {
	ID         int64  `json:"id"`
	ParentID   int64  `json:"parent_id"`
	Name       string `json:"name"`
	Recipients int64  `json:"recipients"`
	Read       int64  `json:"read"`
}

type recipientItem struct {
	UserID      string `json:"userid"`
	Name        string `json:"name"`
	Departments []struct {
		Name string `json:"name"`
	} `json:"departments"`
	Read     bool       `json:"read"`
	ReadTime *time.Time `json:"read_time"`
	Left     bool       `json:"left"`
}

func n(v int64) string { return strconv.FormatInt(v, 10) }

func dbTime(t time.Time) string { return t.UTC().Format(time.DateTime) }

// TestAnalyticsDoc runs every sql block of docs/analytics.md against
// MariaDB, on an archive the real pipeline filled (registration through
// the API, signed callbacks to the receiver, flushd's writes), and checks
// each answer: read rate, per-department counts of direct members and the
// non-readers against the dashboard's numbers for the same notice, the
// rest against the callbacks delivered. The blocks run as an analyst
// would run them: @corp_id, @msgid and @since set on the session. It runs
// twice: with mysql.dialect auto (MariaDB: flushd writes with JSON_TABLE)
// and tidb (the CASE form), so the archive either form writes answers
// alike.
func TestAnalyticsDoc(t *testing.T) {
	blocks := docBlocks(t, analyticsDoc)
	for _, dialect := range []string{config.DialectAuto, "tidb"} {
		t.Run(dialect, func(t *testing.T) { testAnalyticsDoc(t, blocks, dialect) })
	}
}

func testAnalyticsDoc(t *testing.T, blocks []sqlBlock, dialect string) {
	m := mustRunMainWith(t, func(c *config.Config) { c.MySQL.Dialect = dialect })
	ctx := context.Background()
	seedMembers(t, m, testCorp, "alice", "bob", "carol")
	// Members sit in leaf departments only (HR 2, Marketing 4, Frontend
	// 5), so direct members and the dashboard's subtree counts agree.
	people := []directoryPerson{
		{"zhangsan", "张三", 2}, {"lisi", "李四", 2}, {"alice", "Alice", 2},
		{"wangwu", "王五", 5}, {"mallory", "Mallory", 5},
		{"bob", "Bob", 4}, {"carol", "Carol", 4},
	}
	seedDirectory(t, m, people)
	var everyone []string
	for _, p := range people {
		everyone = append(everyone, p.userID)
	}

	t0 := time.Now().Add(-15 * time.Minute).UTC().Truncate(time.Second)
	register := func(msgID, title string, sentAt time.Time, userIDs ...string) {
		t.Helper()
		reg := map[string]any{"msgid": msgID, "app": "hr", "title": title, "sent_at": sentAt,
			"audience": map[string]any{"userids": userIDs}}
		if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
			t.Fatalf("register %s = %d; want 201", msgID, code)
		}
	}
	register("notice-old", "old", t0.Add(-48*time.Hour), "zhangsan", "lisi") // before @since
	register("notice-facts", "年度政策 / policy", t0, everyone...)
	register("notice-facts-2", "second", t0.Add(time.Minute), "zhangsan", "bob")

	// Seconds after t0. Opening the app (enter_agent) is recorded but
	// does not count as read (the default read_signals).
	at := func(s int64) int64 { return t0.Unix() + s }
	events := []string{
		enterAgent("lisi", at(30)),
		enterAgent("mallory", at(40)),
		cardEvent("zhangsan", "notice-facts@0", at(60)),
		cardEvent("zhangsan", "notice-facts-2@0", at(90)),
		cardEvent("lisi", "notice-facts@0", at(150)),
		cardEvent("wangwu", "notice-facts@0", at(200)),
		cardEvent("bob", "notice-facts@0", at(610)),
	}
	for _, e := range events {
		if code := deliver(t, m, e); code != http.StatusOK {
			t.Fatalf("deliver = %d; want 200", code)
		}
	}
	get := func(path string, out any) {
		t.Helper()
		if code := api(t, m, "GET", path, nil, out); code != http.StatusOK {
			t.Fatalf("GET %s = %d", path, code)
		}
	}
	var main, second messageNumbers
	get("/messages/notice-facts", &main)
	get("/messages/notice-facts-2", &second)
	if main.Read != 4 || main.BySignal.EnterAgent != 2 || second.Read != 1 {
		t.Fatalf("dashboard: %+v, %+v; want 4 read and 2 app entries, then 1 read", main, second)
	}
	// flushd writes within its interval: wait until MySQL holds what the
	// dashboard counts.
	deadline := time.Now().Add(30 * time.Second)
	for _, msg := range []messageNumbers{main, second} {
		for {
			var read, button, enter int64
			err := m.DB.QueryRowContext(ctx, `SELECT COALESCE(SUM(is_read), 0), COUNT(button_at), COUNT(enter_at)
				FROM message_read_record WHERE corp_id = ? AND msgid = ?`, testCorp, msg.MsgID).Scan(&read, &button, &enter)
			if err != nil {
				t.Fatal(err)
			}
			if read == msg.Read && button == msg.BySignal.Button && enter == msg.BySignal.EnterAgent {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s in MySQL: read %d, button %d, enter %d; the dashboard has %+v", msg.MsgID, read, button, enter, msg)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	var depts struct {
		Departments []deptNumbers `json:"departments"`
	}
	get("/messages/notice-facts/departments", &depts)
	var all, unread struct {
		Items []recipientItem `json:"items"`
	}
	get("/messages/notice-facts/recipients?limit=1000", &all)
	get("/messages/notice-facts/recipients?state=unread&limit=1000", &unread)
	slices.SortFunc(all.Items, func(a, b recipientItem) int { return strings.Compare(a.UserID, b.UserID) })
	slices.SortFunc(unread.Items, func(a, b recipientItem) int { return strings.Compare(a.UserID, b.UserID) })
	if len(all.Items) != len(everyone) || len(unread.Items) != 3 {
		t.Fatalf("dashboard: %d recipients, %d unread; want %d, 3", len(all.Items), len(unread.Items), len(everyone))
	}

	perMessage := func(withSignals bool) [][]string {
		var want [][]string
		for _, msg := range []messageNumbers{main, second} {
			row := []string{msg.MsgID, msg.Title, n(msg.Recipients), n(msg.Read)}
			if withSignals {
				row = append(row, n(msg.BySignal.Button), n(msg.BySignal.Link), n(msg.BySignal.EnterAgent))
			} else {
				row = append(row, strconv.FormatFloat(msg.Percent, 'f', -1, 64))
			}
			want = append(want, row)
		}
		return want
	}
	// Leaf departments (no listed child), least read first, as the query
	// orders them.
	var leaves []deptNumbers
	for _, d := range depts.Departments {
		if !slices.ContainsFunc(depts.Departments, func(c deptNumbers) bool { return c.ParentID == d.ID }) {
			leaves = append(leaves, d)
		}
	}
	slices.SortFunc(leaves, func(a, b deptNumbers) int {
		if c := big.NewRat(a.Read, a.Recipients).Cmp(big.NewRat(b.Read, b.Recipients)); c != 0 {
			return c
		}
		return int(a.ID - b.ID)
	})
	var deptRows [][]string
	for _, d := range leaves {
		deptRows = append(deptRows, []string{n(d.ID), d.Name, n(d.Recipients), n(d.Read)})
	}
	var unreadRows [][]string
	for _, r := range unread.Items {
		if !r.Left {
			unreadRows = append(unreadRows, []string{r.UserID, r.Name})
		}
	}
	// The truth of the callbacks above, by UserID: the first press and
	// app entry, seconds after t0 (0: none).
	truth := map[string]struct{ button, enter int64 }{
		"zhangsan": {60, 0}, "lisi": {150, 30}, "wangwu": {200, 0}, "mallory": {0, 40}, "bob": {610, 0},
	}
	var facts [][]string
	for _, r := range all.Items {
		var names []string
		for _, d := range r.Departments {
			names = append(names, d.Name)
		}
		tr := truth[r.UserID]
		row := []string{r.UserID, r.Name, strings.Join(names, ", "), "0", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL"}
		if r.Read {
			if r.ReadTime == nil {
				t.Fatalf("dashboard: %s read without a read_time after the flush", r.UserID)
			}
			row[3], row[4], row[5], row[9] = "1", dbTime(*r.ReadTime), "button", n(r.ReadTime.Unix()-t0.Unix())
		}
		if tr.button != 0 {
			row[6] = dbTime(time.Unix(at(tr.button), 0))
		}
		if tr.enter != 0 {
			row[8] = dbTime(time.Unix(at(tr.enter), 0))
		}
		facts = append(facts, row)
	}

	// One follow-up round, as the engine records it (reminder_log,
	// migration 00012), 100 s after t0 to who was unread then: lisi
	// (read at 150 s), alice, wangwu (200 s), mallory (only opened the
	// app), bob (610 s), carol; mallory's reminder WeCom refused.
	remindedAt := time.Unix(at(100), 0)
	for i, who := range []string{"alice", "bob", "carol", "lisi", "mallory", "wangwu"} {
		outcome := "sent"
		if who == "mallory" {
			outcome = "invalid"
		}
		if _, err := m.DB.ExecContext(ctx, `INSERT INTO reminder_log (corp_id, msgid, round, kind, uid, userid, batch, reminded_at, outcome)
			SELECT corp_id, 'notice-facts', 1, 'reminder', uid, userid, ?, ?, ? FROM users WHERE corp_id = ? AND userid = ?`,
			i/3, dbTime(remindedAt), outcome, testCorp, who); err != nil {
			t.Fatal(err)
		}
	}

	// Each check returns the rows its block must answer.
	checks := map[string]func() [][]string{
		// Reached: 5 (mallory refused); lisi, wangwu, bob read within 1 h.
		"reminder-effect": func() [][]string { return [][]string{{"1", "5", "3", "3", "2"}} },
		"reminded-people": func() [][]string {
			return [][]string{
				{"1", "alice", "sent", "0", "NULL"}, {"1", "bob", "sent", "1", "510"}, {"1", "carol", "sent", "0", "NULL"},
				{"1", "lisi", "sent", "1", "50"}, {"1", "mallory", "invalid", "0", "NULL"}, {"1", "wangwu", "sent", "1", "100"},
			}
		},
		"rate-per-message":      func() [][]string { return perMessage(false) },
		"rate-per-department":   func() [][]string { return deptRows },
		"time-to-read":          func() [][]string { return [][]string{{"1", "1"}, {"2", "1"}, {"3", "1"}, {"10", "1"}} },
		"not-read":              func() [][]string { return unreadRows },
		"read-facts":            func() [][]string { return facts },
		"by-signal-per-message": func() [][]string { return perMessage(true) },
		"first-signal":          func() [][]string { return [][]string{{"button", n(main.Read)}} },
		"app-only":              func() [][]string { return [][]string{{"mallory", "Mallory", dbTime(time.Unix(at(40), 0))}} },
		"enter-to-button":       func() [][]string { return [][]string{{"2", "1"}} }, // lisi: 30 s → 150 s
		"signal-choices": func() [][]string {
			return [][]string{{n(main.BySignal.Button), n(main.BySignal.Button + main.BySignal.Link), "5"}}
		},
		// Medians: (150 + 200) / 2 and 30; 90 % of 7 is 7 reads, of 2 is 2: not reached.
		"message-summary": func() [][]string {
			return [][]string{
				{main.MsgID, main.Title, n(main.Recipients), n(main.Read), strconv.FormatFloat(main.Percent, 'f', -1, 64), "175", "NULL"},
				{second.MsgID, second.Title, n(second.Recipients), n(second.Read), strconv.FormatFloat(second.Percent, 'f', -1, 64), "30", "NULL"},
			}
		},
		// After the purge (below): what message-summary said, with the
		// per-signal counts.
		"summaries": func() [][]string {
			var want [][]string
			for _, msg := range []struct {
				messageNumbers
				sentAt time.Time
				median string
			}{{main, t0, "175"}, {second, t0.Add(time.Minute), "30"}} {
				want = append(want, []string{msg.MsgID, msg.Title, dbTime(msg.sentAt), n(msg.Recipients), n(msg.Read),
					strconv.FormatFloat(msg.Percent, 'f', -1, 64), msg.median, "NULL",
					n(msg.BySignal.Button), n(msg.BySignal.Link), n(msg.BySignal.EnterAgent)})
			}
			return want
		},
		// The three registrations above, by the e2e token (an admin of
		// the corp): one compose row each, with their recipients; and the
		// token's own grant, recorded at start.
		// The two recipient reads above are personal data: one
		// recipients row each, with the people they listed.
		"audit-by-actor": func() [][]string {
			return [][]string{{"e2e", "compose", "ok", "3", "11"}, {"e2e", "recipients", "ok", "2", n(int64(len(all.Items) + len(unread.Items)))},
				{"yidu.yaml", "role_change", "ok", "1", "1"}}
		},
		"audit-message": func() [][]string {
			return [][]string{{"compose", "e2e", "token", "admin", n(main.Recipients), "ok"},
				{"recipients", "e2e", "token", "admin", n(int64(len(all.Items))), "ok"},
				{"recipients", "e2e", "token", "admin", n(int64(len(unread.Items))), "ok"}}
		},
		// The e2e token's grant and dashboard.leaders_see (on by
		// default), recorded when the dashboard started.
		"role-changes": func() [][]string {
			return [][]string{{"admin", testCorp, "grant admin of " + testCorp + " to token e2e"},
				{"viewer", "", "grant viewer of * to leaders department_leaders"}}
		},
		// The dashboard's numbers of the notice, by_signal included.
		"by-signal": func() [][]string {
			return [][]string{{n(main.Recipients), n(main.Read), n(main.BySignal.Button), n(main.BySignal.Link), n(main.BySignal.EnterAgent)}}
		},
	}

	conn, err := m.DB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET @corp_id = ?, @msgid = ?, @since = ?", testCorp, "notice-facts", dbTime(t0.Add(-time.Second))); err != nil {
		t.Fatal(err)
	}
	// message_summary's median is MariaDB's PERCENTILE_CONT(0.5).
	for _, msg := range []string{"notice-facts", "notice-facts-2"} {
		var median, pc float64
		if err := conn.QueryRowContext(ctx, `SELECT median_seconds, (SELECT DISTINCT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY seconds_to_read) OVER ()
			FROM read_facts WHERE corp_id = @corp_id AND msgid = ? AND is_read = 1) FROM message_summary WHERE corp_id = @corp_id AND msgid = ?`,
			msg, msg).Scan(&median, &pc); err != nil {
			t.Fatal(err)
		}
		if median != pc {
			t.Errorf("%s: message_summary median_seconds %v; PERCENTILE_CONT(0.5) %v", msg, median, pc)
		}
	}
	// The reading page's signals of zhangsan on notice-facts: opened, read
	// to the end and acknowledged version 1, acknowledged version 2.
	pageAt := time.Unix(at(60), 0)
	for _, ps := range []struct{ source, version int }{{3, 1}, {5, 1}, {6, 1}, {6, 2}} {
		if _, err := m.DB.ExecContext(ctx, `INSERT INTO page_signals (corp_id, msgid, uid, source, version, seen_at, ip, user_agent)
			SELECT corp_id, 'notice-facts', uid, ?, ?, ?, '203.0.113.9', 'wxwork/4.1' FROM users WHERE corp_id = ? AND userid = 'zhangsan'`,
			ps.source, ps.version, dbTime(pageAt), testCorp); err != nil {
			t.Fatal(err)
		}
	}
	checks["page-acknowledged"] = func() [][]string {
		return [][]string{{"zhangsan", "张三", "1", dbTime(pageAt), "203.0.113.9", "wxwork/4.1"}, {"zhangsan", "张三", "2", dbTime(pageAt), "203.0.113.9", "wxwork/4.1"}}
	}
	checks["page-per-version"] = func() [][]string { return [][]string{{"1", "1", "1", "1"}, {"2", "0", "0", "1"}} }
	ran := map[string]bool{}
	for _, b := range blocks {
		if b.check == "" {
			continue
		}
		check, ok := checks[b.check]
		if !ok {
			t.Errorf("%s:%d: unknown check %q", analyticsDoc, b.line, b.check)
			continue
		}
		ran[b.check] = true
		if b.check == "summaries" {
			// The retention section's query reads what a purge kept: purge
			// the corp's notices (the last block; nothing after it may need
			// their detail).
			rep, err := retention.Purge(ctx, m.DB, retention.PurgeOptions{Before: time.Now().Add(time.Hour), CorpID: testCorp, Execute: true}, nil)
			if err != nil || rep.Messages != 3 || rep.Summaries != 3 {
				t.Fatalf("Purge = %+v, %v; want 3 notices purged, 3 summaries kept", rep, err)
			}
			if i := slices.IndexFunc(blocks, func(x sqlBlock) bool { return x.check == "summaries" }); i != len(blocks)-1 {
				t.Errorf("%s:%d: the summaries block must be the last", analyticsDoc, b.line)
			}
		}
		got, err := queryStrings(ctx, conn, b.query)
		if err != nil {
			t.Errorf("%s:%d (%s): %v\n%s", analyticsDoc, b.line, b.check, err, b.query)
			continue
		}
		if want := check(); !sameRows(got, want) {
			t.Errorf("%s:%d (%s) answered\n%q\nwant\n%q", analyticsDoc, b.line, b.check, got, want)
		}
	}
	for name := range checks {
		if !ran[name] {
			t.Errorf("check %q: no sql block of %s names it", name, analyticsDoc)
		}
	}

}

// TestFlushStatement: mysql.dialect auto asks the server (MariaDB 10.11
// here: JSON_TABLE); a configured dialect is taken as it is.
func TestFlushStatement(t *testing.T) {
	db := testenv.MySQL(t)
	log := slog.New(slog.DiscardHandler)
	for _, tt := range []struct {
		dialect string
		want    flushd.Statement
	}{
		{config.DialectAuto, flushd.StatementJSONTable},
		{"mariadb", flushd.StatementJSONTable},
		{"mysql", flushd.StatementJSONTable},
		{"tidb", flushd.StatementCase},
	} {
		if got, err := flushStatement(context.Background(), db, tt.dialect, log); err != nil || got != tt.want {
			t.Errorf("flushStatement(%q) = %v, %v; want %v", tt.dialect, got, err, tt.want)
		}
	}
}
