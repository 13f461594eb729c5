package loops

import (
	"context"
	"fmt"
	"html"
	"slices"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
)

// MaxDigestNames is how many non-readers one leader's digest card names;
// the rest are counted, and the leader's scoped page lists them all.
const MaxDigestNames = 10

// Group is what one leader (or the fallback) is told after a round: the
// notice's recipients who escalate to them, and those of them who have
// not read.
type Group struct {
	People *roaring.Bitmap
	Unread *roaring.Bitmap
}

// Escalation is the digests of one round: one per leader, by uid, and one
// for the fallback (apps[].escalation_fallback) of the people no leader
// sits above.
type Escalation struct {
	Leaders  map[uint32]*Group
	Fallback *Group
}

// Escalate assigns each recipient (the notice's audience at send time,
// without those who left) to the nearest leader above them: a leader of
// their own department counts unless the recipient is that leader, so a
// leader is listed to their own leader, never to themselves. A member of
// several departments goes to the nearest leader of each. Departments
// with no leader up to the root go to the fallback. Only groups with a
// non-reader are kept: a leader whose people have all read gets no card.
func Escalate(org *yidu.Org, recipients, read *roaring.Bitmap) Escalation {
	out := Escalation{Leaders: map[uint32]*Group{}}
	nearest := map[int64][]uint32{} // dept → leaders at or above it (first dept up that has any), memo
	var up func(d int64, depth int) []uint32
	up = func(d int64, depth int) []uint32 {
		if d == 0 || depth > 64 { // a cycle in a broken tree ends the walk
			return nil
		}
		if l, ok := nearest[d]; ok {
			return l
		}
		l := org.Leaders[d]
		if len(l) == 0 {
			l = up(org.Parent(d), depth+1)
		}
		nearest[d] = l
		return l
	}
	// leadersFor is the nearest leaders other than uid from d up.
	leadersFor := func(uid uint32, d int64) []uint32 {
		for depth := 0; d != 0 && depth <= 64; depth++ {
			l := up(d, 0)
			if len(l) == 0 {
				return nil
			}
			if others := slices.DeleteFunc(slices.Clone(l), func(x uint32) bool { return x == uid }); len(others) > 0 {
				return others
			}
			// uid is the only leader there: climb above the department
			// that named them.
			d = org.Parent(leaderDept(org, d, uid))
		}
		return nil
	}
	add := func(g *Group, uid uint32, unread bool) {
		g.People.Add(uid)
		if unread {
			g.Unread.Add(uid)
		}
	}
	newGroup := func() *Group { return &Group{People: roaring.New(), Unread: roaring.New()} }
	fallback := newGroup()
	it := recipients.Iterator()
	for it.HasNext() {
		uid := it.Next()
		unread := !read.Contains(uid)
		var to []uint32
		for _, d := range org.Memberships[uid] {
			to = append(to, leadersFor(uid, d)...)
		}
		slices.Sort(to)
		to = slices.Compact(to)
		if len(to) == 0 {
			add(fallback, uid, unread)
			continue
		}
		for _, l := range to {
			g := out.Leaders[l]
			if g == nil {
				g = newGroup()
				out.Leaders[l] = g
			}
			add(g, uid, unread)
		}
	}
	for l, g := range out.Leaders {
		if g.Unread.IsEmpty() {
			delete(out.Leaders, l)
		}
	}
	if !fallback.Unread.IsEmpty() {
		out.Fallback = fallback
	}
	return out
}

// leaderDept is the department at or above d whose leaders include uid.
func leaderDept(org *yidu.Org, d int64, uid uint32) int64 {
	for depth := 0; d != 0 && depth <= 64; depth++ {
		if slices.Contains(org.Leaders[d], uid) {
			return d
		}
		d = org.Parent(d)
	}
	return d
}

// DigestLinkText is the words of the digest's link to the leader's page.
const DigestLinkText = "查看我负责的人员"

// DigestText is the digest card's text for g: "您负责的 40 人中有 12 人未读
// 《新考勤制度》" and up to MaxDigestNames of their names, in uid order
// (name gives each uid's display name).
func DigestText(title string, g *Group, name func(uid uint32) string) (headline string, names string) {
	headline = fmt.Sprintf("您负责的 %d 人中有 %d 人未读《%s》", g.People.GetCardinality(), g.Unread.GetCardinality(), title)
	var list []string
	it := g.Unread.Iterator()
	for it.HasNext() && len(list) < MaxDigestNames {
		list = append(list, name(it.Next()))
	}
	names = strings.Join(list, "、")
	if n := g.Unread.GetCardinality(); n > MaxDigestNames {
		names += fmt.Sprintf(" 等 %d 人", n)
	}
	return headline, names
}

// escalate sends each leader's digest of the round once: a digest is
// recorded in reminder_log (kind digest) before it is sent, and one
// already recorded is never sent again.
func (r *Rounds) escalate(ctx context.Context, n notice, round int) error {
	org, err := r.Org.Org(ctx, n.corpID)
	if err != nil {
		return fmt.Errorf("campaign: org: %w", err)
	}
	rec, _, err := r.Reads.RecipientBitmap(ctx, n.corpID, n.msgID)
	if err != nil {
		return fmt.Errorf("campaign: recipients: %w", err)
	}
	read, _, err := r.Reads.ReadBitmap(ctx, n.corpID, n.msgID)
	if err != nil {
		return fmt.Errorf("campaign: reads: %w", err)
	}
	active, err := r.People.Active(ctx, n.corpID, rec.ToArray())
	if err != nil {
		return fmt.Errorf("campaign: members: %w", err)
	}
	present := roaring.New()
	for uid := range active {
		present.Add(uid)
	}
	esc := Escalate(org, present, read)
	name := func(uid uint32) string {
		if m, ok := active[uid]; ok && m.Name != "" {
			return m.Name
		}
		return active[uid].UserID
	}
	type digest struct {
		uid    uint32
		userID string
		g      *Group
	}
	var all []digest
	leaderUIDs := make([]uint32, 0, len(esc.Leaders))
	for l := range esc.Leaders {
		leaderUIDs = append(leaderUIDs, l)
	}
	leaders, err := r.People.Active(ctx, n.corpID, leaderUIDs)
	if err != nil {
		return fmt.Errorf("campaign: leaders: %w", err)
	}
	for l, g := range esc.Leaders {
		if m, ok := leaders[l]; ok {
			all = append(all, digest{l, m.UserID, g})
		} else if esc.Fallback == nil {
			esc.Fallback = &Group{People: g.People.Clone(), Unread: g.Unread.Clone()}
		} else {
			esc.Fallback.People.Or(g.People) // a leader who left: their people to the fallback
			esc.Fallback.Unread.Or(g.Unread)
		}
	}
	if esc.Fallback != nil && r.Fallback != nil {
		for _, u := range r.Fallback(n.app) {
			all = append(all, digest{0, u, esc.Fallback})
		}
	}
	for i, d := range all {
		head, names := DigestText(n.title, d.g, name)
		res, err := r.DB.ExecContext(ctx, `INSERT IGNORE INTO reminder_log (corp_id, msgid, round, kind, uid, userid, batch, reminded_at, outcome)
			VALUES (?, ?, ?, 'digest', ?, ?, ?, ?, 'pending')`, n.corpID, n.msgID, round, digestKey(d.uid, i), d.userID, i, r.Now().UTC().Truncate(time.Second))
		if err != nil {
			return fmt.Errorf("campaign: record digest: %w", err)
		}
		if k, _ := res.RowsAffected(); k == 0 {
			continue // recorded by an earlier owner of the round
		}
		taskID := yidu.DigestTaskID(yidu.MsgID(n.msgID), round, i)
		outcome := "sent"
		text := head + "\n" + names
		if r.PageURL != nil {
			if u := r.PageURL(n.msgID); u != "" {
				// A text message may carry <a href> links (message/send,
				// msgtype text, doc path 90236).
				text += "\n" + `<a href="` + html.EscapeString(u) + `">` + DigestLinkText + "</a>"
			}
		}
		if err := r.Sender.Digest(ctx, n.msg, taskID, d.userID, text); err != nil {
			outcome = "failed"
			r.Log.Warn("digest", "msgid", n.msgID, "round", round, "err", err)
		}
		if _, err := r.DB.ExecContext(ctx, `UPDATE reminder_log SET outcome = ? WHERE corp_id = ? AND msgid = ? AND round = ? AND kind = 'digest' AND uid = ?`,
			outcome, n.corpID, n.msgID, round, digestKey(d.uid, i)); err != nil {
			return fmt.Errorf("campaign: mark digest: %w", err)
		}
	}
	if _, err := r.DB.ExecContext(ctx, `UPDATE follow_up_rounds SET escalated = 1 WHERE corp_id = ? AND msgid = ? AND round = ?`,
		n.corpID, n.msgID, round); err != nil {
		return fmt.Errorf("campaign: escalated: %w", err)
	}
	return nil
}

// digestKey is a digest's reminder_log uid: the leader's uid, or for a
// fallback UserID (not a directory member, perhaps) a number above every
// uid idmap assigns, by its place in the list.
func digestKey(uid uint32, i int) uint32 {
	if uid != 0 {
		return uid
	}
	return ^uint32(0) - uint32(i)
}
