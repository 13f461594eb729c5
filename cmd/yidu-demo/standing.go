package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/wecom"
)

// standingJoiner is the new hire the demo adds to the fake WeCom after
// its standing notice was sent (issue 51).
const standingJoiner = "newhire-01"

// showStanding sends a standing notice (常驻) to the last department,
// then a new hire joins that department in the fake WeCom and the real
// directory sync runs: within a poll the new hire gets the notice's
// card, with a deadline of their own.
func (m *Main) showStanding(ctx context.Context) error {
	r := &m.Round
	r.StandingMsgID = m.MsgID + "-standing"
	dept := max(m.Departments, 1)
	body := map[string]any{
		"msgid": r.StandingMsgID, "app": demoApp, "title": "考勤制度（常驻）", "body": "新同事请阅读考勤制度并点击我已阅读。", "send": true,
		"audience": map[string]any{"departments": []int{dept}},
		"standing": map[string]any{"join_deadline": "7d"},
	}
	code, err := m.api(ctx, http.MethodPost, "/messages", body, nil)
	if err != nil || code != http.StatusCreated {
		return fmt.Errorf("standing notice: %d %v", code, err)
	}
	m.Fake.AddUser(demoCorp, fakewecom.User{UserID: standingJoiner, Name: "新同事", Departments: []int{dept}})
	dir, err := wecom.NewDirectory(wecom.App{CorpID: demoCorp, AgentID: demoAgent, Secret: m.secret}, wecom.DirectoryOptions{})
	if err != nil {
		return err
	}
	sync, err := idmap.NewSyncer(m.App.Mapper, map[string]idmap.Directory{demoCorp: dir}, idmap.Options{Logger: m.Logger})
	if err != nil {
		return err
	}
	if _, err := sync.Sync(ctx, demoCorp); err != nil {
		return fmt.Errorf("directory sync: %w", err)
	}
	joined := time.Now()
	for m.cardsOf(r.StandingMsgID)[standingJoiner] == 0 {
		if ctx.Err() != nil || time.Since(joined) > 30*time.Second {
			return fmt.Errorf("standing notice: %s got no card within 30 s of the sync", standingJoiner)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var st struct {
		PendingJoiners int `json:"pending_joiners"`
		Joiners        []struct {
			Deadline time.Time `json:"deadline"`
		} `json:"joiners"`
	}
	if code, err := m.api(ctx, http.MethodGet, "/messages/"+url.PathEscape(r.StandingMsgID)+"/standing", nil, &st); err != nil || code != http.StatusOK || len(st.Joiners) != 1 {
		return fmt.Errorf("standing notice: %d %v %+v", code, err, st)
	}
	r.JoinerCarded, r.PendingJoiners = true, st.PendingJoiners
	fmt.Fprintf(m.Stdout, "  9. %s (常驻) to department %d; %s joined it in WeCom, a directory sync ran, and within %.1fs the new hire got its card, deadline %s (新入职待确认 %d 人)\n",
		r.StandingMsgID, dept, standingJoiner, time.Since(joined).Seconds(), st.Joiners[0].Deadline.In(yidu.Shanghai).Format("2006-01-02 15:04"), st.PendingJoiners)
	return nil
}
