package process

import (
	"bufio"
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/yidu-io/yidu/callback/wxcrypt"
	"github.com/yidu-io/yidu/cmd/internal/config"
)

// The hostile-input tests (issue 8, docs/reliability.md "Hostile input")
// attack a real running yidu (every role on MariaDB, Redis and kfake) with
// forged, replayed, malformed, oversized and slow requests, each answered
// with its documented status, and prove that none of them wrote anything:
// every Redis key under the test's prefix with its value, the MySQL counts
// and the Kafka end offsets are the same before and after each request, and
// once more after flushd had time to write.

// Corp B: a second corp with its own app, so that reads can name a message
// of another corp. Its UserIDs overlap corp A's on purpose.
const (
	corpB       = "wwcorpb0000000002"
	corpBToken  = "f1nT0ken"
	corpBAESKey = "ZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXp7fH1+f4CBgoM"
	corpBAgent  = 1000002
	bothCorps   = "hostile-both-corps-token-0123"
	hostileMsg  = "notice-hostile" // corp A; zhangsan and lisi have read it
	malloryMsg  = "notice-mallory" // corp A; makes mallory a known member
	corpBMsg    = "notice-corp-b"  // corp B
	floodReads  = 10_000
)

// hostileStack is the running yidu under attack and what the attacks need.
type hostileStack struct {
	m      *Main
	hr     *wxcrypt.Crypter // corp A, app hr
	fin    *wxcrypt.Crypter // corp B, app fin
	aesKey []byte           // hr's AES key, to seal hand-made plaintexts
	kafka  *kadm.Client
	now    int64 // CreateTime base of the events

	// replay is zhangsan's first, accepted read of hostileMsg.
	replay hostileReq
}

// mustRunHostile starts yidu with two corps, registers the messages and
// delivers the reads the attacks build on, and waits until flushd has
// written them, so that from here on nothing is expected to change.
func mustRunHostile(t *testing.T) *hostileStack {
	t.Helper()
	m := mustRunMainWith(t, func(c *config.Config) {
		c.Apps = append(c.Apps, config.App{Name: "fin", CorpID: corpB, AgentID: corpBAgent, Token: corpBToken, EncodingAESKey: corpBAESKey, ReadButtonKey: "yidu_read"})
		c.Dashboard.Tokens = append(c.Dashboard.Tokens, config.Token{Name: "both", Token: bothCorps, Corps: []string{testCorp, corpB}})
	})
	s := &hostileStack{m: m, now: time.Now().Unix()}
	var err error
	if s.hr, err = wxcrypt.New(testToken, testAESKey, testCorp); err != nil {
		t.Fatal(err)
	}
	if s.fin, err = wxcrypt.New(corpBToken, corpBAESKey, corpB); err != nil {
		t.Fatal(err)
	}
	if s.aesKey, err = base64.StdEncoding.DecodeString(testAESKey + "="); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(m.Config.Kafka.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	s.kafka = kadm.NewClient(cl)

	sentAt := time.Unix(s.now, 0).Add(-time.Minute).UTC()
	regs := []struct {
		token, msgID, app string
		users             []string
	}{
		{apiToken, hostileMsg, "hr", []string{"zhangsan", "lisi", "wangwu", "Alice"}},
		{apiToken, malloryMsg, "hr", []string{"mallory"}},
		{bothCorps, corpBMsg, "fin", []string{"zhangsan", "wangwu"}},
	}
	seedMembers(t, s.m, testCorp, "Alice")
	seedMembers(t, s.m, corpB, "zhangsan", "wangwu")
	for _, r := range regs {
		body := fmt.Sprintf(`{"msgid":%q,"app":%q,"title":"t","sent_at":%q,"audience":{"userids":["%s"]}}`,
			r.msgID, r.app, sentAt.Format(time.RFC3339), strings.Join(r.users, `","`))
		if code := s.api(t, r.token, "application/json", strings.NewReader(body)); code != http.StatusCreated {
			t.Fatalf("register %s = %d; want 201", r.msgID, code)
		}
	}
	s.replay = s.sealed(t, cardEvent("zhangsan", hostileMsg+"@0", s.now))
	for _, req := range []hostileReq{s.replay, s.sealed(t, cardEvent("lisi", hostileMsg+"@0", s.now))} {
		if code, body := s.send(t, req); code != http.StatusOK {
			t.Fatalf("setup read = %d %q; want 200", code, body)
		}
	}
	// The snapshot must see what a read writes, or it proves nothing.
	if st := s.snapshot(t); len(st.redis) == 0 || sumOffsets(st.kafka) != 2 {
		t.Fatalf("after 2 reads: %d Redis keys, Kafka end offsets %v; want keys and 2 deltas", len(st.redis), st.kafka)
	}
	deadline := time.Now().Add(15 * time.Second)
	for s.snapshot(t).mysql["read rows"] != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("flushd did not write the 2 setup reads: %v", s.snapshot(t).mysql)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

// hostileReq is one raw request to the receiver.
type hostileReq struct {
	method string // "" is POST
	path   string // "" is /wecom/callback/hr
	query  string
	body   []byte
}

// sealed is a valid callback of app hr carrying xml, timestamp now.
func (s *hostileStack) sealed(tb testing.TB, xml string) hostileReq {
	tb.Helper()
	return s.sealedAt(tb, s.hr, xml, testAgent, strconv.FormatInt(time.Now().Unix(), 10))
}

// sealedAt is a callback of c carrying xml with the given envelope AgentID
// and query timestamp, correctly signed by c.
func (s *hostileStack) sealedAt(tb testing.TB, c *wxcrypt.Crypter, xml string, agentID int64, ts string) hostileReq {
	tb.Helper()
	q, body, err := c.Post([]byte(xml), agentID, ts, "n0nce")
	if err != nil {
		tb.Fatal(err)
	}
	return hostileReq{query: q.Encode(), body: body}
}

// finCard is xml, a card event written for app hr, delivered as a valid
// callback of corp B's app fin.
func (s *hostileStack) finCard(tb testing.TB, xml string) hostileReq {
	tb.Helper()
	xml = strings.Replace(xml, "<ToUserName>"+testCorp+"<", "<ToUserName>"+corpB+"<", 1)
	xml = strings.Replace(xml, fmt.Sprintf("<AgentID>%d<", testAgent), fmt.Sprintf("<AgentID>%d<", corpBAgent), 1)
	r := s.sealedAt(tb, s.fin, xml, corpBAgent, strconv.FormatInt(time.Now().Unix(), 10))
	r.path = "/wecom/callback/fin"
	return r
}

// signedEncrypt is an envelope of app hr around any Encrypt value, signed
// with hr's token: it passes the signature check and reaches decryption.
func (s *hostileStack) signedEncrypt(encrypt string) hostileReq {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	q := url.Values{"msg_signature": {s.hr.Signature(ts, "n0nce", encrypt)}, "timestamp": {ts}, "nonce": {"n0nce"}}
	body := fmt.Appendf(nil, "<xml><ToUserName><![CDATA[%s]]></ToUserName><Encrypt><![CDATA[%s]]></Encrypt><AgentID><![CDATA[%d]]></AgentID></xml>", testCorp, encrypt, testAgent)
	return hostileReq{query: q.Encode(), body: body}
}

// sealRaw encrypts a hand-made plaintext (whole 16-byte blocks) with hr's
// key as WeCom would, without checking or adding anything.
func (s *hostileStack) sealRaw(pt []byte) string {
	block, _ := aes.NewCipher(s.aesKey)
	ct := make([]byte, len(pt))
	cipher.NewCBCEncrypter(block, s.aesKey[:aes.BlockSize]).CryptBlocks(ct, pt)
	return base64.StdEncoding.EncodeToString(ct)
}

// plaintext is random(16, zero here) + msg_len + msg + receiveID + tail;
// tail nil is WeCom's PKCS#7 padding to 32-byte blocks.
func plaintext(msgLen uint32, msg, receiveID string, tail []byte) []byte {
	b := binary.BigEndian.AppendUint32(make([]byte, 16), msgLen)
	b = append(append(b, msg...), receiveID...)
	if tail == nil {
		pad := 32 - len(b)%32
		tail = bytes.Repeat([]byte{byte(pad)}, pad)
	}
	return append(b, tail...)
}

// mutateEncrypt decodes the Encrypt of a valid callback, changes its
// ciphertext and re-signs it.
func (s *hostileStack) mutateEncrypt(tb testing.TB, xml string, f func(ct []byte) []byte) hostileReq {
	tb.Helper()
	enc, err := s.hr.Encrypt([]byte(xml), nil)
	if err != nil {
		tb.Fatal(err)
	}
	ct, _ := base64.StdEncoding.DecodeString(enc)
	return s.signedEncrypt(base64.StdEncoding.EncodeToString(f(ct)))
}

// send makes the request and returns status and body.
func (s *hostileStack) send(tb testing.TB, r hostileReq) (int, string) {
	tb.Helper()
	method, path := r.method, r.path
	if method == "" {
		method = http.MethodPost
	}
	if path == "" {
		path = "/wecom/callback/hr"
	}
	u := "http://" + s.m.ReceiverAddr + path
	if r.query != "" {
		u += "?" + r.query
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/xml")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}

// api posts body to /api/v1/messages with a bearer token and content type.
func (s *hostileStack) api(tb testing.TB, token, ctype string, body io.Reader) int {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.m.DashboardAddr+"/api/v1/messages", body)
	req.Header.Set("Authorization", "Bearer "+token)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("POST /api/v1/messages: %v", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// waitFlushdCommitted waits until flushd's consumer group has committed
// every non-empty partition of the deltas topic up to its end offset as
// it is now.
func (s *hostileStack) waitFlushdCommitted(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	k := s.m.Config.Kafka
	ends, err := s.kafka.ListEndOffsets(ctx, k.Topic)
	if err != nil {
		tb.Fatalf("end offsets: %v", err)
	}
	for {
		committed, err := s.kafka.FetchOffsets(ctx, k.Group)
		behind := err != nil
		ends.Each(func(o kadm.ListedOffset) {
			if c, ok := committed.Lookup(o.Topic, o.Partition); o.Offset > 0 && (!ok || c.At < o.Offset) {
				behind = true
			}
		})
		if !behind {
			return
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("flushd did not commit up to the end offsets %v: %v (last error %v)", ends, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// writeState is everything a request could have written.
type writeState struct {
	redis map[string]string // key → type and value
	mysql map[string]int64
	kafka map[int32]int64 // partition → end offset
}

// snapshot reads every Redis key under the test's prefix with its value
// (not its TTL), the MySQL counts and the Kafka end offsets.
func (s *hostileStack) snapshot(tb testing.TB) writeState {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := writeState{redis: map[string]string{}, mysql: map[string]int64{}, kafka: map[int32]int64{}}
	rdb := s.m.Redis
	// Each type's command and its value as text, members in order.
	values := map[string]struct {
		cmd  string
		read func(k string) (string, error)
	}{
		"string": {"GET", func(k string) (string, error) {
			b, err := rdb.Get(ctx, k).Bytes()
			return hex.EncodeToString(b), err
		}},
		"hash": {"HGETALL", func(k string) (string, error) {
			h, err := rdb.HGetAll(ctx, k).Result()
			var v string
			for _, f := range slices.Sorted(maps.Keys(h)) {
				v += f + "=" + h[f] + ";"
			}
			return v, err
		}},
		"zset": {"ZRANGE", func(k string) (string, error) {
			z, err := rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
			return fmt.Sprint(z), err
		}},
		"set": {"SMEMBERS", func(k string) (string, error) {
			m, err := rdb.SMembers(ctx, k).Result()
			slices.Sort(m)
			return fmt.Sprint(m), err
		}},
	}
	iter := rdb.Scan(ctx, 0, s.m.Config.Redis.Prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		typ, err := rdb.Type(ctx, k).Result()
		if err != nil {
			tb.Fatalf("redis TYPE %s: %v", k, err)
		}
		v := "unexpected type"
		if r, ok := values[typ]; ok {
			if v, err = r.read(k); err != nil {
				tb.Fatalf("redis %s %s: %v", r.cmd, k, err)
			}
		}
		st.redis[k] = typ + ":" + v
	}
	if err := iter.Err(); err != nil {
		tb.Fatalf("redis SCAN: %v", err)
	}
	for name, q := range map[string]string{
		"read rows":      "SELECT COUNT(*) FROM message_read_record WHERE is_read = 1",
		"record rows":    "SELECT COUNT(*) FROM message_read_record",
		"read_time sum":  "SELECT CAST(COALESCE(SUM(UNIX_TIMESTAMP(read_time)), 0) AS SIGNED) FROM message_read_record",
		"users":          "SELECT COUNT(*) FROM users",
		"messages":       "SELECT COUNT(*) FROM messages",
		"read_orphans":   "SELECT COUNT(*) FROM read_orphans",
		"message_sends":  "SELECT COUNT(*) FROM message_sends",
		"uid_seq next":   "SELECT CAST(COALESCE(SUM(next_uid), 0) AS SIGNED) FROM uid_seq",
		"user_depts":     "SELECT COUNT(*) FROM user_departments",
		"departments":    "SELECT COUNT(*) FROM departments",
		"active members": "SELECT COUNT(*) FROM users WHERE status = 1",
	} {
		var n int64
		if err := s.m.DB.QueryRowContext(ctx, q).Scan(&n); err != nil {
			tb.Fatalf("mysql %s: %v", name, err)
		}
		st.mysql[name] = n
	}
	ends, err := s.kafka.ListEndOffsets(ctx, s.m.Config.Kafka.Topic)
	if err != nil {
		tb.Fatalf("kafka ListEndOffsets: %v", err)
	}
	ends.Each(func(o kadm.ListedOffset) { st.kafka[o.Partition] = o.Offset })
	return st
}

func sumOffsets(m map[int32]int64) (n int64) {
	for _, o := range m {
		n += o
	}
	return n
}

// diff describes how after differs from before; "" when it does not.
func (before writeState) diff(after writeState) string {
	var d []string
	for _, k := range slices.Sorted(maps.Keys(after.redis)) {
		if b, ok := before.redis[k]; !ok {
			d = append(d, fmt.Sprintf("redis key %s created (%.80s)", k, after.redis[k]))
		} else if b != after.redis[k] {
			d = append(d, fmt.Sprintf("redis key %s changed: %.80s → %.80s", k, b, after.redis[k]))
		}
	}
	for k := range before.redis {
		if _, ok := after.redis[k]; !ok {
			d = append(d, "redis key "+k+" deleted")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(before.mysql)) {
		if before.mysql[k] != after.mysql[k] {
			d = append(d, fmt.Sprintf("mysql %s: %d → %d", k, before.mysql[k], after.mysql[k]))
		}
	}
	if !maps.Equal(before.kafka, after.kafka) {
		d = append(d, fmt.Sprintf("kafka end offsets: %v → %v", before.kafka, after.kafka))
	}
	return strings.Join(d, "; ")
}

// card is a template card event of app hr with any FromUserName, TaskId and
// extra elements, unlike cardEvent without CDATA around the values (the
// caller escapes them).
func card(from, taskID string, at int64, extra string) string {
	return fmt.Sprintf(`<xml><ToUserName>%s</ToUserName><FromUserName>%s</FromUserName><CreateTime>%d</CreateTime><MsgType>event</MsgType><Event>template_card_event</Event><EventKey>yidu_read</EventKey><TaskId>%s</TaskId><CardType>button_interaction</CardType><ResponseCode>rc</ResponseCode><AgentID>%d</AgentID>%s</xml>`,
		testCorp, from, at, taskID, testAgent, extra)
}

// billionLaughs is the classic entity expansion bomb's DTD.
const billionLaughs = `<?xml version="1.0"?><!DOCTYPE xml [<!ENTITY lol "lol">` +
	`<!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">` +
	`<!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">` +
	`<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">` +
	`<!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">` +
	`<!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">` +
	`<!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">` +
	`<!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">` +
	`<!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">` +
	`<!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">]>`

// TestHostileInput is issue 8's "Hostile and bad input" against the real
// stack. Every case of the tables writes nothing; the slow clients and the
// flood run alongside, and the whole is checked once more at the end.
func TestHostileInput(t *testing.T) {
	s := mustRunHostile(t)
	start := s.snapshot(t)

	t.Run("attacks", func(t *testing.T) {
		t.Run("requests", func(t *testing.T) {
			t.Parallel()
			t.Run("callback", s.hostileCallbacks)
			t.Run("api", s.hostileAPI)
			t.Run("flood", s.hostileFlood)
		})
		t.Run("slow headers", func(t *testing.T) {
			t.Parallel()
			s.slowHeaders(t)
		})
		t.Run("slow body", func(t *testing.T) {
			t.Parallel()
			s.slowBody(t)
		})
		t.Run("10 MB body", func(t *testing.T) {
			t.Parallel()
			s.hugeBodies(t)
		})
	})

	// Whatever a request published is in MySQL once flushd has committed
	// every partition to its end offset (it commits only what it wrote):
	// wait for that, not for a guessed time.
	s.waitFlushdCommitted(t)
	if d := start.diff(s.snapshot(t)); d != "" {
		t.Errorf("after every hostile request: %s; want nothing written", d)
	}
	// The receiver still works, and knows members as WeCom does, whatever
	// the case of their UserID (user/create, doc path 90195): WANGWU is
	// the unread recipient wangwu.
	before := s.snapshot(t)
	if code, body := s.send(t, s.sealed(t, cardEvent("WANGWU", hostileMsg+"@0", s.now))); code != http.StatusOK {
		t.Errorf("a valid read after the attacks = %d %q; want 200", code, body)
	}
	if d := before.diff(s.snapshot(t)); !strings.Contains(d, ":read changed") {
		t.Errorf("WANGWU's read of the card wrote %q; want wangwu's read bit set", d)
	}
}

// hostileCallbacks sends each hostile callback and checks its status, the
// outcome label the receiver answers with (so the case failed where it
// meant to) and that it wrote nothing.
func (s *hostileStack) hostileCallbacks(t *testing.T) {
	now := time.Now().Unix()
	ts := strconv.FormatInt(now, 10)
	valid := card("wangwu", hostileMsg+"@0", s.now, "") // a new read if it got through
	validReq := s.sealed(t, valid)
	otherBody := s.sealed(t, card("Alice", hostileMsg+"@0", s.now, ""))
	forger, _ := wxcrypt.New("not-the-token", testAESKey, testCorp)
	otherCorp, _ := wxcrypt.New(testToken, testAESKey, corpB) // same token and key, ReceiveId of corp B
	sig := func(r hostileReq, edit func(url.Values)) hostileReq {
		q, _ := url.ParseQuery(r.query)
		edit(q)
		r.query = q.Encode()
		return r
	}
	deep := func(n int) string { return strings.Repeat("<a>", n) + strings.Repeat("</a>", n) }
	// Each UserID and TaskId below is XML-escaped where the XML needs it;
	// what the receiver sees after parsing is in the name.
	long := strings.Repeat("a", 129)
	tests := []struct {
		name  string
		req   hostileReq
		want  int
		label string // the outcome label the receiver answers; "" for 200
	}{
		// Signatures and timestamps.
		{"forged signature (wrong token)", s.sealedAt(t, forger, valid, testAgent, ts), 401, "bad_signature"},
		{"signature of another body", hostileReq{query: validReq.query, body: otherBody.body}, 401, "bad_signature"},
		{"signature in upper case", sig(validReq, func(q url.Values) { q.Set("msg_signature", strings.ToUpper(q.Get("msg_signature"))) }), 401, "bad_signature"},
		{"no msg_signature", sig(validReq, func(q url.Values) { q.Del("msg_signature") }), 401, "bad_signature"},
		{"no query at all", hostileReq{body: validReq.body}, 401, "bad_signature"},
		{"no nonce", sig(validReq, func(q url.Values) { q.Del("nonce") }), 401, "bad_signature"},
		{"no timestamp (signed without)", s.sealedAt(t, s.hr, valid, testAgent, ""), 401, "stale_timestamp"},
		{"timestamp not a number (signed)", s.sealedAt(t, s.hr, valid, testAgent, "now"), 401, "stale_timestamp"},
		{"timestamp 10 min 30 s old (signed)", s.sealedAt(t, s.hr, valid, testAgent, strconv.FormatInt(now-630, 10)), 401, "stale_timestamp"},
		{"timestamp a day old (signed)", s.sealedAt(t, s.hr, valid, testAgent, strconv.FormatInt(now-86400, 10)), 401, "stale_timestamp"},
		{"timestamp 0 (signed)", s.sealedAt(t, s.hr, valid, testAgent, "0"), 401, "stale_timestamp"},
		{"timestamp 10 min 30 s ahead (signed)", s.sealedAt(t, s.hr, valid, testAgent, strconv.FormatInt(now+630, 10)), 401, "stale_timestamp"},
		{"timestamp overflowing int64 (signed)", s.sealedAt(t, s.hr, valid, testAgent, "99999999999999999999"), 401, "stale_timestamp"},
		{"replay of an accepted callback within the window", s.replay, 200, ""},
		{"replay of an accepted callback, second time", s.replay, 200, ""},
		{"GET verification with a forged signature", hostileReq{method: http.MethodGet, query: sig(validReq, func(q url.Values) { q.Set("echostr", "AAAA"); q.Set("msg_signature", strings.Repeat("0", 40)) }).query}, 401, "bad_signature"},
		{"unknown app", hostileReq{path: "/wecom/callback/nosuch", query: validReq.query, body: validReq.body}, 404, "unknown_app"},
		{"app name with traversal", hostileReq{path: "/wecom/callback/..%2Fhr", query: validReq.query, body: validReq.body}, 404, "unknown_app"},

		// Wrong corp, wrong agent.
		{"ReceiveId of another corp, same token and key", s.sealedAt(t, otherCorp, valid, testAgent, ts), 400, "receive_id"},
		{"corp B's callback sent to corp A's app", s.sealedAt(t, s.fin, card("zhangsan", corpBMsg+"@0", s.now, ""), corpBAgent, ts), 401, "bad_signature"},
		{"envelope AgentID of another app", s.sealedAt(t, s.hr, valid, corpBAgent, ts), 400, "agent_id"},
		{"envelope AgentID not a number", hostileReq{query: validReq.query, body: bytes.Replace(validReq.body, []byte("<![CDATA[218]]>"), []byte("<![CDATA[218 OR 1=1]]>"), 1)}, 400, "agent_id"},
		{"message AgentID of another app", s.sealed(t, strings.Replace(valid, "<AgentID>218<", "<AgentID>1000002<", 1)), 400, "agent_id"},

		// Ciphertext.
		{"truncated ciphertext (half a block cut)", s.mutateEncrypt(t, valid, func(ct []byte) []byte { return ct[:len(ct)-16] }), 400, "bad_padding"},
		{"truncated ciphertext (first block only)", s.mutateEncrypt(t, valid, func(ct []byte) []byte { return ct[:32] }), 400, "bad_padding"},
		// The extra block decrypts to noise: bad padding, or (1 in 256) a
		// pad of 1 and then a wrong ReceiveId.
		{"ciphertext with a random extra block", s.mutateEncrypt(t, valid, func(ct []byte) []byte { return append(ct, bytes.Repeat([]byte{0x5a}, 32)...) }), 400, ""},
		{"extra block of valid padding", s.signedEncrypt(s.sealRaw(append(plaintext(uint32(len(valid)), valid, testCorp, nil), bytes.Repeat([]byte{32}, 32)...))), 400, "receive_id"},
		{"pad byte 0", s.signedEncrypt(s.sealRaw(plaintext(uint32(len(valid)), valid, testCorp, padWith(20+len(valid)+len(testCorp), 0)))), 400, "bad_padding"},
		{"pad byte 33", s.signedEncrypt(s.sealRaw(plaintext(uint32(len(valid)), valid, testCorp, padWith(20+len(valid)+len(testCorp), 33)))), 400, "bad_padding"},
		{"inconsistent pad bytes", s.signedEncrypt(s.sealRaw(inconsistentPad(plaintext(uint32(len(valid)), valid, testCorp, nil)))), 400, "bad_padding"},
		{"msg_len beyond the plaintext", s.signedEncrypt(s.sealRaw(plaintext(1<<20, valid, testCorp, nil))), 400, "bad_length"},
		{"plaintext shorter than its header", s.signedEncrypt(s.sealRaw(bytes.Repeat([]byte{31}, 32))), 400, "bad_length"},
		{"base64 garbage", s.signedEncrypt("!!not*base64$$"), 400, "bad_base64"},
		{"base64 of nothing", s.signedEncrypt("===="), 400, "bad_base64"},
		{"empty Encrypt", s.signedEncrypt(""), 400, "bad_xml"},

		// XML.
		{"empty body", hostileReq{query: validReq.query, body: []byte{}}, 400, "bad_xml"},
		{"no Encrypt element", hostileReq{query: validReq.query, body: []byte("<xml><ToUserName>x</ToUserName></xml>")}, 400, "bad_xml"},
		{"JSON instead of XML", hostileReq{query: validReq.query, body: []byte(`{"Encrypt":"x"}`)}, 400, "bad_xml"},
		{"envelope with DOCTYPE (billion laughs)", hostileReq{query: validReq.query, body: []byte(billionLaughs + "<xml><Encrypt>&lol9;</Encrypt></xml>")}, 400, "bad_xml"},
		{"envelope with an external entity", hostileReq{query: validReq.query, body: []byte(`<!DOCTYPE xml [<!ENTITY x SYSTEM "file:///etc/passwd">]><xml><Encrypt>&x;</Encrypt></xml>`)}, 400, "bad_xml"},
		{"envelope nested 6000 deep", hostileReq{query: validReq.query, body: bytes.Replace(validReq.body, []byte("</xml>"), []byte("<Deep>"+deep(6000)+"</Deep></xml>"), 1)}, 400, "bad_xml"},
		{"envelope with invalid UTF-8", hostileReq{query: validReq.query, body: bytes.Replace(validReq.body, []byte(testCorp), []byte(testCorp+"\xff\xfe"), 1)}, 400, "bad_xml"},
		{"envelope with a duplicate Encrypt", hostileReq{query: validReq.query, body: bytes.Replace(validReq.body, []byte("</xml>"), []byte("<Encrypt>AAAA</Encrypt></xml>"), 1)}, 400, "bad_xml"},
		{"message with DOCTYPE (billion laughs)", s.sealed(t, billionLaughs+card("&lol9;", hostileMsg+"@0", s.now, "")), 400, "bad_xml"},
		{"message with an undeclared entity", s.sealed(t, card("&lol9;", hostileMsg+"@0", s.now, "")), 400, "bad_xml"},
		{"message nested 5000 deep", s.sealed(t, card("wangwu", hostileMsg+"@0", s.now, "<Deep>"+deep(5000)+"</Deep>")), 400, "bad_xml"},
		{"message with an attribute", s.sealed(t, strings.Replace(valid, "<TaskId>", `<TaskId a="1">`, 1)), 400, "bad_xml"},
		{"message with a duplicate FromUserName", s.sealed(t, card("wangwu", hostileMsg+"@0", s.now, "<FromUserName>zhangsan</FromUserName>")), 400, "bad_xml"},
		{"huge message (40 KB element) within 64 KiB, already read", s.sealed(t, card("zhangsan", hostileMsg+"@1", s.now, "<Padding>"+strings.Repeat("x", 40_000)+"</Padding>")), 200, ""},
		{"huge TaskId (40 KB) within 64 KiB", s.sealed(t, card("wangwu", strings.Repeat("a", 40_000), s.now, "")), 400, "bad_xml"},
		{"body over 64 KiB, signed", s.sealed(t, card("wangwu", hostileMsg+"@0", s.now, "<Padding>"+strings.Repeat("x", 50_000)+"</Padding>")), 413, "too_large"},
		{"FromUserName with invalid UTF-8", s.sealed(t, card("wang\xffwu", hostileMsg+"@0", s.now, "")), 400, "bad_xml"},
		{"FromUserName with an overlong encoding", s.sealed(t, card("wang\xc0\xafwu", hostileMsg+"@0", s.now, "")), 400, "bad_xml"},
		{"FromUserName with a surrogate", s.sealed(t, card("wang\xed\xa0\x80wu", hostileMsg+"@0", s.now, "")), 400, "bad_xml"},
		{"FromUserName with NUL", s.sealed(t, card("wangwu\x00", hostileMsg+"@0", s.now, "")), 400, "bad_xml"},
		{"FromUserName with &#0;", s.sealed(t, card("wangwu&#0;", hostileMsg+"@0", s.now, "")), 400, "bad_xml"},
		{"TaskId with NUL", s.sealed(t, card("wangwu", hostileMsg+"\x00@0", s.now, "")), 400, "bad_xml"},

		// UserIDs: a signed callback, so WeCom's word; none is a member.
		{`UserID wang'wu`, s.sealed(t, card("wang&apos;wu", hostileMsg+"@0", s.now, "")), 200, ""},
		{`UserID "wangwu"`, s.sealed(t, card("&quot;wangwu&quot;", hostileMsg+"@0", s.now, "")), 200, ""},
		{`UserID wangwu%`, s.sealed(t, card("wangwu%", hostileMsg+"@0", s.now, "")), 200, ""},
		{`UserID %`, s.sealed(t, card("%", hostileMsg+"@0", s.now, "")), 200, ""},
		{`UserID ' OR 1=1 --`, s.sealed(t, card("&apos; OR 1=1 --", hostileMsg+"@0", s.now, "")), 200, ""},
		{`UserID wangwu' OR '1'='1`, s.sealed(t, card("wangwu&apos; OR &apos;1&apos;=&apos;1", hostileMsg+"@0", s.now, "")), 200, ""},
		{`UserID '; DROP TABLE users; --`, s.sealed(t, card("&apos;; DROP TABLE users; --", hostileMsg+"@0", s.now, "")), 200, ""},
		{`UserID <script>alert(1)</script>`, s.sealed(t, card("&lt;script&gt;alert(1)&lt;/script&gt;", hostileMsg+"@0", s.now, "")), 200, ""},
		{`UserID "wangwu " (PAD SPACE collation)`, s.sealed(t, card("wangwu ", hostileMsg+"@0", s.now, "")), 200, ""},
		{`UserID NOBODY (an unknown member in any case)`, s.sealed(t, card("NOBODY", hostileMsg+"@0", s.now, "")), 200, ""},
		{"UserID 129 characters", s.sealed(t, card(long, hostileMsg+"@0", s.now, "")), 200, ""},
		{"UserID 10,000 characters", s.sealed(t, card(strings.Repeat("w", 10_000), hostileMsg+"@0", s.now, "")), 200, ""},
		{"UserID non-ASCII 王五", s.sealed(t, card("王五", hostileMsg+"@0", s.now, "")), 200, ""},
		{"UserID with an RTL override", s.sealed(t, card("wangwu\u202e", hostileMsg+"@0", s.now, "")), 200, ""},
		{"UserID empty", s.sealed(t, card("", hostileMsg+"@0", s.now, "")), 400, "bad_xml"},

		// TaskIds: ParseEvent refuses anything but a task_id
		// ([0-9A-Za-z_\-@]{1,128}, callback/event.go validTaskID).
		{`TaskId notice-hostile'@0`, s.sealed(t, card("wangwu", hostileMsg+"&apos;@0", s.now, "")), 400, "bad_xml"},
		{`TaskId notice-hostile%@0`, s.sealed(t, card("wangwu", hostileMsg+"%@0", s.now, "")), 400, "bad_xml"},
		{`TaskId ' OR 1=1 --`, s.sealed(t, card("wangwu", "&apos; OR 1=1 --", s.now, "")), 400, "bad_xml"},
		{`TaskId <script>@0`, s.sealed(t, card("wangwu", "&lt;script&gt;@0", s.now, "")), 400, "bad_xml"},
		{`TaskId notice-*@0 (Redis glob)`, s.sealed(t, card("wangwu", "notice-*@0", s.now, "")), 400, "bad_xml"},
		{`TaskId x}{y@0 (Redis hash tag)`, s.sealed(t, card("wangwu", "x}{y@0", s.now, "")), 400, "bad_xml"},
		{"TaskId of 129 characters", s.sealed(t, card("wangwu", long, s.now, "")), 400, "bad_xml"},
		{"TaskId non-ASCII 通知@0", s.sealed(t, card("wangwu", "通知@0", s.now, "")), 400, "bad_xml"},
		{"TaskId empty", s.sealed(t, card("wangwu", "", s.now, "")), 400, "bad_xml"},
		{"TaskId @0 (empty msgid)", s.sealed(t, card("wangwu", "@0", s.now, "")), 200, ""},
		{`TaskId notice-hostile@0' OR 1=1 -- (read by zhangsan)`, s.sealed(t, card("zhangsan", hostileMsg+"@0&apos; OR 1=1 --", s.now, "")), 400, "bad_xml"},

		// Reads that name no read of a recipient.
		{"message of corp B through corp A's app", s.sealed(t, card("zhangsan", corpBMsg+"@0", s.now, "")), 200, ""},
		{"message of corp B, its recipient wangwu, through corp A", s.sealed(t, card("wangwu", corpBMsg+"@0", s.now, "")), 200, ""},
		{"message of corp A through corp B's app, by an unread recipient in A", s.finCard(t, card("wangwu", hostileMsg+"@0", s.now, "")), 200, ""},
		{"non-recipient (known member mallory)", s.sealed(t, card("mallory", hostileMsg+"@0", s.now, "")), 200, ""},
		{"unknown msgid", s.sealed(t, card("wangwu", "nosuch@0", s.now, "")), 200, ""},
		{"unknown msgid of 128 characters", s.sealed(t, card("wangwu", strings.Repeat("z", 128), s.now, "")), 200, ""},
		{"unknown member", s.sealed(t, card("nobody", hostileMsg+"@0", s.now, "")), 200, ""},
		{"already read (lisi again)", s.sealed(t, card("lisi", hostileMsg+"@0", s.now+60, "")), 200, ""},
		{"another button of the card", s.sealed(t, strings.Replace(valid, "yidu_read", "other", 1)), 200, ""},
		{"enter_agent of an unknown member", s.sealed(t, enterAgent("nobody", s.now)), 200, ""},
		{"enter_agent with a hostile UserID", s.sealed(t, enterAgent("' OR 1=1 --", s.now)), 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := s.snapshot(t)
			code, body := s.send(t, tc.req)
			if code != tc.want {
				t.Errorf("status %d %.200q; want %d", code, body, tc.want)
			}
			if tc.label != "" && !strings.HasPrefix(body, tc.label+" ") {
				t.Errorf("answered %.200q; want outcome %s", strings.TrimSpace(body), tc.label)
			}
			if d := before.diff(s.snapshot(t)); d != "" {
				t.Errorf("%s; want nothing written", d)
			}
		})
	}
}

// padWith pads a content of n bytes to 32-byte blocks with bytes of value
// v instead of the pad length.
func padWith(n int, v byte) []byte {
	return bytes.Repeat([]byte{v}, 32-n%32)
}

// inconsistentPad changes the first pad byte of a padded plaintext.
func inconsistentPad(pt []byte) []byte {
	pad := int(pt[len(pt)-1])
	if pad == 1 {
		// One pad byte cannot disagree with itself; make it two.
		pt[len(pt)-1] = 2
		return pt
	}
	pt[len(pt)-pad]++
	return pt
}

// hostileAPI registers messages with hostile fields through the dashboard
// with a valid bearer token: each is refused, nothing is written.
func (s *hostileStack) hostileAPI(t *testing.T) {
	reg := func(msgID string, users ...string) string {
		id := ""
		if msgID != "" {
			id = fmt.Sprintf(`"msgid":%s,`, jsonString(msgID))
		}
		us := make([]string, len(users))
		for i, u := range users {
			us[i] = jsonString(u)
		}
		return fmt.Sprintf(`{%s"app":"hr","title":"t","audience":{"userids":[%s]}}`, id, strings.Join(us, ","))
	}
	const ok = "api-hostile"
	tests := []struct {
		name  string
		token string
		ctype string
		body  string
		want  int
	}{
		{"msgid with a quote", apiToken, "", reg(`notice'1`, "zhangsan"), 400},
		{"msgid with %", apiToken, "", reg(`notice%1`, "zhangsan"), 400},
		{"msgid ' OR 1=1 --", apiToken, "", reg(`' OR 1=1 --`, "zhangsan"), 400},
		{"msgid <script>", apiToken, "", reg(`<script>alert(1)</script>`, "zhangsan"), 400},
		{"msgid with @", apiToken, "", reg(`notice@1`, "zhangsan"), 400},
		{"msgid with NUL", apiToken, "", reg("notice\x00", "zhangsan"), 400},
		{"msgid non-ASCII", apiToken, "", reg("通知", "zhangsan"), 400},
		{"msgid with a Redis glob", apiToken, "", reg("notice-*", "zhangsan"), 400},
		{"msgid with a Redis hash tag", apiToken, "", reg("x}{y", "zhangsan"), 400},
		{"msgid of 101 characters", apiToken, "", reg(strings.Repeat("m", 101), "zhangsan"), 400},
		{"msgid of 129 characters", apiToken, "", reg(strings.Repeat("m", 129), "zhangsan"), 400},
		{"userid with a quote", apiToken, "", reg(ok, "zhangsan", `o'brien`), 400},
		{"userid with %", apiToken, "", reg(ok, "zhangsan", "100%"), 400},
		{"userid ' OR 1=1 --", apiToken, "", reg(ok, "zhangsan", "' OR 1=1 --"), 400},
		{"userid <script>", apiToken, "", reg(ok, "zhangsan", "<script>alert(1)</script>"), 400},
		{"userid with NUL", apiToken, "", reg(ok, "zhangsan", "eve\x00"), 400},
		{"userid non-ASCII", apiToken, "", reg(ok, "zhangsan", "王五"), 400},
		{"userid with a trailing space", apiToken, "", reg(ok, "zhangsan", "wangwu "), 400},
		{"userid of 65 characters", apiToken, "", reg(ok, "zhangsan", strings.Repeat("u", 65)), 400},
		{"userid of 129 characters", apiToken, "", reg(ok, "zhangsan", strings.Repeat("u", 129)), 400},
		{"userid empty", apiToken, "", reg(ok, "zhangsan", ""), 400},
		{"unknown field", apiToken, "", strings.Replace(reg(ok, "zhangsan"), `"title"`, `"is_read":1,"title"`, 1), 400},
		{"unknown field in audience", apiToken, "", strings.Replace(reg(ok, "zhangsan"), `"userids"`, `"uids":[1],"userids"`, 1), 400},
		{"not JSON", apiToken, "", "msgid=api-hostile&app=hr", 400},
		{"title of 2 MB (body > 1 MB)", apiToken, "", strings.Replace(reg(ok, "zhangsan"), `"title":"t"`, `"title":"`+strings.Repeat("t", 2<<20)+`"`, 1), 400},
		{"body over the 8 MiB limit", apiToken, "", strings.Replace(reg(ok, "zhangsan"), `"title":"t"`, `"title":"`+strings.Repeat("t", 9<<20)+`"`, 1), 413},
		{"app of a corp the token is not granted", apiToken, "", strings.Replace(reg(ok, "zhangsan"), `"hr"`, `"fin"`, 1), 400},
		{"sent_at in year 1", apiToken, "", strings.Replace(reg(ok, "zhangsan"), `"title"`, `"sent_at":"0001-01-01T00:00:00Z","title"`, 1), 400},
		// The card's fields (issue 12): WeCom's limits, a link yidu signs.
		{"body of 161 characters", apiToken, "", strings.Replace(reg(ok, "zhangsan"), `"title"`, `"body":"`+strings.Repeat("文", 161)+`","title"`, 1), 400},
		{"body with a control character", apiToken, "", strings.Replace(reg(ok, "zhangsan"), `"title"`, `"body":"a\u001bb","title"`, 1), 400},
		{"url javascript:", apiToken, "", strings.Replace(reg(ok, "zhangsan"), `"title"`, `"url":"javascript:alert(1)","title"`, 1), 400},
		{"url without a host", apiToken, "", strings.Replace(reg(ok, "zhangsan"), `"title"`, `"url":"https:///p","title"`, 1), 400},
		{"url with a newline (header injection)", apiToken, "", strings.Replace(reg(ok, "zhangsan"), `"title"`, `"url":"https://x.example.com/\r\nSet-Cookie: a=b","title"`, 1), 400},
		{"url of 2049 bytes", apiToken, "", strings.Replace(reg(ok, "zhangsan"), `"title"`, `"url":"https://x.example.com/`+strings.Repeat("a", 2049-len("https://x.example.com/"))+`","title"`, 1), 400},
		{"title of 37 characters with send", apiToken, "", strings.Replace(reg(ok, "zhangsan"), `"title":"t"`, `"send":true,"title":"`+strings.Repeat("题", 37)+`"`, 1), 400},
		// docs/openapi.yaml takes application/json only; each would be a
		// new message (own msgid) if accepted.
		{"content type text/plain", apiToken, "text/plain", reg("api-ctype-text", "zhangsan"), 415},
		{"content type form", apiToken, "application/x-www-form-urlencoded", reg("api-ctype-form", "zhangsan"), 415},
		{"no content type", apiToken, "-", reg("api-ctype-none", "zhangsan"), 415},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := s.snapshot(t)
			ctype := tc.ctype
			switch ctype {
			case "":
				ctype = "application/json"
			case "-":
				ctype = ""
			}
			start := time.Now()
			if code := s.api(t, tc.token, ctype, strings.NewReader(tc.body)); code != tc.want {
				t.Errorf("status %d; want %d", code, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("answered after %v; want within 5 s", d)
			}
			if d := before.diff(s.snapshot(t)); d != "" {
				t.Errorf("%s; want nothing written", d)
			}
		})
	}
}

// jsonString quotes s for JSON, keeping invalid UTF-8 and NUL escaped.
func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// hostileFlood sends floodReads distinct read events of one member (lisi,
// who has read the message: a processed one is a duplicate) as fast as 16
// senders can. All are answered 200; at most burst + rate × elapsed are
// processed, the rest counted in yidu_callback_rate_limited_total.
func (s *hostileStack) hostileFlood(t *testing.T) {
	reqs := make([]hostileReq, floodReads)
	for i := range reqs {
		reqs[i] = s.sealed(t, cardEvent("lisi", hostileMsg+"@"+strconv.Itoa(i), s.now+int64(i%600)))
	}
	before := s.snapshot(t)
	limited0 := s.metric(t, "yidu_callback_rate_limited_total", `app="hr"`)
	dups0 := s.metric(t, "yidu_bitmap_reads_total", `outcome="duplicate"`, `source="card"`)

	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var (
		next, not200 atomic.Int64
		wg           sync.WaitGroup
		firstErr     atomic.Value
	)
	start := time.Now()
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= floodReads {
					return
				}
				resp, err := client.Post("http://"+s.m.ReceiverAddr+"/wecom/callback/hr?"+reqs[i].query, "text/xml", bytes.NewReader(reqs[i].body))
				if err != nil {
					firstErr.CompareAndSwap(nil, err.Error())
					not200.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					not200.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if n := not200.Load(); n != 0 {
		t.Errorf("flood: %d of %d not answered 200 (first error %v)", n, floodReads, firstErr.Load())
	}
	cfg := s.m.Config.Receiver
	limited := s.metric(t, "yidu_callback_rate_limited_total", `app="hr"`) - limited0
	processed := floodReads - limited
	// The bucket starts full (burst) and refills at rate; +1 for the token
	// refilled while the last request was in flight.
	most := float64(cfg.MemberBurst) + cfg.MemberRate*elapsed.Seconds() + 1
	t.Logf("flood: %d reads of one member in %v (%.0f/s): %.0f processed, %.0f rate-limited (at most %.0f may be processed)",
		floodReads, elapsed.Round(time.Millisecond), floodReads/elapsed.Seconds(), processed, limited, most)
	// At least the burst, less the two reads of lisi before the flood.
	if processed > most || processed < float64(cfg.MemberBurst-2) {
		t.Errorf("flood: %.0f processed in %v; want between burst %d and %.0f", processed, elapsed, cfg.MemberBurst, most)
	}
	// Every processed one reached the read path as a duplicate; the limited
	// ones did not reach it.
	if dups := s.metric(t, "yidu_bitmap_reads_total", `outcome="duplicate"`, `source="card"`) - dups0; dups != processed {
		t.Errorf("flood: %.0f duplicates recorded; want %.0f (the processed ones)", dups, processed)
	}
	if d := before.diff(s.snapshot(t)); d != "" {
		t.Errorf("flood: %s; want nothing written", d)
	}
}

// metric returns the value of the series of name whose labels include
// every one of labels (`k="v"`), read from the receiver's /metrics.
func (s *hostileStack) metric(tb testing.TB, name string, labels ...string) float64 {
	tb.Helper()
	resp, err := http.Get("http://" + s.m.ReceiverAddr + "/metrics")
	if err != nil {
		tb.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var sum float64
	found := false
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name+"{")
		if !ok {
			continue
		}
		lbls, val, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		match := true
		for _, l := range labels {
			if !slices.Contains(strings.Split(lbls, ","), l) {
				match = false
			}
		}
		if !match {
			continue
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			tb.Fatalf("metric %s: %q: %v", name, line, err)
		}
		sum += v
		found = true
	}
	if !found {
		tb.Fatalf("metric %s{%s} not served", name, strings.Join(labels, ","))
	}
	return sum
}

// The HTTP servers' timeouts (process.ReceiverServer and
// dashboardServer); not configurable, so the slow-client tests wait for
// them.
const (
	wantReadHeaderTimeout = 5 * time.Second
	wantReadTimeout       = 10 * time.Second
	timeoutSlack          = 2 * time.Second
)

// checkServerTimeouts asserts the timeouts of every server Main runs.
func (s *hostileStack) checkServerTimeouts(t *testing.T) {
	if len(s.m.servers) == 0 {
		t.Fatal("Main runs no HTTP server")
	}
	// The dashboard has no WriteTimeout (streams, exports: it sets a
	// deadline per request) and gives an 8 MiB registration 60 s.
	want := map[string][4]time.Duration{
		s.m.ReceiverAddr:  {wantReadHeaderTimeout, wantReadTimeout, 15 * time.Second, 60 * time.Second},
		s.m.DashboardAddr: {wantReadHeaderTimeout, time.Minute, 0, 2 * time.Minute},
	}
	for _, srv := range s.m.servers {
		got := [4]time.Duration{srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout}
		w, ok := want[srv.Addr]
		if !ok {
			continue
		}
		if got != w || srv.MaxHeaderBytes != 16<<10 {
			t.Errorf("server %s: timeouts (header, read, write, idle) %v, max header %d; want %v, 16384",
				srv.Addr, got, srv.MaxHeaderBytes, w)
		}
	}
}

// trickle connects to the receiver for at most timeout, sends head, then
// slow one byte every 200 ms in the background until the test ends, and
// returns the connection and when it was opened.
func (s *hostileStack) trickle(tb testing.TB, timeout time.Duration, head string, slow []byte) (net.Conn, time.Time) {
	tb.Helper()
	conn, err := net.Dial("tcp", s.m.ReceiverAddr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	start := time.Now()
	_ = conn.SetDeadline(start.Add(timeout))
	_, _ = io.WriteString(conn, head)
	stop := make(chan struct{})
	tb.Cleanup(func() { close(stop) })
	go func() {
		for i := range slow {
			if _, err := conn.Write(slow[i : i+1]); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return conn, start
}

// slowHeaders is a slow-loris client: it sends its request line and
// headers one byte every 200 ms and never finishes them. The server must
// close the connection at ReadHeaderTimeout; the handler never runs.
func (s *hostileStack) slowHeaders(t *testing.T) {
	s.checkServerTimeouts(t)
	head := "POST /wecom/callback/hr?" + s.replay.query + " HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\nX-Slow: " + strings.Repeat("a", 1000)
	conn, start := s.trickle(t, wantReadHeaderTimeout+timeoutSlack, "", []byte(head))
	b, err := io.ReadAll(conn)
	d := time.Since(start)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection still open after %v; want closed by the server at ReadHeaderTimeout %v", d, wantReadHeaderTimeout)
	}
	// net/http closes the connection, answering 400 when it can.
	if len(b) != 0 && !bytes.HasPrefix(b, []byte("HTTP/1.1 400 ")) {
		t.Errorf("slow headers answered %q; want the connection closed, at most with a 400", b)
	}
	if d < wantReadHeaderTimeout-500*time.Millisecond {
		t.Errorf("closed after %v; want at ReadHeaderTimeout %v", d, wantReadHeaderTimeout)
	}
	t.Logf("slow headers: closed by the server after %v", d.Round(time.Millisecond))
}

// slowBody sends complete headers of a signed callback, then its body one
// byte every 200 ms. The server must end the request at ReadTimeout: the
// receiver answers 400 (bad_request) and records nothing.
func (s *hostileStack) slowBody(t *testing.T) {
	req := s.sealed(t, card("wangwu", hostileMsg+"@0", s.now, ""))
	head := fmt.Sprintf("POST /wecom/callback/hr?%s HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\nContent-Length: %d\r\n\r\n", req.query, len(req.body))
	conn, start := s.trickle(t, wantReadTimeout+timeoutSlack, head, req.body[:len(req.body)-1]) // never the last byte
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	d := time.Since(start)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("no answer after %v; want the request ended at ReadTimeout %v", d, wantReadTimeout)
		}
		t.Logf("slow body: connection closed after %v without an answer", d.Round(time.Millisecond))
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !bytes.HasPrefix(b, []byte("bad_request ")) {
			t.Errorf("slow body = %d %q; want 400 bad_request", resp.StatusCode, b)
		}
		t.Logf("slow body: %d after %v", resp.StatusCode, d.Round(time.Millisecond))
	}
	if d < wantReadTimeout-time.Second {
		t.Errorf("ended after %v; want at ReadTimeout %v", d, wantReadTimeout)
	}
}

// hugeBodies sends 10 MB bodies three ways; each is refused with 413 at
// once, without the server waiting for (or reading) the rest.
func (s *hostileStack) hugeBodies(t *testing.T) {
	const size = 10 << 20
	q := s.replay.query

	// Content-Length announces 10 MB and no byte of it is sent: the answer
	// cannot depend on reading it.
	t.Run("announced, never sent", func(t *testing.T) {
		conn, err := net.Dial("tcp", s.m.ReceiverAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		fmt.Fprintf(conn, "POST /wecom/callback/hr?%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", q, size)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("= %d; want 413", resp.StatusCode)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("answered after %v; want at once", d)
		}
	})
	// Chunked, so no length to refuse on: the receiver reads 64 KiB + 1
	// and answers 413; net/http drains at most 256 KiB more before it
	// writes the answer and closes. The client sends 400 KiB of the 10 MB
	// and waits: the answer comes at once, the rest is never needed.
	chunked := func(t *testing.T, send int, within time.Duration) {
		conn, err := net.Dial("tcp", s.m.ReceiverAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(within + timeoutSlack))
		start := time.Now()
		fmt.Fprintf(conn, "POST /wecom/callback/hr?%s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", q)
		chunk := bytes.Repeat([]byte("<"), 16<<10)
		for range send / len(chunk) {
			fmt.Fprintf(conn, "%x\r\n%s\r\n", len(chunk), chunk)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer after %v: %v", time.Since(start), err)
		}
		resp.Body.Close()
		d := time.Since(start)
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("= %d; want 413", resp.StatusCode)
		}
		if d > within {
			t.Errorf("answered after %v; want within %v", d, within)
		}
		t.Logf("413 after %v", d.Round(time.Millisecond))
	}
	t.Run("chunked, 400 KiB of 10 MB sent", func(t *testing.T) { chunked(t, 400<<10, time.Second) })
	// A client that stalls after 128 KiB holds the connection until
	// ReadTimeout, as any slow client does (the drain above waits for it).
	t.Run("chunked, sender stalls after 128 KiB", func(t *testing.T) { chunked(t, 128<<10, wantReadTimeout+timeoutSlack) })
	// An ordinary client sending all 10 MB: 413, quickly.
	t.Run("client sends 10 MB", func(t *testing.T) {
		start := time.Now()
		code, _ := s.send(t, hostileReq{query: q, body: bytes.Repeat([]byte("x"), size)})
		if code != http.StatusRequestEntityTooLarge {
			t.Errorf("= %d; want 413", code)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("answered after %v; want within 3 s", d)
		}
	})
	// Headers over MaxHeaderBytes.
	t.Run("headers over 16 KiB", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+s.m.ReceiverAddr+"/wecom/callback/hr?"+q, bytes.NewReader(s.replay.body))
		req.Header.Set("X-Big", strings.Repeat("h", 32<<10))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("= %d; want 431", resp.StatusCode)
		}
	})
}
