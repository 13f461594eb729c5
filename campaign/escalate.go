package campaign

import (
	"fmt"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
)

// MaxDigestNames is how many non-readers one leader's digest card names;
// the rest are counted, and the leader's scoped page lists them all.
const MaxDigestNames = 10

// Org is yidu.Org.
//
// Deprecated: moved to yidu.Org; kept while other branches merge.
type Org = yidu.Org

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
func Escalate(org *Org, recipients, read *roaring.Bitmap) Escalation {
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
func leaderDept(org *Org, d int64, uid uint32) int64 {
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
