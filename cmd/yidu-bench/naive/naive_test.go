package naive

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/yidu-io/yidu/callback/wxcrypt"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/rig"
	"github.com/yidu-io/yidu/internal/testenv"
)

var app = rig.WeComApp{Name: "hr", CorpID: "wx5823bf96d3bd56c7", AgentID: 218, Token: "QDG6eK",
	EncodingAESKey: "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C", ReadButtonKey: "yidu_read"}

func card(user, key string, at int64) string {
	return fmt.Sprintf(`<xml><ToUserName><![CDATA[%s]]></ToUserName><FromUserName><![CDATA[%s]]></FromUserName><CreateTime>%d</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[template_card_event]]></Event><EventKey><![CDATA[%s]]></EventKey><TaskId><![CDATA[m1@0]]></TaskId><CardType><![CDATA[button_interaction]]></CardType><ResponseCode><![CDATA[rc]]></ResponseCode><AgentID>218</AgentID></xml>`,
		app.CorpID, user, at, key)
}

// TestServer delivers a sequence of callbacks and checks the status and
// the hot counter after each: only a recipient's first valid press counts,
// hostile input is refused and writes nothing.
func TestServer(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	ids, err := idmap.New(db, idmap.Options{})
	testenv.Check(t, "idmap.New", err)
	if _, err := ids.Assign(ctx, app.CorpID, []string{"alice", "bob"}); err != nil {
		t.Fatal(err)
	}
	sentAt := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	if n, err := Setup(ctx, db, app, "m1", sentAt); err != nil || n != 2 {
		t.Fatalf("Setup = %d, %v; want 2 recipients", n, err)
	}
	srv, err := New(Options{App: app, DB: db, IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Routes())
	defer ts.Close()

	good, _ := wxcrypt.New(app.Token, app.EncodingAESKey, app.CorpID)
	forged, _ := wxcrypt.New("other-token", app.EncodingAESKey, app.CorpID)
	now := strconv.FormatInt(time.Now().Unix(), 10)
	at := sentAt.Unix() + 60
	post := func(c *wxcrypt.Crypter, xml, timestamp string) int {
		q, body, err := c.Post([]byte(xml), app.AgentID, timestamp, "n")
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(ts.URL+"/wecom/callback/hr?"+q.Encode(), "text/xml", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	steps := []struct {
		name      string
		c         *wxcrypt.Crypter
		xml, ts   string
		want      int
		wantCount int64
	}{
		{"forged", forged, card("alice", "yidu_read", at), now, 401, 0},
		{"stale timestamp", good, card("alice", "yidu_read", at), "1409659813", 401, 0},
		{"other button", good, card("alice", "other", at), now, 200, 0},
		{"unknown member", good, card("mallory", "yidu_read", at), now, 200, 0},
		{"alice reads", good, card("alice", "yidu_read", at), now, 200, 1},
		{"alice again", good, card("alice", "yidu_read", at+30), now, 200, 1},
		{"bob reads", good, card("bob", "yidu_read", at+5), now, 200, 2},
	}
	for _, s := range steps {
		if got := post(s.c, s.xml, s.ts); got != s.want {
			t.Errorf("%s: status %d; want %d", s.name, got, s.want)
		}
		if n, err := ReadCount(ctx, db, app.CorpID, "m1"); err != nil || n != s.wantCount {
			t.Errorf("%s: read_count %d, %v; want %d", s.name, n, err, s.wantCount)
		}
	}
	var readAt time.Time
	if err := db.QueryRow(`SELECT r.read_time FROM message_read_record r JOIN users u ON u.corp_id = r.corp_id AND u.uid = r.uid
		WHERE r.msgid = 'm1' AND u.userid = 'alice' AND r.is_read = 1`).Scan(&readAt); err != nil {
		t.Fatal(err)
	}
	if readAt.Unix() != at {
		t.Errorf("alice read_time %v; want the first press %v", readAt.Unix(), at)
	}
	if s := srv.Stats(); s.Reads != 2 || s.Transactions != 3 || s.Updates != 5 {
		t.Errorf("Stats = %+v; want 2 reads, 3 transactions, 5 UPDATEs", s)
	}
}
