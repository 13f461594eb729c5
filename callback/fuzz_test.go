package callback

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/silenceper/wechat/v2/util"
)

var update = flag.Bool("update", false, "rewrite the seed corpus under testdata/fuzz")

// fuzzSeeds are the seed corpus of FuzzVerifyDecryptParse: (plaintext to
// seal, raw Encrypt value to sign, raw envelope body).
var fuzzSeeds = []struct {
	plaintext string
	encrypt   string
	body      string
}{
	{cardXML, "", vecPostBody},
	{enterXML, "AAAA", ""},
	{viewXML, "not base64", "<xml><Encrypt/></xml>"},
	{clickXML, strings.Repeat("A", 44), "<xml><Encrypt>AAAA</Encrypt><AgentID>218</AgentID></xml>"},
	{contactXML, "RypEvHKD8QQKFhvQ6QleEB4J58tiPdvo+rtK1I9qca6a", "<xml><ToUserName>a</ToUserName><Encrypt><![CDATA[" + strings.Repeat("A", 64) + "]]></Encrypt></xml>"},
	{textXML, "", "<xml><Encrypt>&#65;AAA</Encrypt></xml>"},
	{`<xml><MsgType>event</MsgType><Event>template_card_event</Event><TaskId>x</TaskId></xml>`, "", ""},
	{`<!DOCTYPE x [<!ENTITY a "b">]><xml><MsgType>&a;</MsgType></xml>`, "", "<xml><Encrypt><![CDATA[]]]]><![CDATA[>]]></Encrypt></xml>"},
	{"<xml><MsgType>t\xffext</MsgType></xml>", "", "<xml>" + strings.Repeat("<a>", 20) + "</xml>"},
	{"", "", ""},
}

// TestWriteFuzzSeeds rewrites testdata/fuzz/FuzzVerifyDecryptParse from
// fuzzSeeds with -update, and otherwise checks each file holds its seed.
func TestWriteFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzVerifyDecryptParse")
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range fuzzSeeds {
		name := filepath.Join(dir, fmt.Sprintf("seed-%02d", i))
		data := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nstring(%q)\n[]byte(%q)\n", s.plaintext, s.encrypt, s.body)
		if *update {
			if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got, err := os.ReadFile(name); err != nil || string(got) != data {
			t.Errorf("%s differs from fuzzSeeds[%d] (%v); run go test -run TestWriteFuzzSeeds -update", name, i, err)
		}
	}
}

// FuzzVerifyDecryptParse drives the whole path with three inputs: a
// plaintext sealed and signed as WeCom would (through the router), a raw
// Encrypt value signed correctly (decrypt and its checks), and a raw
// envelope whose Encrypt is signed correctly and incorrectly. Nothing may
// panic, a rejection is always a 4xx from the outcomes table, what is
// accepted agrees with ParseEvent and encoding/xml, and the crypto agrees
// with silenceper's util both ways.
func FuzzVerifyDecryptParse(f *testing.F) {
	f.Add([]byte(cardXML), "", []byte(vecPostBody))
	h := newHarness(f, nil)
	hr := h.rc.apps["hr"]
	f.Fuzz(func(t *testing.T, plaintext []byte, encrypt string, body []byte) {
		// 1. Sealed plaintext, through the router.
		q, env := signedPost(t, "hr", string(plaintext), h.now)
		req := httptest.NewRequest(http.MethodPost, "/wecom/callback/hr?"+q.Encode(), strings.NewReader(string(env)))
		w := httptest.NewRecorder()
		h.h.ServeHTTP(w, req)
		want, perr := ParseEvent(string(plaintext))
		switch {
		case w.Code >= 500:
			t.Fatalf("sealed %q answered %d %q", plaintext, w.Code, w.Body)
		case perr != nil && w.Code != http.StatusBadRequest:
			t.Fatalf("sealed %q: ParseEvent says %v, router answered %d", plaintext, perr, w.Code)
		case perr == nil && (want.AgentID == 0 || want.AgentID == vecAgent) && w.Code != http.StatusOK:
			t.Fatalf("sealed %q: ParseEvent ok, router answered %d %q", plaintext, w.Code, w.Body)
		}
		dec := getBuf()
		defer putBuf(dec)
		checkAgainstStd(t, string(plaintext))

		// The crypto against an independent implementation: silenceper's
		// util (WeChat's scheme, which WeCom shares: 加解密方案, doc path 91144) opens
		// our seal, and we open its seal, to the same plaintext.
		c := crypterFor(t, "hr")
		var sealed fields
		if err := parseFlat(string(env), &sealed); err != nil {
			t.Fatalf("our envelope of %q does not parse: %v", plaintext, err)
		}
		if _, got, err := util.DecryptMsg(vecCorpID, sealed.v[fEncrypt], vecAESKey); err != nil || !bytes.Equal(got, plaintext) {
			t.Fatalf("silenceper DecryptMsg(our seal of %q) = %q, %v", plaintext, got, err)
		}
		theirs, err := util.EncryptMsg([]byte("0123456789abcdef"), plaintext, vecCorpID, vecAESKey)
		if err != nil {
			t.Fatalf("silenceper EncryptMsg(%q): %v", plaintext, err)
		}
		if got, err := c.Open(nil, string(theirs)); err != nil || !bytes.Equal(got, plaintext) {
			t.Fatalf("Open(silenceper's seal of %q) = %q, %v", plaintext, got, err)
		}

		// 2. A raw Encrypt value, signed correctly. What we decrypt,
		// silenceper decrypts the same (we may refuse more: bad padding).
		ours, oerr := c.Decrypt(encrypt)
		if _, ref, rerr := util.DecryptMsg(vecCorpID, encrypt, vecAESKey); oerr == nil && (rerr != nil || !bytes.Equal(ours, ref)) {
			t.Fatalf("Decrypt(%q) = %q; silenceper DecryptMsg = %q, %v", encrypt, ours, ref, rerr)
		}
		if !strings.Contains(encrypt, "]]>") {
			q, env := envelope(t, encrypt, "218", h.now)
			_, err := h.rc.open(hr, q.Get("msg_signature"), q.Get("timestamp"), q.Get("nonce"), []byte(env), dec)
			checkRejection(t, err)
		}

		// 3. A raw envelope, its Encrypt signed correctly, then not.
		var f fields
		if parseFlat(string(body), &f) == nil && f.v[fEncrypt] != "" {
			c := crypterFor(t, "hr")
			ts := fmt.Sprint(h.now.Unix())
			sig := c.Signature(ts, "n", f.v[fEncrypt])
			_, err := h.rc.open(hr, sig, ts, "n", body, dec)
			checkRejection(t, err)
			bad := strings.Repeat("0", 40)
			if _, err := h.rc.open(hr, bad, ts, "n", body, dec); !errors.Is(err, outcomes[outBadSignature].err) {
				t.Fatalf("open(%q) with a bad signature = %v", body, err)
			}
		} else if _, err := h.rc.open(hr, "", "", "", body, dec); err == nil {
			t.Fatalf("open(%q) without Encrypt succeeded", body)
		}
	})
}

// checkRejection fails unless err is nil or a 4xx of the outcomes table.
func checkRejection(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if o := errorOutcome(err); o == outInternal || outcomes[o].status >= 500 {
		t.Fatalf("error %v maps to %s", err, outcomes[o].label)
	}
}
