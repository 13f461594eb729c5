package page

import (
	"context"
	"testing"

	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/content"
)

// TestAttachmentIndexBounded: the index reads a notice's attachments once
// and keeps the most recently asked max entries; one pushed out is read
// again, one never had is answered not found.
func TestAttachmentIndexBounded(t *testing.T) {
	sum := func(b byte) content.Hash { var h content.Hash; h[0] = b; return h }
	loads := map[string]int{}
	x := newAttachmentIndex(2, func(_ context.Context, corp, msgid string) (map[content.Hash]attachment.Attachment, error) {
		loads[msgid]++
		return map[content.Hash]attachment.Attachment{sum(msgid[0]): {Name: msgid + ".pdf"}}, nil
	})
	ask := func(msgid string, b byte) (string, bool) {
		t.Helper()
		a, ok, err := x.find(t.Context(), "corp", msgid, sum(b))
		if err != nil {
			t.Fatalf("find(%s) = %v", msgid, err)
		}
		return a.Name, ok
	}
	for _, step := range []struct {
		msgid string
		b     byte
		name  string
		ok    bool
		loads int
	}{
		{"a", 'a', "a.pdf", true, 1},
		{"a", 'a', "a.pdf", true, 1}, // kept
		{"b", 'b', "b.pdf", true, 1},
		{"c", 'c', "c.pdf", true, 1}, // pushes a out
		{"a", 'a', "a.pdf", true, 2}, // read again
		{"c", 'c', "c.pdf", true, 1}, // still kept
		{"c", 'z', "", false, 2},     // a hash c never had: read again, not found
	} {
		name, ok := ask(step.msgid, step.b)
		if name != step.name || ok != step.ok || loads[step.msgid] != step.loads {
			t.Errorf("find(%s, %c) = %q %v after %d loads; want %q %v after %d", step.msgid, step.b, name, ok, loads[step.msgid], step.name, step.ok, step.loads)
		}
	}
	// A miss that reaches the read after another's read filled the index
	// (its Get ran first) reads nothing again.
	if err := x.read(t.Context(), indexKey{"corp", "c", sum('c')}); err != nil || loads["c"] != 2 {
		t.Errorf("a late miss of c: %v after %d loads; want none more than 2", err, loads["c"])
	}
}
