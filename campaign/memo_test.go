package campaign

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
)

// countingDir is directory, counting its expansions.
type countingDir struct {
	directory
	n atomic.Int64
}

func (d *countingDir) Expand(ctx context.Context, corp string, a yidu.Audience) (yidu.Expansion, error) {
	d.n.Add(1)
	return d.directory.Expand(ctx, corp, a)
}

// countingAudiences lets every audience through, counting the checks.
type countingAudiences struct {
	allowAll
	n atomic.Int64
}

func (c *countingAudiences) CheckAudience(ctx context.Context, p *access.Principal, corp, app string, au yidu.Audience) error {
	c.n.Add(1)
	return c.allowAll.CheckAudience(ctx, p, corp, app, au)
}

// TestPostAsksOnce: a notice posted by a sender kept to an audience, that
// needs approval, is kept as a draft asking for it after one check of its
// audience against the sender's and one count of whom it reaches (issue
// 47: the same POST used to check it three times and count it twice).
// A second post asks again: the answers last one act.
func TestPostAsksOnce(t *testing.T) {
	f := newServiceFixture(t)
	big := yidu.App{Name: "hr-big", CorpID: testApp.CorpID, AgentID: 1000003, Approval: &yidu.Approval{Over: 1, Approvers: []string{"boss"}}}
	dir := &countingDir{}
	st, err := store.New(f.db, store.Options{Directory: dir, Apps: []yidu.App{testApp, big}, Now: f.c.now})
	testenv.Check(t, "store.New", err)
	aud := &countingAudiences{}
	s := f.service(t, "a")
	s.o.Registrar, s.o.Audiences, s.st = &echoRegistrar{seen: map[string]bool{}}, aud, st
	kept := access.NewPrincipal("hr", access.KindToken, false, []access.Grant{{Role: yidu.RoleSender,
		Scope: yidu.Scope{Corp: testApp.CorpID, Apps: []string{big.Name}, Audience: yidu.SenderAudience{Departments: []int64{2}}}}})
	post := func(id string) Post {
		return Post{Outgoing: Outgoing{Registration: yidu.Registration{MsgID: id, App: big, Title: "考勤制度", Body: "请阅读",
			Audience: yidu.Audience{Departments: []int64{2}}, Send: true}}}
	}
	for i, id := range []string{"memo-1", "memo-2"} {
		res, err := s.Post(context.Background(), kept, post(id))
		if err != nil || !res.Approval {
			t.Fatalf("Post %s = approval %v, %v; want kept asking for approval", id, res.Approval, err)
		}
		if got, want := aud.n.Load(), int64(i+1); got != want {
			t.Errorf("after post %d: %d checks of the audience against the sender's; want %d", i+1, got, want)
		}
		if got, want := dir.n.Load(), int64(i+1); got != want {
			t.Errorf("after post %d: %d expansions of the audience; want %d", i+1, got, want)
		}
	}
}
