package callback

import (
	"encoding/xml"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// Decrypted messages as WeCom sends them (doc paths 90240, 90376, 90970).
const (
	cardXML    = `<xml><ToUserName><![CDATA[wx5823bf96d3bd56c7]]></ToUserName><FromUserName><![CDATA[zhangsan]]></FromUserName><CreateTime>1409659813</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[template_card_event]]></Event><EventKey><![CDATA[read]]></EventKey><TaskId><![CDATA[notice-2024-07-01_abc@1]]></TaskId><CardType><![CDATA[button_interaction]]></CardType><ResponseCode><![CDATA[allow_7oKfLz8Lx3FqMDmE8ZoaaUqHwX0sd-MQe_MCNqSg1Fo]]></ResponseCode><AgentID>218</AgentID><SelectedItems><SelectedItem><QuestionKey><![CDATA[q1]]></QuestionKey><OptionIds><OptionId><![CDATA[o1]]></OptionId><OptionId><![CDATA[o2]]></OptionId></OptionIds></SelectedItem></SelectedItems></xml>`
	enterXML   = `<xml><ToUserName><![CDATA[wx5823bf96d3bd56c7]]></ToUserName><FromUserName><![CDATA[lisi]]></FromUserName><CreateTime>1409659813</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[enter_agent]]></Event><EventKey><![CDATA[]]></EventKey><AgentID>218</AgentID></xml>`
	viewXML    = `<xml><ToUserName><![CDATA[wx5823bf96d3bd56c7]]></ToUserName><FromUserName><![CDATA[lisi]]></FromUserName><CreateTime>1409659813</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[view]]></Event><EventKey><![CDATA[https://example.com/a?b=1&c=2]]></EventKey><AgentID>218</AgentID></xml>`
	clickXML   = `<xml><ToUserName><![CDATA[wx5823bf96d3bd56c7]]></ToUserName><FromUserName><![CDATA[lisi]]></FromUserName><CreateTime>1409659813</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[click]]></Event><EventKey><![CDATA[menu_1]]></EventKey><AgentID>218</AgentID></xml>`
	contactXML = `<xml><ToUserName><![CDATA[wx5823bf96d3bd56c7]]></ToUserName><FromUserName><![CDATA[sys]]></FromUserName><CreateTime>1409659813</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[change_contact]]></Event><ChangeType>update_user</ChangeType><UserID><![CDATA[zhangsan]]></UserID><NewUserID><![CDATA[zhangsan2]]></NewUserID><Department><![CDATA[1,2,3]]></Department><AgentID>218</AgentID></xml>`
	textXML    = `<xml><ToUserName><![CDATA[wx5823bf96d3bd56c7]]></ToUserName><FromUserName><![CDATA[mycreate]]></FromUserName><CreateTime>1409659813</CreateTime><MsgType><![CDATA[text]]></MsgType><Content><![CDATA[hello]]></Content><MsgId>4561255354251345929</MsgId><AgentID>218</AgentID></xml>`
)

func TestParseEvent(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Event
	}{
		{"template_card_event", cardXML, Event{Kind: KindTemplateCard, ToUserName: "wx5823bf96d3bd56c7", FromUserName: "zhangsan", CreateTime: 1409659813, MsgType: "event", Event: "template_card_event", EventKey: "read", TaskID: "notice-2024-07-01_abc@1", CardType: "button_interaction", ResponseCode: "allow_7oKfLz8Lx3FqMDmE8ZoaaUqHwX0sd-MQe_MCNqSg1Fo", AgentID: 218}},
		{"enter_agent", enterXML, Event{Kind: KindEnterAgent, ToUserName: "wx5823bf96d3bd56c7", FromUserName: "lisi", CreateTime: 1409659813, MsgType: "event", Event: "enter_agent", AgentID: 218}},
		{"view", viewXML, Event{Kind: KindView, ToUserName: "wx5823bf96d3bd56c7", FromUserName: "lisi", CreateTime: 1409659813, MsgType: "event", Event: "view", EventKey: "https://example.com/a?b=1&c=2", AgentID: 218}},
		{"click", clickXML, Event{Kind: KindClick, ToUserName: "wx5823bf96d3bd56c7", FromUserName: "lisi", CreateTime: 1409659813, MsgType: "event", Event: "click", EventKey: "menu_1", AgentID: 218}},
		{"change_contact", contactXML, Event{Kind: KindChangeContact, ToUserName: "wx5823bf96d3bd56c7", FromUserName: "sys", CreateTime: 1409659813, MsgType: "event", Event: "change_contact", ChangeType: "update_user", UserID: "zhangsan", NewUserID: "zhangsan2", Department: []int64{1, 2, 3}, AgentID: 218}},
		{"delete_user", `<xml><MsgType>event</MsgType><Event>change_contact</Event><CreateTime>1</CreateTime><ChangeType>delete_user</ChangeType><UserID>u1</UserID></xml>`, Event{Kind: KindChangeContact, MsgType: "event", Event: "change_contact", CreateTime: 1, ChangeType: "delete_user", UserID: "u1"}},
		{"text message keeps MsgId as string", textXML, Event{Kind: KindMessage, ToUserName: "wx5823bf96d3bd56c7", FromUserName: "mycreate", CreateTime: 1409659813, MsgType: "text", MsgID: "4561255354251345929", AgentID: 218}},
		{"non-numeric MsgId", `<xml><MsgType>text</MsgType><MsgId>CAIQg5ej0wYYgICA</MsgId></xml>`, Event{Kind: KindMessage, MsgType: "text", MsgID: "CAIQg5ej0wYYgICA"}},
		{"unknown event", `<xml><MsgType>event</MsgType><Event>LOCATION</Event><CreateTime>5</CreateTime></xml>`, Event{Kind: KindUnknown, MsgType: "event", Event: "LOCATION", CreateTime: 5}},
		{"entities and mixed text", `<xml><MsgType>ev&#101;nt</MsgType><Event>view</Event><EventKey>a&amp;b<![CDATA[&lt;]]>&#x4e2d;&lt;&gt;&quot;&apos;</EventKey></xml>`, Event{Kind: KindView, MsgType: "event", Event: "view", EventKey: `a&b&lt;中<>"'`}},
		{"CR LF normalised", "<xml><MsgType>text</MsgType><MsgId>a\r\nb\rc<![CDATA[\r\n]]></MsgId></xml>", Event{Kind: KindMessage, MsgType: "text", MsgID: "a\nb\nc\n"}},
		{"whitespace and self-closing", " \n<xml>\n <MsgType>text</MsgType>\n <ToUserName/>\n <CreateTime> 7 </CreateTime>\n</xml>\n", Event{Kind: KindMessage, MsgType: "text", CreateTime: 7}},
		{"nested text skipped", `<xml><MsgType>text</MsgType><MsgId>a<x>b<y/></x>c</MsgId></xml>`, Event{Kind: KindMessage, MsgType: "text", MsgID: "ac"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEvent(tt.in)
			if err != nil {
				t.Fatalf("ParseEvent = %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseEvent =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestParseEventErrors(t *testing.T) {
	deep := `<xml><MsgType>text</MsgType><a>` + strings.Repeat("<a>", maxDepth) + strings.Repeat("</a>", maxDepth) + `</a></xml>`
	tests := []struct{ name, in string }{
		{"empty", ""},
		{"not xml", "hello"},
		{"other root", `<root><MsgType>text</MsgType></root>`},
		{"doctype", `<!DOCTYPE xml [<!ENTITY e "x">]><xml><MsgType>text</MsgType></xml>`},
		{"doctype inside", `<xml><!DOCTYPE x><MsgType>text</MsgType></xml>`},
		{"custom entity", `<xml><MsgType>te&e;xt</MsgType></xml>`},
		{"entity without semicolon", `<xml><MsgType>a&amp</MsgType></xml>`},
		{"entity to NUL", `<xml><MsgType>&#0;</MsgType></xml>`},
		{"entity to surrogate", `<xml><MsgType>&#xD800;</MsgType></xml>`},
		{"entity beyond unicode", `<xml><MsgType>&#x110000;</MsgType></xml>`},
		{"comment", `<xml><!-- c --><MsgType>text</MsgType></xml>`},
		{"processing instruction", `<?xml version="1.0"?><xml><MsgType>text</MsgType></xml>`},
		{"invalid UTF-8", "<xml><MsgType>te\xffxt</MsgType></xml>"},
		{"control character", "<xml><MsgType>te\x01xt</MsgType></xml>"},
		{"noncharacter", "<xml><MsgType>te\uFFFExt</MsgType></xml>"},
		{"too deep", deep},
		{"unclosed root", `<xml><MsgType>text</MsgType>`},
		{"unclosed field", `<xml><MsgType>text</xml>`},
		{"mismatched end tag", `<xml><MsgType>text</MsgTyp></xml>`},
		{"end tag prefix", `<xml><MsgType>text</MsgTypeX></xml>`},
		{"unclosed CDATA", `<xml><MsgType><![CDATA[text</MsgType></xml>`},
		{"]]> in text", `<xml><MsgType>te]]>xt</MsgType></xml>`},
		{"attribute", `<xml><MsgType a="1">text</MsgType></xml>`},
		{"namespace", `<xml><x:MsgType>text</x:MsgType></xml>`},
		{"text in root", `<xml>junk<MsgType>text</MsgType></xml>`},
		{"trailing content", `<xml><MsgType>text</MsgType></xml><xml/>`},
		{"duplicate field", `<xml><MsgType>text</MsgType><MsgType>event</MsgType></xml>`},
		{"no MsgType", `<xml><Event>enter_agent</Event></xml>`},
		{"bad CreateTime", `<xml><MsgType>text</MsgType><CreateTime>12a</CreateTime></xml>`},
		{"bad AgentID", `<xml><MsgType>text</MsgType><AgentID>x</AgentID></xml>`},
		{"card without TaskId", `<xml><MsgType>event</MsgType><Event>template_card_event</Event><FromUserName>u</FromUserName><CreateTime>1</CreateTime></xml>`},
		{"card with bad TaskId", `<xml><MsgType>event</MsgType><Event>template_card_event</Event><FromUserName>u</FromUserName><CreateTime>1</CreateTime><TaskId>a b</TaskId></xml>`},
		{"card with long TaskId", `<xml><MsgType>event</MsgType><Event>template_card_event</Event><FromUserName>u</FromUserName><CreateTime>1</CreateTime><TaskId>` + strings.Repeat("a", 129) + `</TaskId></xml>`},
		{"card without user", `<xml><MsgType>event</MsgType><Event>template_card_event</Event><CreateTime>1</CreateTime><TaskId>t</TaskId></xml>`},
		{"enter_agent without CreateTime", `<xml><MsgType>event</MsgType><Event>enter_agent</Event><FromUserName>u</FromUserName></xml>`},
		{"change_contact without ChangeType", `<xml><MsgType>event</MsgType><Event>change_contact</Event><UserID>u</UserID></xml>`},
		{"bad Department", `<xml><MsgType>event</MsgType><Event>change_contact</Event><ChangeType>create_user</ChangeType><UserID>u</UserID><Department>1,,2</Department></xml>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := ParseEvent(tt.in)
			if !errors.Is(err, ErrBadXML) {
				t.Errorf("ParseEvent(%q) = %+v, %v; want ErrBadXML", tt.in, ev, err)
			}
		})
	}
}

func TestParseEventAllocs(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := ParseEvent(cardXML); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("ParseEvent(template_card_event) allocs = %v; want 0", allocs)
	}
}

// stdFields reads the known fields with encoding/xml, the reference.
type stdFields struct {
	XMLName      xml.Name `xml:"xml"`
	ToUserName   string   `xml:"ToUserName"`
	FromUserName string   `xml:"FromUserName"`
	CreateTime   string   `xml:"CreateTime"`
	MsgType      string   `xml:"MsgType"`
	Event        string   `xml:"Event"`
	EventKey     string   `xml:"EventKey"`
	TaskID       string   `xml:"TaskId"`
	CardType     string   `xml:"CardType"`
	ResponseCode string   `xml:"ResponseCode"`
	AgentID      string   `xml:"AgentID"`
	ChangeType   string   `xml:"ChangeType"`
	UserID       string   `xml:"UserID"`
	NewUserID    string   `xml:"NewUserID"`
	Department   string   `xml:"Department"`
	MsgID        string   `xml:"MsgId"`
	Encrypt      string   `xml:"Encrypt"`
}

func (s *stdFields) values() [nFields]string {
	return [nFields]string{s.ToUserName, s.FromUserName, s.CreateTime, s.MsgType, s.Event, s.EventKey, s.TaskID, s.CardType, s.ResponseCode, s.AgentID, s.ChangeType, s.UserID, s.NewUserID, s.Department, s.MsgID, s.Encrypt}
}

// checkAgainstStd fails when parseFlat accepts s but encoding/xml rejects
// it or reads any known field differently.
func checkAgainstStd(t *testing.T, s string) {
	t.Helper()
	var f fields
	if err := parseFlat(s, &f); err != nil {
		if !errors.Is(err, ErrBadXML) {
			t.Fatalf("parseFlat(%q) = %v; want ErrBadXML", s, err)
		}
		return
	}
	var std stdFields
	if err := xml.Unmarshal([]byte(s), &std); err != nil {
		t.Fatalf("parseFlat accepts %q; encoding/xml: %v", s, err)
	}
	if got, want := f.v, std.values(); got != want {
		t.Fatalf("parseFlat(%q) = %q; encoding/xml = %q", s, got, want)
	}
}

func FuzzParseFlat(f *testing.F) {
	for _, s := range []string{cardXML, enterXML, viewXML, clickXML, contactXML, textXML,
		"<xml><MsgId>a\r\nb&#13;\n<![CDATA[\r]]>\n</MsgId></xml>",
		"<xml><EventKey>&amp;&#x41;&#65;<x>&lt;</x>]</EventKey></xml>",
		"<xml><Encrypt/><A><B><C/></B></A></xml>",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkAgainstStd(t, s)
		// ParseEvent must never panic and only fail with ErrBadXML.
		if _, err := ParseEvent(s); err != nil && !errors.Is(err, ErrBadXML) {
			t.Fatalf("ParseEvent(%q) = %v", s, err)
		}
	})
}

func TestParseFlatMatchesStd(t *testing.T) {
	// Generated variations around the tricky spots, checked both ways.
	pieces := []string{"a", "&amp;", "&#13;", "\r", "\n", "\r\n", "<![CDATA[x\r\ny]]>", "<c>z</c>", "<c/>", "]", "]]", ">", " ", "中"}
	n := 0
	for _, p1 := range pieces {
		for _, p2 := range pieces {
			for _, p3 := range pieces {
				s := fmt.Sprintf("<xml><EventKey>%s%s%s</EventKey><MsgType>text</MsgType></xml>", p1, p2, p3)
				checkAgainstStd(t, s)
				n++
			}
		}
	}
	if n != len(pieces)*len(pieces)*len(pieces) {
		t.Fatal("not all cases ran")
	}
}

func TestCheckCharsEveryPosition(t *testing.T) {
	base := strings.Repeat("abcdefgh", 3)
	for i := range len(base) {
		for _, bad := range []string{"\x00", "\x1f", "\xff", "\xc3", "\uFFFE"} {
			s := base[:i] + bad + base[i+1:]
			if err := checkChars(s); !errors.Is(err, ErrBadXML) {
				t.Errorf("checkChars(%q) = %v; want ErrBadXML", s, err)
			}
		}
		for _, good := range []string{"\t", "\n", "\r", " ", "~", "é", "中"} {
			s := base[:i] + good + base[i+1:]
			if err := checkChars(s); err != nil {
				t.Errorf("checkChars(%q) = %v; want nil", s, err)
			}
		}
	}
}
