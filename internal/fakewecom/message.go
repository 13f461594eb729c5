package fakewecom

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// What message/send and message/recall answer beyond the directory's
// errcodes (global error codes, doc path 90313).
const (
	// ErrBadTaskID: 42014 also answers a malformed task_id ("任务卡片消息的
	// task_id不合法"), not only a reused one.
	ErrBadTaskID = ErrTaskIDReused
	// ErrAPIFrequency and ErrConcurrency are WeCom's frequency refusals
	// (45009 接口调用超过限制, 45033 接口并发调用超过限制); FailNext makes
	// the fake answer them.
	ErrAPIFrequency = 45009
	ErrConcurrency  = 45033
	// ErrCannotRecall answers a recall WeCom refuses: an unknown msgid,
	// another app's, one recalled already, or past the 24 h window
	// (message/recall, doc path 96460). WeCom documents the window but no
	// errcode of its own for it; the fake answers 40058 (不合法的参数).
	ErrCannotRecall = ErrBadParameter
)

// RecallWindow is how long after a send message/recall works (doc path
// 96460).
const RecallWindow = 24 * time.Hour

// Duplicate check of message/send (doc path 90236): with
// "enable_duplicate_check": 1 an identical request (the same JSON) within
// duplicate_check_interval seconds (default 1800, at most 4 hours) is not
// delivered twice.
const (
	defaultDuplicateInterval = 1800
	maxDuplicateInterval     = 4 * 3600
)

// Template card limits (message/send, button_interaction, doc path 90236).
// WeCom words the text limits as 建议不超过 N 个字 and cuts longer text; the
// fake refuses it, holding yidu to never sending a card WeCom would cut.
const (
	maxCardTitle   = 36   // main_title.title
	maxCardDesc    = 44   // main_title.desc
	maxSubTitle    = 160  // sub_title_text
	maxButtons     = 6    // button_list
	maxButtonText  = 10   // button_list.text
	maxButtonKey   = 1024 // button_list.key, bytes
	maxHorizontal  = 6    // horizontal_content_list
	maxKeyName     = 5    // horizontal_content_list.keyname
	maxHorizValue  = 30   // horizontal_content_list.value
	maxTaskIDBytes = 128  // task_id
)

// taskIDRule is WeCom's task_id alphabet: digits, letters and "_-@", at
// most 128 bytes (doc path 90236).
var taskIDRule = regexp.MustCompile(`^[0-9A-Za-z_\-@]+$`)

// messages is the fake's message state: the clock, the deliveries by
// msgid (for recall), the duplicate-check window and the failures a test
// asked for. Guarded by Server.mu.
type messages struct {
	clock    func() time.Time
	byID     map[string]*delivery // msgid → delivery
	dups     map[string]sentReply // corp, agent and raw request → first answer
	recalled []string
	failures map[string][]int // path → errcodes to answer next, in order
}

type delivery struct {
	corpID   string
	agentID  int64
	at       time.Time
	recalled bool
}

type sentReply struct {
	at  time.Time
	out reply
}

func newMessages() messages {
	return messages{clock: time.Now, byID: map[string]*delivery{}, dups: map[string]sentReply{}, failures: map[string][]int{}}
}

func (m *messages) now() time.Time { return m.clock() }

// SetClock makes the fake read time from now (recall window, duplicate
// check); nil restores time.Now.
func (s *Server) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now == nil {
		now = time.Now
	}
	s.clock = now
}

// FailNext makes the next times calls of path (e.g.
// "/cgi-bin/message/send") with a valid token answer errcode code
// (ErrAPIFrequency: WeCom's minute block) without doing anything.
func (s *Server) FailNext(path string, code, times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range times {
		s.failures[path] = append(s.failures[path], code)
	}
}

// takeFailure returns the next failure set for path.
func (m *messages) takeFailure(path string) (int, bool) {
	f := m.failures[path]
	if len(f) == 0 {
		return 0, false
	}
	m.failures[path] = f[1:]
	return f[0], true
}

// Recalled returns the msgids recalled so far, in order.
func (s *Server) Recalled() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.recalled)
}

// dupKey is the duplicate check's identity of a request: the same app
// sending the same JSON.
func dupKey(g grant, raw []byte) string {
	return g.corp.CorpID + "\x00" + strconv.FormatInt(g.app.AgentID, 10) + "\x00" + string(raw)
}

// duplicate reports whether body (raw) asks for the duplicate check and
// repeats a request delivered within its interval; out is then the first
// delivery's answer. WeCom does not say whether its duplicate check runs
// before the task_id check; the fake checks duplicates first.
func (m *messages) duplicate(g grant, body map[string]any, raw []byte) (bool, reply, error) {
	on, _ := body["enable_duplicate_check"].(float64)
	if on != 1 {
		return false, nil, nil
	}
	iv, err := duplicateInterval(body)
	if err != nil {
		return false, nil, err
	}
	d, ok := m.dups[dupKey(g, raw)]
	if !ok || m.now().Sub(d.at) >= iv {
		return false, nil, nil
	}
	return true, maps.Clone(d.out), nil
}

func duplicateInterval(body map[string]any) (time.Duration, error) {
	v, ok := body["duplicate_check_interval"]
	if !ok {
		return defaultDuplicateInterval * time.Second, nil
	}
	n, ok := v.(float64)
	if !ok || n != float64(int(n)) || n <= 0 || n > maxDuplicateInterval {
		return 0, fmt.Errorf("duplicate_check_interval must be 1..%d seconds", maxDuplicateInterval)
	}
	return time.Duration(n) * time.Second, nil
}

// delivered records a delivery for recall and the duplicate check.
func (m *messages) delivered(g grant, body map[string]any, raw []byte, msgID string, out reply) {
	now := m.now()
	m.byID[msgID] = &delivery{corpID: g.corp.CorpID, agentID: g.app.AgentID, at: now}
	if on, _ := body["enable_duplicate_check"].(float64); on == 1 {
		m.dups[dupKey(g, raw)] = sentReply{at: now, out: maps.Clone(out)}
	}
}

// recall serves message/recall {msgid}: only the app's own message, once,
// within RecallWindow of its delivery.
func (m *messages) recall(g grant, r *http.Request) reply {
	var req struct {
		MsgID string `json:"msgid"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		return fail(ErrBadParameter, "bad json")
	}
	d, ok := m.byID[req.MsgID]
	switch {
	case !ok || d.corpID != g.corp.CorpID || d.agentID != g.app.AgentID:
		return fail(ErrCannotRecall, "invalid msgid")
	case d.recalled:
		return fail(ErrCannotRecall, "message already recalled")
	case m.now().Sub(d.at) > RecallWindow:
		return fail(ErrCannotRecall, "message sent more than 24 hours ago")
	}
	d.recalled = true
	m.recalled = append(m.recalled, req.MsgID)
	return reply{}
}

var errCard = errors.New("template_card")

// checkCard checks a template card as WeCom documents it (message/send,
// doc path 90236); only button_interaction, the card yidu sends, is
// checked field by field. It returns WeCom's errcode and errmsg, or 0.
func checkCard(card map[string]any) (int, string) {
	if t, _ := card["card_type"].(string); t != "button_interaction" {
		return 0, ""
	}
	task, _ := card["task_id"].(string)
	if len(task) > maxTaskIDBytes || !taskIDRule.MatchString(task) {
		return ErrBadTaskID, "invalid task_id"
	}
	if err := checkButtonCard(card); err != nil {
		return ErrBadParameter, err.Error()
	}
	return 0, ""
}

func checkButtonCard(card map[string]any) error {
	main, _ := card["main_title"].(map[string]any)
	title, _ := main["title"].(string)
	desc, _ := main["desc"].(string)
	sub, _ := card["sub_title_text"].(string)
	if title == "" && sub == "" {
		return fmt.Errorf("%w: main_title.title or sub_title_text is required", errCard)
	}
	if err := maxRunes("main_title.title", title, maxCardTitle); err != nil {
		return err
	}
	if err := maxRunes("main_title.desc", desc, maxCardDesc); err != nil {
		return err
	}
	if err := maxRunes("sub_title_text", sub, maxSubTitle); err != nil {
		return err
	}
	if hl, ok := card["horizontal_content_list"]; ok {
		list, _ := hl.([]any)
		if len(list) > maxHorizontal {
			return fmt.Errorf("%w: horizontal_content_list has more than %d items", errCard, maxHorizontal)
		}
		for _, it := range list {
			h, _ := it.(map[string]any)
			k, _ := h["keyname"].(string)
			v, _ := h["value"].(string)
			if k == "" {
				return fmt.Errorf("%w: horizontal_content_list.keyname is required", errCard)
			}
			if err := maxRunes("horizontal_content_list.keyname", k, maxKeyName); err != nil {
				return err
			}
			if err := maxRunes("horizontal_content_list.value", v, maxHorizValue); err != nil {
				return err
			}
		}
	}
	if ca, ok := card["card_action"]; ok {
		a, _ := ca.(map[string]any)
		if err := checkAction("card_action", a); err != nil {
			return err
		}
	}
	buttons, _ := card["button_list"].([]any)
	if len(buttons) == 0 || len(buttons) > maxButtons {
		return fmt.Errorf("%w: button_list needs 1..%d buttons", errCard, maxButtons)
	}
	for _, it := range buttons {
		b, _ := it.(map[string]any)
		text, _ := b["text"].(string)
		if text == "" {
			return fmt.Errorf("%w: button_list.text is required", errCard)
		}
		if err := maxRunes("button_list.text", text, maxButtonText); err != nil {
			return err
		}
		// type 0 (or none): the press is called back with the key; type 1
		// opens url.
		switch typ, _ := b["type"].(float64); typ {
		case 0:
			key, _ := b["key"].(string)
			if key == "" || len(key) > maxButtonKey {
				return fmt.Errorf("%w: button_list.key is required, at most %d bytes", errCard, maxButtonKey)
			}
		case 1:
			u, _ := b["url"].(string)
			if !absoluteURL(u) {
				return fmt.Errorf("%w: button_list.url must be an absolute http(s) URL", errCard)
			}
		default:
			return fmt.Errorf("%w: button_list.type must be 0 or 1", errCard)
		}
	}
	return nil
}

// checkAction checks a jump (card_action): type 0 none, 1 url (url
// required), 2 mini program (appid required).
func checkAction(field string, a map[string]any) error {
	switch typ, _ := a["type"].(float64); typ {
	case 0:
	case 1:
		u, _ := a["url"].(string)
		if !absoluteURL(u) {
			return fmt.Errorf("%w: %s.url must be an absolute http(s) URL when type is 1", errCard, field)
		}
	case 2:
		if id, _ := a["appid"].(string); id == "" {
			return fmt.Errorf("%w: %s.appid is required when type is 2", errCard, field)
		}
	default:
		return fmt.Errorf("%w: %s.type must be 0, 1 or 2", errCard, field)
	}
	return nil
}

func maxRunes(field, s string, n int) error {
	if utf8.RuneCountInString(s) > n {
		return fmt.Errorf("%w: %s longer than %d characters", errCard, field, n)
	}
	return nil
}

func absoluteURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
