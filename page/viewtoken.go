package page

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash"
	"sync"
	"time"
)

// A view is a token the page hands the reader and each event hands back
// (see events.go): what was shown (the version, when, the notice's
// min_read_seconds and current material version then) and to whom. It is
// signed with the app's view key instead of kept in Redis (issue 50): an
// open wrote a key and each event read it back, three of a reader's
// commands, and the random token and its key's hash on top. Every replica
// derives the same key from the app's secrets (ViewKey), so an event may
// reach another replica than its page; a changed secret turns the pages
// open then into 页面已过期，请刷新, as an expired view does.
//
// The token is base64url of
//
//	form(1) uvarint(uid) uvarint(version) uvarint(shown ms) uvarint(min_read) uvarint(material) bind(6) mac(12)
//
// bind is the first bytes of SHA-256 over whose view it is (corp, app,
// msgid, userid), so a genuine view of another reader is told apart from
// a forged one; mac is HMAC-SHA256 with the view key over everything
// before it. A view handed to one turned away needs no taking back: the
// page that would carry it is never served.

const (
	viewForm    = 1
	viewBindLen = 6
	viewMACLen  = 12
	// maxViewToken is the longest token: the 64 characters an event may
	// name (ParseEvent), 48 bytes. The longest view signed (every number
	// at its bound below) is 47.
	maxViewToken = 64
	// maxShownMs bounds a view's time (unix ms, year 287396).
	maxShownMs = 1<<53 - 1
	// viewKeyLabel separates the view key from any other use of the
	// app's secret.
	viewKeyLabel = "yidu page view v1\x00"
	// minViewKey is the shortest view key New accepts.
	minViewKey = 16
)

// ViewKey derives the key app's views are signed with from its secrets
// (its secret and its callback's EncodingAESKey; the same on every
// replica); nil when all are empty.
func ViewKey(app string, secrets ...string) []byte {
	var k []byte
	for _, s := range secrets {
		k = append(append(k, s...), 0)
	}
	if len(k) == len(secrets) {
		return nil
	}
	m := hmac.New(sha256.New, k)
	m.Write([]byte(viewKeyLabel))
	m.Write([]byte(app))
	return m.Sum(nil)
}

// viewSigner signs and checks one app's views; its HMACs are pooled, one
// per request at a time.
type viewSigner struct{ macs sync.Pool }

func newViewSigner(key []byte) *viewSigner {
	k := append([]byte(nil), key...)
	return &viewSigner{macs: sync.Pool{New: func() any { return hmac.New(sha256.New, k) }}}
}

// viewBind is what ties a view to its reader and notice.
func viewBind(corp, app, msgID, userID string) [viewBindLen]byte {
	h := sha256.New()
	for _, s := range [...]string{corp, app, msgID, userID} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	var sum [sha256.Size]byte
	var b [viewBindLen]byte
	copy(b[:], h.Sum(sum[:0]))
	return b
}

// sign returns v's token.
func (vs *viewSigner) sign(v view) string {
	var buf [1 + 5*binary.MaxVarintLen64 + viewBindLen + sha256.Size]byte
	b := append(buf[:0], viewForm)
	b = binary.AppendUvarint(b, uint64(v.UID))
	b = binary.AppendUvarint(b, uint64(v.Version))
	b = binary.AppendUvarint(b, uint64(v.ShownMs))
	b = binary.AppendUvarint(b, uint64(v.MinRead))
	b = binary.AppendUvarint(b, uint64(v.Material))
	bind := viewBind(v.Corp, v.App, v.MsgID, v.UserID)
	b = append(b, bind[:]...)
	b = vs.mac(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// mac appends the MAC of b to b.
func (vs *viewSigner) mac(b []byte) []byte {
	m := vs.macs.Get().(hash.Hash)
	m.Reset()
	m.Write(b)
	var sum [sha256.Size]byte
	b = append(b, m.Sum(sum[:0])[:viewMACLen]...)
	vs.macs.Put(m)
	return b
}

// errViewToken is a token this key did not sign.
var errViewToken = errors.New("page: view token not signed here")

// open checks token's signature and returns the view it names and its
// bind (App, Corp, MsgID and UserID are not in the token: the caller
// compares the bind with its own). A token expired (viewTTL after it was
// shown, at now) is ErrUnknownView as a forged one is.
func (vs *viewSigner) open(token string, now time.Time) (view, [viewBindLen]byte, error) {
	var bind [viewBindLen]byte
	if len(token) > maxViewToken {
		return view{}, bind, errViewToken
	}
	var buf [maxViewToken * 3 / 4]byte
	n, err := base64.RawURLEncoding.Decode(buf[:], []byte(token))
	raw := buf[:n]
	if err != nil || n < 1+5+viewBindLen+viewMACLen || raw[0] != viewForm {
		return view{}, bind, errViewToken
	}
	body := raw[:n-viewMACLen]
	var want [1 + 5*binary.MaxVarintLen64 + viewBindLen + sha256.Size]byte
	if !hmac.Equal(vs.mac(append(want[:0], body...))[len(body):], raw[n-viewMACLen:]) {
		return view{}, bind, errViewToken
	}
	fields := body[1 : len(body)-viewBindLen]
	var nums [5]uint64
	for i := range nums {
		x, k := binary.Uvarint(fields)
		if k <= 0 {
			return view{}, bind, errViewToken
		}
		nums[i], fields = x, fields[k:]
	}
	if len(fields) != 0 || nums[0] > 1<<32-1 || nums[1] > 1<<31-1 || nums[2] > maxShownMs || nums[3] > 1<<31-1 || nums[4] > 1<<31-1 {
		return view{}, bind, errViewToken
	}
	copy(bind[:], body[len(body)-viewBindLen:])
	v := view{UID: uint32(nums[0]), Version: int(nums[1]), ShownMs: int64(nums[2]), MinRead: int(nums[3]), Material: int(nums[4])}
	if now.Sub(time.UnixMilli(v.ShownMs)) > viewTTL {
		return view{}, bind, ErrUnknownView
	}
	return v, bind, nil
}
