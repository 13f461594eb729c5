package page

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/yidu-io/yidu"
)

// parseEventJSON is ParseEvent as it was before its fast path (issue 50):
// encoding/json, strict, for every body. The new one must answer every
// body as it does.
func parseEventJSON(body []byte) (Event, error) {
	var b struct {
		Event   string `json:"event"`
		Version int    `json:"version"`
		View    string `json:"view"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(&b)
	if err == nil && dec.More() {
		err = errors.New("trailing data")
	}
	if err != nil {
		return Event{}, fmt.Errorf("%w: %w", ErrBadEvent, err)
	}
	var ev Event
	switch b.Event {
	case "read_to_end":
		ev.Signal = yidu.SignalReadToEnd
	case "acknowledged":
		ev.Signal = yidu.SignalAcknowledged
	default:
		return Event{}, fmt.Errorf("%w: event %q", ErrBadEvent, yidu.Truncate(b.Event, 32))
	}
	if b.Version < 1 || b.Version > 1<<31-1 {
		return Event{}, fmt.Errorf("%w: version %d", ErrBadEvent, b.Version)
	}
	if b.View == "" || len(b.View) > 64 {
		return Event{}, fmt.Errorf("%w: view", ErrBadEvent)
	}
	ev.Version, ev.View = b.Version, b.View
	return ev, nil
}

// eventBodies are the bodies both parsers are held to: the page's own and
// every way encoding/json differs from a naive reading.
var eventBodies = []string{
	`{"event":"read_to_end","version":1,"view":"abc"}`,
	`{"event":"acknowledged","version":2147483647,"view":"abc"}`,
	" \t\r\n{ \"view\" : \"v\" ,\n\"version\"\t:\r3 , \"event\" : \"acknowledged\" } \n",
	`{"view":"v","event":"read_to_end","version":7}`,
	`{}`, `{ }`, ``, ` `, `{`, `}`, `[]`, `null`, `"x"`, `1`,
	`{"event":"read_to_end","version":1}`,
	`{"event":"read_to_end","view":"v"}`,
	`{"version":1,"view":"v"}`,
	// Escapes, surrogate pairs and lone ones, invalid UTF-8.
	`{"event":"read_to_\u0065nd","version":1,"view":"v"}`,
	`{"event":"read_to_end","version":1,"view":"\ud83d\ude00"}`,
	`{"event":"read_to_end","version":1,"view":"\ud83d"}`,
	`{"event":"read_to_end","version":1,"view":"\ude00x"}`,
	`{"event":"read_to_end","version":1,"view":"a\"b\\c\/d\n"}`,
	`{"event":"read_to_end","version":1,"view":"\x"}`,
	`{"event":"read_to_end","version":1,"view":"\u12"}`,
	"{\"event\":\"read_to_end\",\"version\":1,\"view\":\"\xff\xfe\"}",
	"{\"event\":\"read_to_end\",\"version\":1,\"view\":\"\xed\xa0\x80\"}",
	"{\"event\":\"read_to_end\",\"version\":1,\"view\":\"a\tb\"}",
	"{\"event\":\"read_to_end\",\"version\":1,\"view\":\"a\x7fb\"}",
	`{"event":"read_to_end","version":1,"view":"张三"}`,
	"\xef\xbb\xbf{\"event\":\"read_to_end\",\"version\":1,\"view\":\"v\"}",
	// Keys: twice (the last wins), in another case, escaped, unknown.
	`{"event":"read_to_end","version":1,"view":"v","view":"w"}`,
	`{"event":"button","event":"read_to_end","version":1,"view":"v"}`,
	`{"version":1,"version":2,"event":"read_to_end","view":"v"}`,
	`{"EVENT":"read_to_end","Version":1,"vIeW":"v"}`,
	`{"event":"read_to_end","version":1,"ſiew":"v"}`,
	`{"\u0065vent":"read_to_end","version":1,"view":"v"}`,
	`{"event":"read_to_end","version":1,"view":"v","uid":1}`,
	`{"event":"read_to_end","version":1,"view":"v","":1}`,
	// Null, other types.
	`{"event":null,"version":1,"view":"v"}`,
	`{"event":"read_to_end","version":null,"view":"v"}`,
	`{"event":"read_to_end","version":1,"view":null}`,
	`{"event":"read_to_end","version":"1","view":"v"}`,
	`{"event":"read_to_end","version":true,"view":"v"}`,
	`{"event":["read_to_end"],"version":1,"view":"v"}`,
	`{"event":"read_to_end","version":1,"view":{}}`,
	// Numbers.
	`{"event":"read_to_end","version":1.0,"view":"v"}`,
	`{"event":"read_to_end","version":1e0,"view":"v"}`,
	`{"event":"read_to_end","version":1E2,"view":"v"}`,
	`{"event":"read_to_end","version":-1,"view":"v"}`,
	`{"event":"read_to_end","version":-0,"view":"v"}`,
	`{"event":"read_to_end","version":0,"view":"v"}`,
	`{"event":"read_to_end","version":01,"view":"v"}`,
	`{"event":"read_to_end","version":+1,"view":"v"}`,
	`{"event":"read_to_end","version":2147483648,"view":"v"}`,
	`{"event":"read_to_end","version":999999999999999999,"view":"v"}`,
	`{"event":"read_to_end","version":9223372036854775807,"view":"v"}`,
	`{"event":"read_to_end","version":9223372036854775808,"view":"v"}`,
	`{"event":"read_to_end","version":1e99,"view":"v"}`,
	`{"event":"read_to_end","version":1 2,"view":"v"}`,
	// After the object, broken objects.
	`{"event":"read_to_end","version":1,"view":"v"} {}`,
	`{"event":"read_to_end","version":1,"view":"v"}}`,
	`{"event":"read_to_end","version":1,"view":"v"}]`,
	`{"event":"read_to_end","version":1,"view":"v"}x`,
	`{"event":"read_to_end","version":1,"view":"v"},`,
	`{"event":"read_to_end","version":1,"view":"v",}`,
	`{"event":"read_to_end","version":1,"view":"v"`,
	`{"event":"read_to_end","version":1,"view":"v`,
	`{"event":"read_to_end","version":1,,"view":"v"}`,
	`{"event":"read_to_end" "version":1}`,
	`{"event"="read_to_end"}`,
	`{event:"read_to_end"}`,
	// What ParseEvent itself refuses.
	`{"event":"button","version":1,"view":"v"}`,
	`{"event":"` + string(bytes.Repeat([]byte("长"), 40)) + `","version":1,"view":"v"}`,
	`{"event":"read_to_end","version":1,"view":""}`,
	`{"event":"read_to_end","version":1,"view":"` + string(bytes.Repeat([]byte("v"), 65)) + `"}`,
	`{"event":"read_to_end","version":1,"view":"` + string(bytes.Repeat([]byte("v"), 64)) + `"}`,
}

// sameParse fails t unless ParseEvent answers body as parseEventJSON does:
// the same event, or the same error.
func sameParse(t *testing.T, body []byte) {
	t.Helper()
	got, gotErr := ParseEvent(body)
	want, wantErr := parseEventJSON(body)
	if got != want || (gotErr == nil) != (wantErr == nil) ||
		(gotErr != nil && (gotErr.Error() != wantErr.Error() || !errors.Is(gotErr, ErrBadEvent))) {
		t.Fatalf("ParseEvent(%q) = %+v, %v; want %+v, %v (encoding/json's)", body, got, gotErr, want, wantErr)
	}
}

// FuzzParseEventSame: ParseEvent answers every body as encoding/json's
// strict decode did.
func FuzzParseEventSame(f *testing.F) {
	for _, b := range eventBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(sameParse)
}

// TestParseEventPlain: the page's own events take the fast path, without
// encoding/json: no allocation but the view's copy.
func TestParseEventPlain(t *testing.T) {
	for _, body := range []string{eventBodies[0], eventBodies[1], eventBodies[2], event("read_to_end", 3, "Zm9vYmFy")} {
		raw := []byte(body)
		if n := testing.AllocsPerRun(100, func() { _, _ = ParseEvent(raw) }); n > 1 {
			t.Errorf("ParseEvent(%q): %v allocations; want at most 1 (the view)", body, n)
		}
		sameParse(t, raw)
	}
}

// BenchmarkParseEvent: the page's event body through encoding/json (as it
// was) and through ParseEvent.
func BenchmarkParseEvent(b *testing.B) {
	body := []byte(event("read_to_end", 2, "q8s1JkzQ0v3bW2yX7nLmP4tR9uE6aC5d")) // a view is 32 characters
	for _, p := range []struct {
		name  string
		parse func([]byte) (Event, error)
	}{{"json", parseEventJSON}, {"fast", ParseEvent}} {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.parse(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
