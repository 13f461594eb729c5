package wxcrypt

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	"github.com/silenceper/wechat/v2/util"
)

// The official test vector of WeCom's sample libraries (shared/wecom-protocol.md).
const (
	vecToken  = "QDG6eK"
	vecCorpID = "wx5823bf96d3bd56c7"
	vecAESKey = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"

	vecGetSig     = "5c45ff5e21c57e6ad56bac8758b79b1d9ac89fd3"
	vecGetTS      = "1409659589"
	vecGetNonce   = "263014780"
	vecGetEchoEsc = "P9nAzCzyDtyTWESHep1vC5X9xho%2FqYX3Zpb4yKa9SKld1DsH3Iyt3tP3zNdtp%2B4RPcs8TgAE7OaBO%2BFZXvnaqQ%3D%3D"

	vecPostSig     = "477715d11cdb4164915debcba66cb864d751f3e6"
	vecPostTS      = "1409659813"
	vecPostNonce   = "1372623149"
	vecPostEncrypt = "RypEvHKD8QQKFhvQ6QleEB4J58tiPdvo+rtK1I9qca6aM/wvqnLSV5zEPeusUiX5L5X/0lWfrf0QADHHhGd3QczcdCUpj911L3vg3W/sYYvuJTs3TUUkSUXxaccAS0qhxchrRYt66wiSpGLYL42aM6A8dTT+6k4aSknmPj48kzJs8qLjvd4Xgpue06DOdnLxAUHzM6+kDZ+HMZfJYuR+LtwGc2hgf5gsijff0ekUNXZiqATP7PF5mZxZ3Izoun1s4zG4LUMnvw2r+KqCKIw+3IQH03v+BCA9nMELNqbSf6tiWSrXJB3LAVGUcallcrw8V2t9EL4EhzJWrQUax5wLVMNS0+rUPA3k22Ncx4XXZS9o0MBH27Bo6BpNelZpS+/uh9KsNlY6bHCmJU9p8g7m3fVKn28H3KDYA5Pl/T8Z1ptDAVe0lXdQ2YoyyH2uyPIGHBZZIs2pDBS8R07+qN+E7Q=="
)

func mustNew(tb testing.TB) *Crypter {
	tb.Helper()
	c, err := New(vecToken, vecAESKey, vecCorpID)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return c
}

func TestOfficialVectorGET(t *testing.T) {
	c := mustNew(t)
	echo, err := url.QueryUnescape(vecGetEchoEsc)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Verify(vecGetSig, vecGetTS, vecGetNonce, echo); err != nil {
		t.Fatalf("Verify = %v; want nil", err)
	}
	got, err := c.Decrypt(echo)
	if err != nil {
		t.Fatalf("Decrypt = %v", err)
	}
	if string(got) != "1616140317555161061" {
		t.Errorf("Decrypt(echostr) = %q; want %q", got, "1616140317555161061")
	}
}

func TestOfficialVectorPOST(t *testing.T) {
	c := mustNew(t)
	if got := c.Signature(vecPostTS, vecPostNonce, vecPostEncrypt); got != vecPostSig {
		t.Errorf("Signature = %s; want %s", got, vecPostSig)
	}
	if err := c.Verify(vecPostSig, vecPostTS, vecPostNonce, vecPostEncrypt); err != nil {
		t.Fatalf("Verify = %v", err)
	}
	msg, err := c.Decrypt(vecPostEncrypt)
	if err != nil {
		t.Fatalf("Decrypt = %v", err)
	}
	for _, want := range []string{"<FromUserName><![CDATA[mycreate]]></FromUserName>", "<Content><![CDATA[hello]]></Content>", "<MsgId>4561255354251345929</MsgId>", "<AgentID>218</AgentID>"} {
		if !bytes.Contains(msg, []byte(want)) {
			t.Errorf("Decrypt = %q; missing %q", msg, want)
		}
	}
	// The vector's padding is 30: ciphertext = 20 + msg + CorpID + 30.
	ct, _ := base64.StdEncoding.DecodeString(vecPostEncrypt)
	if pad := len(ct) - 20 - len(msg) - len(vecCorpID); pad != 30 {
		t.Errorf("pad = %d; want 30", pad)
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name, token, key, rid string
		want                  error
	}{
		{"ok", vecToken, vecAESKey, vecCorpID, nil},
		{"short key", vecToken, vecAESKey[:42], vecCorpID, ErrAESKey},
		{"long key", vecToken, vecAESKey + "A", vecCorpID, ErrAESKey},
		{"not base64", vecToken, strings.Repeat("!", 43), vecCorpID, ErrAESKey},
		{"empty token", "", vecAESKey, vecCorpID, nil},
		{"empty receive id", vecToken, vecAESKey, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.token, tt.key, tt.rid)
			switch {
			case tt.name == "ok" && err != nil:
				t.Errorf("New = %v; want nil", err)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Errorf("New = %v; want %v", err, tt.want)
			case tt.name != "ok" && err == nil:
				t.Errorf("New = nil; want an error")
			}
		})
	}
	if Code(ErrAESKey) != -40004 {
		t.Errorf("Code(ErrAESKey) = %d", Code(ErrAESKey))
	}
}

func TestVerify(t *testing.T) {
	c := mustNew(t)
	other, _ := New("other", vecAESKey, vecCorpID)
	tests := []struct {
		name                 string
		c                    *Crypter
		sig, ts, nonce, encr string
		want                 error
	}{
		{"valid", c, vecPostSig, vecPostTS, vecPostNonce, vecPostEncrypt, nil},
		{"empty", c, "", vecPostTS, vecPostNonce, vecPostEncrypt, ErrSignature},
		{"short", c, vecPostSig[:39], vecPostTS, vecPostNonce, vecPostEncrypt, ErrSignature},
		{"long", c, vecPostSig + "0", vecPostTS, vecPostNonce, vecPostEncrypt, ErrSignature},
		{"upper case", c, strings.ToUpper(vecPostSig), vecPostTS, vecPostNonce, vecPostEncrypt, ErrSignature},
		{"last char flipped", c, vecPostSig[:39] + "7", vecPostTS, vecPostNonce, vecPostEncrypt, ErrSignature},
		{"other timestamp", c, vecPostSig, "1409659814", vecPostNonce, vecPostEncrypt, ErrSignature},
		{"other nonce", c, vecPostSig, vecPostTS, "1", vecPostEncrypt, ErrSignature},
		{"other encrypt", c, vecPostSig, vecPostTS, vecPostNonce, vecPostEncrypt[1:], ErrSignature},
		{"other token", other, vecPostSig, vecPostTS, vecPostNonce, vecPostEncrypt, ErrSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Verify(tt.sig, tt.ts, tt.nonce, tt.encr)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("Verify(%q) = %v; want %v", tt.sig, err, tt.want)
			}
			if tt.want != nil && Code(err) != -40001 {
				t.Errorf("Code = %d; want -40001", Code(err))
			}
		})
	}
}

// sealRaw encrypts an arbitrary plaintext (a multiple of 16 bytes) with c's
// key, to build malformed ciphertexts.
func sealRaw(tb testing.TB, c *Crypter, pt []byte) string {
	tb.Helper()
	ct := bytes.Clone(pt)
	cipher.NewCBCEncrypter(c.block, c.key[:aes.BlockSize]).CryptBlocks(ct, ct)
	return base64.StdEncoding.EncodeToString(ct)
}

// plain builds random(16)+len+msg+rid padded with pad bytes of value padVal.
func plain(msgLen uint32, msg, rid string, pad int, padVal byte) []byte {
	b := make([]byte, 16, 64)
	b = binary.BigEndian.AppendUint32(b, msgLen)
	b = append(b, msg...)
	b = append(b, rid...)
	for range pad {
		b = append(b, padVal)
	}
	return b
}

func TestDecrypt(t *testing.T) {
	c := mustNew(t)
	good := "<xml>hi</xml>"
	content := 20 + len(good) + len(vecCorpID) // 51: pads to 64 with 13
	padN := 64 - content
	tests := []struct {
		name    string
		encrypt string
		want    string
		err     error
	}{
		{"valid", sealRaw(t, c, plain(uint32(len(good)), good, vecCorpID, padN, byte(padN))), good, nil},
		{"full block of padding", sealRaw(t, c, plain(26, "<xml>123456789012345</xml>", vecCorpID, 32, 32)), "<xml>123456789012345</xml>", nil},
		{"empty message", sealRaw(t, c, plain(0, "", vecCorpID, 32-20-len(vecCorpID)+32, byte(32-20-len(vecCorpID)+32))), "", nil},
		{"bad base64", "***", "", ErrBase64},
		{"truncated base64", vecPostEncrypt[:len(vecPostEncrypt)-3], "", ErrBase64},
		{"empty", "", "", ErrDecrypt},
		{"16-byte ciphertext", sealRaw(t, c, make([]byte, 16)), "", ErrDecrypt},
		{"48-byte ciphertext", sealRaw(t, c, make([]byte, 48)), "", ErrDecrypt},
		{"pad zero", sealRaw(t, c, plain(uint32(len(good)), good, vecCorpID, padN, 0)), "", ErrDecrypt},
		{"pad 33", sealRaw(t, c, append(plain(uint32(len(good)), good, vecCorpID, padN-1, 1), 33)), "", ErrDecrypt},
		{"inconsistent pad", sealRaw(t, c, append(plain(uint32(len(good)), good, vecCorpID, padN-1, 7), byte(padN))), "", ErrDecrypt},
		{"too short after unpad", sealRaw(t, c, append(make([]byte, 19), bytes.Repeat([]byte{13}, 13)...)), "", ErrBuffer},
		{"msg_len overruns", sealRaw(t, c, plain(uint32(len(good)+len(vecCorpID)+1), good, vecCorpID, padN, byte(padN))), "", ErrBuffer},
		{"msg_len huge", sealRaw(t, c, plain(0xffffffff, good, vecCorpID, padN, byte(padN))), "", ErrBuffer},
		{"other receive id", sealRaw(t, c, plain(uint32(len(good)), good, "wx5823bf96d3bd56c8", padN, byte(padN))), "", ErrReceiveID},
		{"receive id prefix", sealRaw(t, c, plain(uint32(len(good)+1), good+"w", vecCorpID[1:], padN, byte(padN))), "", ErrReceiveID},
		{"no receive id", sealRaw(t, c, plain(uint32(len(good)+len(vecCorpID)), good, vecCorpID, padN, byte(padN))), "", ErrReceiveID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.Decrypt(tt.encrypt)
			if tt.err == nil {
				if err != nil || string(got) != tt.want {
					t.Errorf("Decrypt = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("Decrypt = %q, %v; want %v", got, err, tt.err)
			}
			if Code(err) != Code(tt.err) {
				t.Errorf("Code = %d; want %d", Code(err), Code(tt.err))
			}
		})
	}
}

func TestEncryptRoundTrip(t *testing.T) {
	c := mustNew(t)
	for n := 0; n < 100; n++ {
		msg := bytes.Repeat([]byte{'x'}, n)
		enc, err := c.Encrypt(msg, nil)
		if err != nil {
			t.Fatal(err)
		}
		ct, _ := base64.StdEncoding.DecodeString(enc)
		pad := len(ct) - 20 - n - len(vecCorpID)
		if len(ct)%32 != 0 || pad < 1 || pad > 32 {
			t.Errorf("Encrypt(%d bytes): ciphertext %d bytes, pad %d", n, len(ct), pad)
		}
		got, err := c.Decrypt(enc)
		if err != nil || !bytes.Equal(got, msg) {
			t.Errorf("Decrypt(Encrypt(%d bytes)) = %q, %v", n, got, err)
		}
	}
	if _, err := c.Encrypt([]byte("x"), make([]byte, 15)); !errors.Is(err, ErrEncrypt) {
		t.Errorf("Encrypt(random 15 bytes) = %v; want ErrEncrypt", err)
	}
}

func TestPostAndEcho(t *testing.T) {
	c := mustNew(t)
	q, body, err := c.Post([]byte("<xml>ev</xml>"), 218, "1409659813", "n1")
	if err != nil {
		t.Fatal(err)
	}
	s := string(body)
	i, j := strings.Index(s, "<Encrypt><![CDATA["), strings.Index(s, "]]></Encrypt>")
	if i < 0 || j < 0 || !strings.Contains(s, "<AgentID><![CDATA[218]]></AgentID>") || !strings.Contains(s, "<ToUserName><![CDATA["+vecCorpID+"]]>") {
		t.Fatalf("Post body = %s", s)
	}
	enc := s[i+len("<Encrypt><![CDATA[") : j]
	if err := c.Verify(q.Get("msg_signature"), q.Get("timestamp"), q.Get("nonce"), enc); err != nil {
		t.Errorf("Verify(Post) = %v", err)
	}
	if got, err := c.Decrypt(enc); err != nil || string(got) != "<xml>ev</xml>" {
		t.Errorf("Decrypt(Post) = %q, %v", got, err)
	}

	q, err = c.Echo([]byte("12345"), "1", "2")
	if err != nil {
		t.Fatal(err)
	}
	back, _ := url.ParseQuery(q.Encode())
	echo := back.Get("echostr")
	if err := c.Verify(back.Get("msg_signature"), "1", "2", echo); err != nil {
		t.Errorf("Verify(Echo) = %v", err)
	}
	if got, err := c.Decrypt(echo); err != nil || string(got) != "12345" {
		t.Errorf("Decrypt(Echo) = %q, %v", got, err)
	}
}

// TestAgreesWithSilenceper cross-checks Encrypt, Decrypt and Signature with
// github.com/silenceper/wechat/v2/util on random inputs.
func TestAgreesWithSilenceper(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	randBytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	randString := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alnum[r.IntN(len(alnum))]
		}
		return string(b)
	}
	for i := range 500 {
		key := base64.StdEncoding.EncodeToString(randBytes(32))[:43]
		token, rid := randString(1+r.IntN(32)), randString(1+r.IntN(64))
		c, err := New(token, key, rid)
		if err != nil {
			t.Fatalf("New(key %q): %v", key, err)
		}
		msg, random := randBytes(r.IntN(2000)), randBytes(16)

		ours, err := c.Encrypt(msg, random)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := util.EncryptMsg(random, msg, rid, key)
		if err != nil {
			t.Fatal(err)
		}
		if ours != string(theirs) {
			t.Fatalf("case %d: Encrypt = %q; silenceper EncryptMsg = %q", i, ours, theirs)
		}
		_, plain, err := util.DecryptMsg(rid, ours, key)
		if err != nil || !bytes.Equal(plain, msg) {
			t.Fatalf("case %d: silenceper DecryptMsg(ours) = %v", i, err)
		}
		got, err := c.Decrypt(string(theirs))
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("case %d: Decrypt(theirs) = %v", i, err)
		}
		ts, nonce := randString(10), randString(r.IntN(12))
		if got, want := c.Signature(ts, nonce, ours), util.Signature(token, ts, nonce, ours); got != want {
			t.Fatalf("case %d: Signature = %s; silenceper = %s", i, got, want)
		}

		// Random ciphertext: whatever we accept, silenceper accepts the same
		// way (we are stricter about padding, never looser).
		junk := base64.StdEncoding.EncodeToString(randBytes(32 * (1 + r.IntN(4))))
		if got, err := c.Decrypt(junk); err == nil {
			_, plain, err := util.DecryptMsg(rid, junk, key)
			if err != nil || !bytes.Equal(plain, got) {
				t.Fatalf("case %d: we accept junk as %q; silenceper: %q, %v", i, got, plain, err)
			}
		}
	}
}

// TestOpenAllocs: verifying and decrypting a callback into a buffer
// allocates nothing (the CBC mode is reused, the base64 is read in place),
// and a passive reply allocates only the envelope it returns.
func TestOpenAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	c := mustNew(t)
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(100, func() {
		if err := c.Verify(vecPostSig, vecPostTS, vecPostNonce, vecPostEncrypt); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Open(buf, vecPostEncrypt); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Verify+Open allocs = %v; want 0", allocs)
	}
	msg := []byte("<xml><MsgType><![CDATA[update_button]]></MsgType></xml>")
	allocs = testing.AllocsPerRun(100, func() {
		if _, err := c.Reply(msg, vecPostTS, vecPostNonce); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 1 {
		t.Errorf("Reply allocs = %v; want 1 (the envelope)", allocs)
	}
}

// TestReusedModes: the pooled CBC modes start every message at WeCom's IV,
// whatever the message before did (a failed decryption, a reply, another
// goroutine's use): the official vector decrypts and replies round-trip
// every time, concurrently.
func TestReusedModes(t *testing.T) {
	c := mustNew(t)
	done := make(chan error, 8)
	for g := range 8 {
		go func() {
			buf := make([]byte, 0, 4096)
			for i := range 200 {
				if i%3 == g%3 {
					_, _ = c.Open(buf, vecPostEncrypt[:len(vecPostEncrypt)-48]+"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA") // bad padding
				}
				msg, err := c.Open(buf, vecPostEncrypt)
				if err != nil || !bytes.Contains(msg, []byte("<Content><![CDATA[hello]]></Content>")) {
					done <- fmt.Errorf("goroutine %d, round %d: Open = %q, %v", g, i, msg, err)
					return
				}
				want := []byte(fmt.Sprintf("<xml>%d-%d</xml>", g, i))
				reply, err := c.Reply(want, vecPostTS, vecPostNonce)
				if err != nil {
					done <- err
					return
				}
				enc := between(string(reply), "<Encrypt><![CDATA[", "]]></Encrypt>")
				sig := between(string(reply), "<MsgSignature><![CDATA[", "]]></MsgSignature>")
				if err := c.Verify(sig, vecPostTS, vecPostNonce, enc); err != nil {
					done <- fmt.Errorf("goroutine %d, round %d: reply signature: %w", g, i, err)
					return
				}
				if got, err := c.Decrypt(enc); err != nil || !bytes.Equal(got, want) {
					done <- fmt.Errorf("goroutine %d, round %d: reply decrypts to %q, %v; want %q", g, i, got, err, want)
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// between returns the text of s between open and close.
func between(s, open, close string) string {
	_, rest, _ := strings.Cut(s, open)
	v, _, _ := strings.Cut(rest, close)
	return v
}

func BenchmarkVerifyOpen(b *testing.B) {
	c := mustNew(b)
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Verify(vecPostSig, vecPostTS, vecPostNonce, vecPostEncrypt); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Open(buf, vecPostEncrypt); err != nil {
			b.Fatal(err)
		}
	}
}
