package tracker

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/yidu-io/yidu"
)

// TestRemindBatch: a follow-up round's batch is Remind's card with the
// round's task_id, recorded as a reminder batch; a press on it names the
// notice (ParseTaskID). A digest is a text message to one leader.
func TestRemindBatch(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	m := e.register(t, "follow-1", yidu.Audience{UserIDs: userIDs(5)})
	inv, err := e.reg.RemindBatch(ctx, m, "follow-1@f1-0", 0, userIDs(3))
	if err != nil || len(inv) != 0 {
		t.Fatalf("RemindBatch = %v, %v", inv, err)
	}
	inv, err = e.reg.RemindBatch(ctx, m, "follow-1@f1-1", 1, []string{"u0004", "u0005"})
	if err != nil || len(inv) != 0 {
		t.Fatalf("RemindBatch = %v, %v", inv, err)
	}
	cards := sentCards(e.app.CorpID, "follow-1")
	var tasks, users []string
	for _, c := range cards {
		tasks = append(tasks, taskID(c))
		users = append(users, c.Body["touser"].(string))
		if d := c.Body["template_card"].(map[string]any)["main_title"].(map[string]any)["desc"]; d != reminderDesc {
			t.Errorf("card desc %v; want the reminder's", d)
		}
	}
	if !slices.Equal(tasks, []string{"follow-1@f1-0", "follow-1@f1-1"}) || !slices.Equal(users, []string{"u0000|u0001|u0002", "u0004|u0005"}) {
		t.Errorf("cards %v to %v", tasks, users)
	}
	if id, ok := yidu.ParseTaskID("follow-1@f1-1"); !ok || id != "follow-1" {
		t.Errorf("ParseTaskID of a round's task_id = %q, %v", id, ok)
	}
	if rows := e.sends(t, "follow-1", kindRemind); len(rows) != 2 {
		t.Errorf("remind rows = %+v; want 2", rows)
	}
	before := len(fake.Sent())
	if err := e.reg.Digest(ctx, m, "follow-1@d1-0", "u0001", "您负责的 5 人中有 2 人未读《x》\n用户4、用户5"); err != nil {
		t.Fatalf("Digest = %v", err)
	}
	sent := fake.Sent()
	if len(sent) != before+1 || sent[len(sent)-1].Body["msgtype"] != "text" || sent[len(sent)-1].Body["touser"] != "u0001" ||
		!strings.Contains(sent[len(sent)-1].Body["text"].(map[string]any)["content"].(string), "2 人未读") {
		t.Errorf("digest sent as %+v", sent[len(sent)-1].Body)
	}
	// A recalled notice takes no round.
	m.RecalledAt = m.SentAt
	if _, err := e.reg.RemindBatch(ctx, m, "follow-1@f2-0", 0, userIDs(1)); err == nil {
		t.Error("RemindBatch of a recalled notice succeeded")
	}
}
