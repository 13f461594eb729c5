package wecomsim

import (
	"encoding/xml"
	"testing"
	"time"
)

func TestEventXML(t *testing.T) {
	at := time.Unix(1700000000, 0)
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{"enter_agent", Event{Kind: KindEnterAgent, UserID: "lisi", CreateTime: at},
			`<xml><ToUserName><![CDATA[corp]]></ToUserName><FromUserName><![CDATA[lisi]]></FromUserName><CreateTime>1700000000</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[enter_agent]]></Event><EventKey></EventKey><AgentID>7</AgentID></xml>`},
		{"rename", Event{Kind: KindContact, ChangeType: "update_user", UserID: "old", NewUserID: "new", Departments: []int64{1, 2}, CreateTime: at},
			`<xml><ToUserName><![CDATA[corp]]></ToUserName><FromUserName><![CDATA[sys]]></FromUserName><CreateTime>1700000000</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[change_contact]]></Event><ChangeType><![CDATA[update_user]]></ChangeType><UserID><![CDATA[old]]></UserID><NewUserID><![CDATA[new]]></NewUserID><Department><![CDATA[1,2]]></Department></xml>`},
		{"delete", Event{Kind: KindContact, ChangeType: "delete_user", UserID: "gone", CreateTime: at},
			`<xml><ToUserName><![CDATA[corp]]></ToUserName><FromUserName><![CDATA[sys]]></FromUserName><CreateTime>1700000000</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[change_contact]]></Event><ChangeType><![CDATA[delete_user]]></ChangeType><UserID><![CDATA[gone]]></UserID></xml>`},
	}
	for _, tt := range tests {
		got, err := tt.ev.XML("corp", 7)
		if err != nil || string(got) != tt.want {
			t.Errorf("%s: XML() = %s, %v;\nwant %s", tt.name, got, err, tt.want)
		}
	}
	if _, err := (Event{Kind: KindEnterAgent, UserID: "a\x00"}).XML("corp", 7); err == nil {
		t.Errorf("XML of a UserID with NUL: nil error; want one")
	}
	if _, err := (Event{}).XML("corp", 7); err == nil {
		t.Errorf("XML of an event without kind: nil error; want one")
	}
}

func TestCardReadsTaskIDs(t *testing.T) {
	users := make([]string, 2001)
	for i := range users {
		users[i] = UserID(i)
	}
	evs := CardReads(users, "m1", "read", time.Unix(100, 0), time.Second)
	for _, c := range []struct {
		i    int
		task string
	}{{0, "m1@0"}, {999, "m1@0"}, {1000, "m1@1"}, {2000, "m1@2"}} {
		if evs[c.i].TaskID != c.task || evs[c.i].CreateTime.Unix() != int64(100+c.i) {
			t.Errorf("event %d = %s at %d; want %s at %d", c.i, evs[c.i].TaskID, evs[c.i].CreateTime.Unix(), c.task, 100+c.i)
		}
	}
}

func TestCompany(t *testing.T) {
	c := Company("corp", 1000002, "s", 200, 60)
	if len(c.Users) != 200 || len(c.Departments) != 60 {
		t.Fatalf("Company: %d users, %d departments; want 200, 60", len(c.Users), len(c.Departments))
	}
	ids := map[int]bool{}
	for _, d := range c.Departments {
		if d.ID != 1 && !ids[d.ParentID] {
			t.Errorf("department %d's parent %d comes later or does not exist", d.ID, d.ParentID)
		}
		ids[d.ID] = true
	}
	for _, u := range c.Users {
		for _, d := range u.Departments {
			if !ids[d] {
				t.Errorf("user %s in unknown department %d", u.UserID, d)
			}
		}
	}
}

// FuzzEventXML checks that any member or task id (outside input in a load
// file) comes back out of the XML unchanged.
func FuzzEventXML(f *testing.F) {
	f.Add("zhangsan", "m1@0", "read")
	f.Add("a]]>b", "x<y&z", "")
	f.Add("张三", "", "\x00")
	f.Fuzz(func(t *testing.T, user, task, key string) {
		ev := Event{Kind: KindCard, UserID: user, TaskID: task, EventKey: key, CreateTime: time.Unix(1, 0)}
		b, err := ev.XML("corp", 1)
		if err != nil {
			if validText(user) && validText(task) && validText(key) {
				t.Fatalf("XML(%q, %q, %q): %v", user, task, key, err)
			}
			return // XML cannot carry these characters
		}
		var got eventXML
		if err := xml.Unmarshal(b, &got); err != nil {
			t.Fatalf("Unmarshal(%s): %v", b, err)
		}
		if got.FromUserName.V != user || got.TaskID.V != task || got.EventKey.V != key {
			t.Errorf("round trip of (%q, %q, %q) = (%q, %q, %q)", user, task, key, got.FromUserName.V, got.TaskID.V, got.EventKey.V)
		}
	})
}

func TestContactChangesAndEnterAgents(t *testing.T) {
	evs := ContactChanges([]string{"a", "b", "c"}, time.Unix(100, 0), time.Second)
	want := []struct{ change, newID string }{{"create_user", ""}, {"update_user", "b_r"}, {"delete_user", ""}}
	for i, w := range want {
		if evs[i].Kind != KindContact || evs[i].ChangeType != w.change || evs[i].NewUserID != w.newID {
			t.Errorf("ContactChanges[%d] = %+v; want %s %q", i, evs[i], w.change, w.newID)
		}
	}
	if e := EnterAgents([]string{"a", "b"}, time.Unix(100, 0), time.Second); e[1].Kind != KindEnterAgent || e[1].UserID != "b" || e[1].CreateTime.Unix() != 101 {
		t.Errorf("EnterAgents[1] = %+v", e[1])
	}
}
