// Package wxcrypt implements WeCom's callback crypto (加解密方案, doc path
// 91144): the SHA-1 msg_signature over the sorted token, timestamp, nonce and
// Encrypt strings, and AES-256-CBC with IV = key[:16] and PKCS#7 padding to
// 32-byte blocks over random(16) + msg_len(4, big-endian) + msg + ReceiveId.
//
// Errors are sentinel *Error values carrying the error codes of WeCom's
// official sample libraries, so a caller can map them to one HTTP outcome.
package wxcrypt

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"unsafe"
)

// Error is a crypto failure with the code WeCom's official sample libraries
// give it (doc path 91144).
type Error struct {
	// Code is WeCom's error code, e.g. -40001.
	Code   int
	reason string
}

// Error returns the reason with the package prefix.
func (e *Error) Error() string { return "wxcrypt: " + e.reason }

// The failures of verification, decryption and encryption. Returned errors
// wrap one of these, so test them with errors.Is.
var (
	// ErrSignature: msg_signature is missing or does not match (-40001).
	ErrSignature = &Error{-40001, "bad msg_signature"}
	// ErrAESKey: the EncodingAESKey is not 43 characters of base64 for 32 bytes (-40004).
	ErrAESKey = &Error{-40004, "bad EncodingAESKey"}
	// ErrReceiveID: the decrypted ReceiveId is not the configured one (-40005).
	ErrReceiveID = &Error{-40005, "ReceiveId mismatch"}
	// ErrEncrypt: encryption failed, e.g. the random prefix is not 16 bytes (-40006).
	ErrEncrypt = &Error{-40006, "encrypt"}
	// ErrDecrypt: the ciphertext is not whole 32-byte blocks or its padding is bad (-40007).
	ErrDecrypt = &Error{-40007, "decrypt: bad ciphertext or padding"}
	// ErrBuffer: the decrypted buffer is too short or its msg_len overruns it (-40008).
	ErrBuffer = &Error{-40008, "bad buffer after decrypt"}
	// ErrBase64 is a base64 decoding failure of Encrypt (-40010).
	ErrBase64 = &Error{-40010, "base64 decode"}
)

// Code returns WeCom's error code carried by err, or 0 when err is not (or
// does not wrap) an *Error.
func Code(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// blockSize is WeCom's PKCS#7 block: 32 bytes, not AES's 16, so a stock
// 16-byte unpad rejects real messages (doc path 91144).
const blockSize = 32

// Crypter signs, verifies, encrypts and decrypts one app's callbacks. It is
// safe for concurrent use.
type Crypter struct {
	token     string
	receiveID string
	key       [32]byte
	block     cipher.Block
	// enc and dec hold CBC modes for reuse: each new one copies the AES
	// key schedule (~0.4 KB), and every callback needs one of each (open,
	// and the passive reply). A reused mode is reset to WeCom's fixed IV
	// (key[:16]) before each message.
	enc, dec sync.Pool
}

// resettable is a CBC mode that can start over with a new IV, as
// crypto/cipher's are (crypto/tls resets its CBC modes the same way).
type resettable interface {
	cipher.BlockMode
	SetIV([]byte)
}

// cbc returns a CBC mode of pool set to WeCom's IV; put gives it back.
func (c *Crypter) cbc(pool *sync.Pool, mk func(cipher.Block, []byte) cipher.BlockMode) cipher.BlockMode {
	if m, ok := pool.Get().(resettable); ok {
		m.SetIV(c.key[:aes.BlockSize])
		return m
	}
	return mk(c.block, c.key[:aes.BlockSize])
}

// put keeps m for reuse when it can be reset.
func put(pool *sync.Pool, m cipher.BlockMode) {
	if r, ok := m.(resettable); ok {
		pool.Put(r)
	}
}

// New returns the Crypter of an app with its Token, its 43-character
// EncodingAESKey and its ReceiveId (the CorpID for an in-house app).
func New(token, encodingAESKey, receiveID string) (*Crypter, error) {
	if token == "" {
		return nil, errors.New("wxcrypt: empty token")
	}
	if receiveID == "" {
		return nil, errors.New("wxcrypt: empty ReceiveId")
	}
	if len(encodingAESKey) != 43 {
		return nil, fmt.Errorf("%w: %d characters, want 43", ErrAESKey, len(encodingAESKey))
	}
	c := &Crypter{token: token, receiveID: receiveID}
	n, err := base64.StdEncoding.Decode(c.key[:], []byte(encodingAESKey+"="))
	if err != nil || n != len(c.key) {
		return nil, ErrAESKey
	}
	c.block, err = aes.NewCipher(c.key[:])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAESKey, err)
	}
	return c, nil
}

// ReceiveID returns the ReceiveId the Crypter expects and writes.
func (c *Crypter) ReceiveID() string { return c.receiveID }

// scratch holds the buffers the signature is hashed from, so that verifying
// a callback allocates nothing.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// Signature returns msg_signature: lower-case hex SHA-1 of the sorted,
// concatenated token, timestamp, nonce and encrypt (doc path 91144).
func (c *Crypter) Signature(timestamp, nonce, encrypt string) string {
	var sig [40]byte
	c.sign(&sig, timestamp, nonce, encrypt)
	return string(sig[:])
}

func (c *Crypter) sign(dst *[40]byte, timestamp, nonce, encrypt string) {
	p := [4]string{c.token, timestamp, nonce, encrypt}
	// Insertion sort: four strings, no allocation (sort.Strings would box).
	for i := 1; i < len(p); i++ {
		for j := i; j > 0 && p[j] < p[j-1]; j-- {
			p[j], p[j-1] = p[j-1], p[j]
		}
	}
	bp := scratch.Get().(*[]byte)
	b := (*bp)[:0]
	for _, s := range p {
		b = append(b, s...)
	}
	sum := sha1.Sum(b)
	if cap(b) <= 256<<10 { // do not pin huge buffers in the pool
		*bp = b
		scratch.Put(bp)
	}
	hex.Encode(dst[:], sum[:])
}

// Verify checks msg_signature sig over timestamp, nonce and encrypt in
// constant time. It returns ErrSignature on any mismatch, including an empty
// or upper-case sig (WeCom sends lower case).
func (c *Crypter) Verify(sig, timestamp, nonce, encrypt string) error {
	if len(sig) != 40 {
		return ErrSignature
	}
	var want [40]byte
	c.sign(&want, timestamp, nonce, encrypt)
	// Constant time over the 40 bytes: no early exit on the first difference.
	var diff byte
	for i := range want {
		diff |= want[i] ^ sig[i]
	}
	if diff != 0 {
		return ErrSignature
	}
	return nil
}

// Decrypt returns the message inside the base64 Encrypt (or echostr) value
// after checking its padding, length and ReceiveId.
func (c *Crypter) Decrypt(encrypt string) ([]byte, error) {
	return c.Open(nil, encrypt)
}

// Open is Decrypt into dst's storage: it base64-decodes encrypt into dst
// (grown when too small), decrypts in place and returns the message as a
// sub-slice of it. Callers on a hot path pass a pooled buffer and copy out
// what they keep before reusing it.
func (c *Crypter) Open(dst []byte, encrypt string) ([]byte, error) {
	n := base64.StdEncoding.DecodedLen(len(encrypt))
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	n, err := base64.StdEncoding.Decode(dst, bytesOf(encrypt))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBase64, err)
	}
	ct := dst[:n]
	if len(ct) == 0 || len(ct)%blockSize != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not whole %d-byte blocks", ErrDecrypt, len(ct), blockSize)
	}
	m := c.cbc(&c.dec, cipher.NewCBCDecrypter)
	m.CryptBlocks(ct, ct)
	put(&c.dec, m)

	pad := int(ct[len(ct)-1])
	if pad < 1 || pad > blockSize {
		return nil, fmt.Errorf("%w: pad %d", ErrDecrypt, pad)
	}
	// Every pad byte must carry the pad value: WeCom always writes proper
	// PKCS#7, so anything else is not WeCom's (the signature was checked
	// first, so this is no padding oracle).
	var bad byte
	for _, b := range ct[len(ct)-pad:] {
		bad |= b ^ byte(pad)
	}
	if bad != 0 {
		return nil, fmt.Errorf("%w: inconsistent padding", ErrDecrypt)
	}
	pt := ct[:len(ct)-pad]
	if len(pt) < 20 {
		return nil, fmt.Errorf("%w: %d bytes", ErrBuffer, len(pt))
	}
	msgLen := binary.BigEndian.Uint32(pt[16:20])
	if uint64(msgLen) > uint64(len(pt)-20) {
		return nil, fmt.Errorf("%w: msg_len %d exceeds %d", ErrBuffer, msgLen, len(pt)-20)
	}
	end := 20 + int(msgLen)
	if string(pt[end:]) != c.receiveID {
		return nil, ErrReceiveID
	}
	return pt[20:end:end], nil
}

// Encrypt returns the base64 Encrypt value of msg. random16 is the 16-byte
// random prefix; nil draws it from crypto/rand (tests pass a fixed one to
// compare with other implementations byte for byte).
func (c *Crypter) Encrypt(msg, random16 []byte) (string, error) {
	ct, err := c.seal(nil, msg, random16)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(ct), nil
}

// seal appends the ciphertext of msg (before base64) to dst and returns
// the extended slice (see Encrypt).
func (c *Crypter) seal(dst, msg, random16 []byte) ([]byte, error) {
	if random16 != nil && len(random16) != 16 {
		return nil, fmt.Errorf("%w: random prefix is %d bytes, want 16", ErrEncrypt, len(random16))
	}
	if uint64(len(msg)) > 1<<31 {
		return nil, fmt.Errorf("%w: message too long", ErrEncrypt)
	}
	contentLen := 20 + len(msg) + len(c.receiveID)
	pad := blockSize - contentLen%blockSize // 1..32: a full block when aligned
	start := len(dst)
	dst = slices.Grow(dst, contentLen+pad)
	pt := dst[start : start+contentLen+pad]
	if random16 == nil {
		if _, err := rand.Read(pt[:16]); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrEncrypt, err)
		}
	} else {
		copy(pt, random16)
	}
	binary.BigEndian.PutUint32(pt[16:20], uint32(len(msg)))
	copy(pt[20:], msg)
	copy(pt[20+len(msg):], c.receiveID)
	for i := contentLen; i < len(pt); i++ {
		pt[i] = byte(pad)
	}
	m := c.cbc(&c.enc, cipher.NewCBCEncrypter)
	m.CryptBlocks(pt, pt)
	put(&c.enc, m)
	return dst[:start+len(pt)], nil
}

// bytesOf returns s's bytes without copying them, for reading only
// (Open hands them to base64's Decode, which never writes to its input).
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// Reply wraps the plaintext XML msg as a passive reply (doc path 90241):
// encrypted like a callback and signed, in WeCom's reply envelope
// <xml><Encrypt/><MsgSignature/><TimeStamp/><Nonce/></xml>. The timestamp
// and nonce are the reply's own.
//
// It is on the read path of every button press (the member's "read"
// reply), so the envelope is appended into one buffer sized up front.
func (c *Crypter) Reply(msg []byte, timestamp, nonce string) ([]byte, error) {
	bp := scratch.Get().(*[]byte)
	ct, err := c.seal((*bp)[:0], msg, nil)
	if err != nil {
		scratch.Put(bp)
		return nil, err
	}
	const (
		open  = "<xml><Encrypt><![CDATA["
		mid1  = "]]></Encrypt><MsgSignature><![CDATA["
		mid2  = "]]></MsgSignature><TimeStamp>"
		mid3  = "</TimeStamp><Nonce><![CDATA["
		close = "]]></Nonce></xml>"
	)
	encLen := base64.StdEncoding.EncodedLen(len(ct))
	b := make([]byte, 0, len(open)+encLen+len(mid1)+40+len(mid2)+len(timestamp)+len(mid3)+len(nonce)+len(close))
	b = append(b, open...)
	b = base64.StdEncoding.AppendEncode(b, ct)
	if cap(ct) <= 256<<10 { // do not pin huge buffers in the pool
		*bp = ct[:0]
		scratch.Put(bp)
	}
	// The signature covers the Encrypt value just written; b is not
	// appended to before sign has read it.
	enc := b[len(open):]
	var sig [40]byte
	c.sign(&sig, timestamp, nonce, unsafe.String(unsafe.SliceData(enc), len(enc)))
	b = append(b, mid1...)
	b = append(b, sig[:]...)
	b = append(b, mid2...)
	b = append(b, timestamp...)
	b = append(b, mid3...)
	b = append(b, nonce...)
	return append(b, close...), nil
}

// Post builds a signed POST callback for the plaintext XML msg as WeCom sends
// it (doc path 91144): the query (msg_signature, timestamp, nonce) and the
// body <xml><ToUserName/><Encrypt/><AgentID/></xml>. Tests, the WeCom
// simulator and benchmarks use it.
func (c *Crypter) Post(msg []byte, agentID int64, timestamp, nonce string) (query url.Values, body []byte, err error) {
	enc, err := c.Encrypt(msg, nil)
	if err != nil {
		return nil, nil, err
	}
	query = url.Values{
		"msg_signature": {c.Signature(timestamp, nonce, enc)},
		"timestamp":     {timestamp},
		"nonce":         {nonce},
	}
	body = fmt.Appendf(nil, "<xml><ToUserName><![CDATA[%s]]></ToUserName><Encrypt><![CDATA[%s]]></Encrypt><AgentID><![CDATA[%s]]></AgentID></xml>",
		c.receiveID, enc, strconv.FormatInt(agentID, 10))
	return query, body, nil
}

// Echo builds the signed query of a URL verification GET whose echostr
// decrypts to echo (doc path 91144). url.Values.Encode escapes echostr as
// WeCom does.
func (c *Crypter) Echo(echo []byte, timestamp, nonce string) (url.Values, error) {
	enc, err := c.Encrypt(echo, nil)
	if err != nil {
		return nil, err
	}
	return url.Values{
		"msg_signature": {c.Signature(timestamp, nonce, enc)},
		"timestamp":     {timestamp},
		"nonce":         {nonce},
		"echostr":       {enc},
	}, nil
}
