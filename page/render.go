package page

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"html"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/yidu-io/yidu/notice"
)

// A version's page is rendered once per receiver (issue 50): a version
// never changes, so the template runs once for each (version, latest
// version, read to the end, acknowledged), with slot names where the
// reader's own values go (name, UserID and time of the watermark, the
// view token). Serving the page writes the pieces between the slots and
// each reader's values, escaped. The slot names carry a random word of
// this process, so no notice text can name one.

// pageKey names one rendering of a version.
type pageKey struct {
	corp, msgid  string
	n, latest    int
	ended, acked bool
}

// slotNames are this process's slot words.
type slotNames struct{ reader, userID, at, view string }

func newSlotNames() slotNames {
	var b [8]byte
	_, _ = rand.Read(b[:])
	w := "yiduslot" + hex.EncodeToString(b[:])
	return slotNames{reader: w + "reader", userID: w + "userid", at: w + "at", view: w + "view"}
}

// slotValues are one reader's values.
type slotValues struct{ Reader, UserID, At, View string }

// rendered is a page cut at its slots: parts[0] slot[0] parts[1] … parts[n].
type rendered struct {
	parts [][]byte
	slots []int // 0 reader, 1 userid, 2 at, 3 view
}

func (p *rendered) write(w http.ResponseWriter, v slotValues) {
	vals := [4]string{html.EscapeString(v.Reader), html.EscapeString(v.UserID), html.EscapeString(v.At), html.EscapeString(v.View)}
	size := 0
	for _, b := range p.parts {
		size += len(b)
	}
	for _, i := range p.slots {
		size += len(vals[i])
	}
	// With its length stated the page goes out unchunked, piece by piece
	// through the connection's own buffer: no copy of it per reader.
	w.Header().Set("Content-Length", strconv.Itoa(size))
	for i, b := range p.parts {
		_, _ = w.Write(b)
		if i < len(p.slots) {
			_, _ = io.WriteString(w, vals[p.slots[i]])
		}
	}
}

// rendered returns version v's page for k, rendering it the first time.
func (s *Server) rendered(k pageKey, v notice.Version) (*rendered, error) {
	if p, ok := s.pages.get(k); ok {
		return p, nil
	}
	out := pageView{Title: v.Title, Text: template.HTML(v.HTML), Version: v.N, Versions: k.latest, Note: v.Note, SHA256: v.SHA256.String(), // #nosec: sanitized by content.Render
		Reader: s.slots.reader, UserID: s.slots.userID, At: s.slots.at, Watermark: make([]int, 24),
		View: s.slots.view, Events: url.PathEscape(k.msgid) + "/events", Ended: k.ended, Acked: k.acked, MinRead: v.Settings.MinReadSeconds}
	for _, att := range v.Attachments {
		av := attachmentView{Name: att.Name, Href: url.PathEscape(k.msgid) + "/a/" + att.SHA256, Size: size(att.Size)}
		if att.Type.Image() {
			out.Images = append(out.Images, av)
		} else {
			out.PDFs = append(out.PDFs, av)
		}
	}
	var b bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&b, "page.html", out); err != nil {
		return nil, err
	}
	p := cut(b.Bytes(), []string{s.slots.reader, s.slots.userID, s.slots.at, s.slots.view})
	s.pages.put(k, p)
	return p, nil
}

// cut splits page at every occurrence of the slot words.
func cut(page []byte, words []string) *rendered {
	p := &rendered{}
	for {
		at, which := -1, -1
		for i, w := range words {
			if j := bytes.Index(page, []byte(w)); j >= 0 && (at < 0 || j < at) {
				at, which = j, i
			}
		}
		if at < 0 {
			p.parts = append(p.parts, bytes.Clone(page))
			return p
		}
		p.parts = append(p.parts, bytes.Clone(page[:at]))
		p.slots = append(p.slots, which)
		page = page[at+len(words[which]):]
	}
}
