package bitmap

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu/internal/testenv"
)

// commands counts the commands a client sends (pipelines' each).
type commands struct{ n atomic.Int64 }

func (c *commands) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *commands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func TestRecipientsCopy(t *testing.T) {
	s, rdb := mustStore(t, Options{})
	var sent commands
	rdb.AddHook(&sent)
	ctx := context.Background()
	testenv.Check(t, "PutMessage", s.PutMessage(ctx, testMessage("m", 7, time.Now()), uids(1, 2)))
	now := time.Unix(1_800_000_000, 0)
	r := NewRecipients(s, 10*time.Second, 2, func() time.Time { return now })

	ask := func(msg string, uid uint32) (is, found bool, cmds int64) {
		t.Helper()
		before := sent.n.Load()
		is, found, err := r.IsRecipient(ctx, testCorp, msg, uid)
		testenv.Check(t, "IsRecipient", err)
		return is, found, sent.n.Load() - before
	}
	steps := []struct {
		name      string
		before    func()
		msg       string
		uid       uint32
		is, found bool
		maxCmds   int64 // commands sent to Redis for the answer
	}{
		{name: "first open reads the copy", msg: "m", uid: 1, is: true, found: true, maxCmds: 1},
		{name: "a recipient from the copy", msg: "m", uid: 2, is: true, found: true, maxCmds: 0},
		{name: "again from the copy", msg: "m", uid: 1, is: true, found: true, maxCmds: 0},
		{name: "not in the copy: Redis answers no", msg: "m", uid: 9, is: false, found: true, maxCmds: 2},
		{name: "a joiner added since is found at once", before: func() {
			testenv.Check(t, "PutMessage", s.PutMessage(ctx, testMessage("m", 7, time.Now()), uids(3)))
		}, msg: "m", uid: 3, is: true, found: true, maxCmds: 2},
		{name: "the copy read again after refresh holds the joiner", before: func() {
			now = now.Add(10 * time.Second)
		}, msg: "m", uid: 3, is: true, found: true, maxCmds: 1},
		{name: "then from the copy", msg: "m", uid: 3, is: true, found: true, maxCmds: 0},
		{name: "a message Redis lacks: not found (MySQL answers)", msg: "gone", uid: 1, is: false, found: false, maxCmds: 3},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		is, found, cmds := ask(st.msg, st.uid)
		if is != st.is || found != st.found {
			t.Errorf("%s: IsRecipient(%s, %d) = %v, %v; want %v, %v", st.name, st.msg, st.uid, is, found, st.is, st.found)
		}
		if cmds > st.maxCmds {
			t.Errorf("%s: %d Redis commands; want at most %d", st.name, cmds, st.maxCmds)
		}
		// The copy agrees with Redis's own answer.
		if wantIs, wantFound, err := s.IsRecipient(ctx, testCorp, st.msg, st.uid); err != nil || wantIs != is || wantFound != found {
			t.Errorf("%s: Store.IsRecipient = %v, %v, %v; the copy said %v, %v", st.name, wantIs, wantFound, err, is, found)
		}
	}
	// At most max messages are held: the least recently used goes.
	for _, m := range []string{"a", "b", "c"} {
		testenv.Check(t, "PutMessage", s.PutMessage(ctx, testMessage(m, 7, time.Now()), uids(1)))
		now = now.Add(time.Second)
		ask(m, 1)
	}
	r.mu.Lock()
	n := len(r.copies)
	r.mu.Unlock()
	if n > 2 {
		t.Errorf("%d copies held; want at most 2", n)
	}
}
