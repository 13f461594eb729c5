package main

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/yidu-io/yidu/callback/wxcrypt"
	"github.com/yidu-io/yidu/internal/rig"
)

// request is one pre-built callback delivery: the raw query
// (msg_signature, timestamp, nonce) and the encrypted body.
type request struct {
	rawQuery string
	body     []byte
}

// workload is the 9:00 storm for one notice: every recipient's
// template_card_event, plus WeCom retries (byte-identical re-deliveries)
// and duplicates (the member pressed again later: a new event), each
// placed after its original.
type workload struct {
	msgID      string
	reqs       []request
	retries    int
	duplicates int
	bytes      int64
}

// readTimes returns the CreateTime of recipient i's first press and of a
// duplicate press: the only read_time values MySQL may hold for i.
func readTimes(sentAt time.Time, i int) (first, again int64) {
	first = sentAt.Unix() + 60 + int64(i%600)
	return first, first + 30
}

func cardEvent(app rig.WeComApp, user, taskID string, at int64) []byte {
	return fmt.Appendf(nil, `<xml><ToUserName><![CDATA[%s]]></ToUserName><FromUserName><![CDATA[%s]]></FromUserName><CreateTime>%d</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[template_card_event]]></Event><EventKey><![CDATA[%s]]></EventKey><TaskId><![CDATA[%s]]></TaskId><CardType><![CDATA[button_interaction]]></CardType><ResponseCode><![CDATA[rc%d]]></ResponseCode><AgentID>%d</AgentID></xml>`,
		app.CorpID, user, at, app.ReadButtonKey, taskID, at, app.AgentID)
}

// buildWorkload encrypts and signs every callback of a storm on msgID for
// users recipients, with extra (a fraction of users) retries and
// duplicates, half each. Signing uses the current time as WeCom does, so
// the workload must be sent within the receiver's timestamp window.
func buildWorkload(app rig.WeComApp, msgID string, users int, extra float64, sentAt time.Time, seed uint64) (*workload, error) {
	c, err := wxcrypt.New(app.Token, app.EncodingAESKey, app.CorpID)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	nExtra := int(float64(users)*extra + 0.5)
	w := &workload{msgID: msgID, retries: nExtra / 2, duplicates: nExtra - nExtra/2}

	// Slot k of the send order is filled by a recipient; extras get a key
	// after their original's slot and are sorted in.
	type item struct {
		key   float64
		user  int
		again bool // a second press (new CreateTime, new nonce)
		retry int  // ≥0: a byte-identical re-delivery of this slot's original
	}
	order := rng.Perm(users)
	items := make([]item, 0, users+nExtra)
	for k, u := range order {
		items = append(items, item{key: float64(k), user: u, retry: -1})
	}
	for e := range nExtra {
		k := rng.IntN(users)
		key := float64(k) + 0.5 + rng.Float64()*float64(users-k)
		if e < w.retries {
			items = append(items, item{key: key, user: order[k], retry: k})
		} else {
			items = append(items, item{key: key, user: order[k], again: true, retry: -1})
		}
	}

	// Encrypt every distinct event in parallel; retries copy their original.
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	built := make([]request, len(items))
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for g := range workers {
		wg.Go(func() {
			for i := g; i < len(items); i += workers {
				it := items[i]
				if it.retry >= 0 {
					continue
				}
				at, again := readTimes(sentAt, it.user)
				if it.again {
					at = again
				}
				task := msgID + "@" + strconv.Itoa(it.user/1000)
				q, body, err := c.Post(cardEvent(app, userIDs.ID(it.user), task, at), app.AgentID, ts, "n"+strconv.Itoa(i))
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				built[i] = request{rawQuery: q.Encode(), body: body}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, fmt.Errorf("build workload: %w", firstErr)
	}
	for i, it := range items {
		if it.retry >= 0 {
			built[i] = built[it.retry] // slot k holds item k: originals come first
		}
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case items[a].key < items[b].key:
			return -1
		case items[a].key > items[b].key:
			return 1
		}
		return 0
	})
	w.reqs = make([]request, len(idx))
	for j, i := range idx {
		w.reqs[j] = built[i]
		w.bytes += int64(len(built[i].rawQuery) + len(built[i].body))
	}
	return w, nil
}
