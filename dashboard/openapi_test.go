package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/go-chi/chi/v5"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
)

// The contract test: docs/openapi.yaml is what /api/v1 answers. Every
// documented operation is requested (a case below, or the test fails
// naming the operation), every answer is validated against the spec with
// kin-openapi (status documented, body matching its schema, closed objects
// closed), every JSON object field the server sends must be documented,
// and every /api/v1 route the server serves must be in the spec.

const specFile = "../docs/openapi.yaml"

// apiPrefix is the spec's server URL.
const apiPrefix = "/api/v1"

// contractCase is one request of the contract test.
type contractCase struct {
	name string
	// op is the spec operation it exercises: "GET /messages/{msgid}".
	op     string
	method string
	// target is the path under /api/v1, with query.
	target string
	body   string
	// auth: "token" (acme's bearer), "session" (alice, with CSRF),
	// "session-no-csrf", "" (none).
	auth        string
	contentType string
	want        int
	// invalidRequest marks requests built to be refused: the spec would
	// refuse them too, so only the answer is validated.
	invalidRequest bool
	// stream: an SSE answer, read up to its headers over a real listener.
	stream bool
}

// uploadType is the Content-Type of upload's bodies.
const uploadType = "multipart/form-data; boundary=contractboundary"

// upload is a multipart body with data as the part "file".
func upload(data string) string {
	return "--contractboundary\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.pdf\"\r\n" +
		"Content-Type: application/pdf\r\n\r\n" + data + "\r\n--contractboundary--\r\n"
}

func contractCases() []contractCase {
	reg := `{"msgid":"contract-1","app":"hr","title":"Contract 合同","audience":{"userids":["alice","bob"]}}`
	return []contractCase{
		{name: "upload", op: "POST /attachments", method: "POST", target: "/attachments?app=hr", body: upload("%PDF-1.7\n"),
			contentType: uploadType, auth: "token", want: 201},
		{name: "upload html", op: "POST /attachments", method: "POST", target: "/attachments?app=hr", body: upload("<html>"),
			contentType: uploadType, auth: "token", want: 400},
		{name: "upload as another corp", op: "POST /attachments", method: "POST", target: "/attachments?app=ops", body: upload("%PDF-1.7\n"),
			contentType: uploadType, auth: "token", want: 403},
		{name: "preview", op: "POST /content/preview", method: "POST", target: "/content/preview",
			body: `{"markdown":"# 第一条\n\n<script>x</script>"}`, auth: "session", want: 200},
		{name: "preview unknown field", op: "POST /content/preview", method: "POST", target: "/content/preview",
			body: `{"md":"x"}`, auth: "token", want: 400, invalidRequest: true},
		{name: "list", op: "GET /messages", method: "GET", target: "/messages", auth: "token", want: 200},
		{name: "list page", op: "GET /messages", method: "GET", target: "/messages?limit=1", auth: "token", want: 200},
		{name: "list with a session", op: "GET /messages", method: "GET", target: "/messages", auth: "session", want: 200},
		{name: "list bad cursor", op: "GET /messages", method: "GET", target: "/messages?cursor=a%20b", auth: "token", want: 400, invalidRequest: true},
		{name: "list unauthenticated", op: "GET /messages", method: "GET", target: "/messages", want: 401, invalidRequest: true},

		{name: "register", op: "POST /messages", method: "POST", target: "/messages", body: reg, auth: "token", want: 201},
		{name: "register again", op: "POST /messages", method: "POST", target: "/messages", body: reg, auth: "token", want: 200},
		{name: "register conflicting", op: "POST /messages", method: "POST", target: "/messages",
			body: strings.Replace(reg, "Contract 合同", "Other", 1), auth: "token", want: 409},
		{name: "register unknown field", op: "POST /messages", method: "POST", target: "/messages",
			body: `{"app":"hr","title":"t","audience":{"all":true},"nope":1}`, auth: "token", want: 400, invalidRequest: true},
		{name: "register not json", op: "POST /messages", method: "POST", target: "/messages", body: "x=1",
			contentType: "application/x-www-form-urlencoded", auth: "token", want: 415, invalidRequest: true},
		{name: "register without csrf", op: "POST /messages", method: "POST", target: "/messages", body: reg,
			auth: "session-no-csrf", want: 403, invalidRequest: true},

		{name: "message", op: "GET /messages/{msgid}", method: "GET", target: "/messages/hello", auth: "token", want: 200},
		{name: "message of another corp", op: "GET /messages/{msgid}", method: "GET", target: "/messages/secret", auth: "token", want: 404},
		{name: "message unknown", op: "GET /messages/{msgid}", method: "GET", target: "/messages/nosuch", auth: "token", want: 404},

		{name: "progress", op: "GET /messages/{msgid}/progress", method: "GET", target: "/messages/hello/progress", auth: "token", want: 200},
		{name: "content of a notice without", op: "GET /messages/{msgid}/content", method: "GET", target: "/messages/hello/content", auth: "token", want: 404},
		{name: "content bad version", op: "GET /messages/{msgid}/content", method: "GET", target: "/messages/hello/content?v=0", auth: "token", want: 400, invalidRequest: true},
		{name: "progress unknown", op: "GET /messages/{msgid}/progress", method: "GET", target: "/messages/nosuch/progress", auth: "token", want: 404},

		{name: "departments", op: "GET /messages/{msgid}/departments", method: "GET", target: "/messages/hello/departments", auth: "token", want: 200},

		{name: "recipients", op: "GET /messages/{msgid}/recipients", method: "GET", target: "/messages/hello/recipients", auth: "token", want: 200},
		{name: "recipients unread of a department", op: "GET /messages/{msgid}/recipients", method: "GET",
			target: "/messages/hello/recipients?state=unread&department=2&limit=2", auth: "token", want: 200},
		{name: "recipients search", op: "GET /messages/{msgid}/recipients", method: "GET",
			target: "/messages/hello/recipients?q=Erin", auth: "token", want: 200},
		{name: "recipients bad state", op: "GET /messages/{msgid}/recipients", method: "GET",
			target: "/messages/hello/recipients?state=maybe", auth: "token", want: 400, invalidRequest: true},

		{name: "export", op: "GET /messages/{msgid}/export.csv", method: "GET", target: "/messages/hello/export.csv", auth: "token", want: 200},
		{name: "evidence json", op: "GET /messages/{msgid}/evidence/{file}", method: "GET", target: "/messages/hello/evidence/zhangsan", auth: "token", want: 200},
		{name: "evidence pdf", op: "GET /messages/{msgid}/evidence/{file}", method: "GET", target: "/messages/hello/evidence/zhangsan.pdf", auth: "token", want: 200},
		{name: "evidence of no recipient", op: "GET /messages/{msgid}/evidence/{file}", method: "GET", target: "/messages/hello/evidence/notrecipient", auth: "token", want: 404},
		{name: "evidence zip", op: "GET /messages/{msgid}/evidence.zip", method: "GET", target: "/messages/hello/evidence.zip?state=read", auth: "token", want: 200},

		{name: "remind a final state", op: "POST /messages/{msgid}/remind", method: "POST", target: "/messages/hello/remind", auth: "token", want: 400,
			body: `{"state":"acknowledged"}`, invalidRequest: true},
		{name: "remind", op: "POST /messages/{msgid}/remind", method: "POST", target: "/messages/hello/remind", auth: "token", want: 200},
		{name: "remind again", op: "POST /messages/{msgid}/remind", method: "POST", target: "/messages/hello/remind", auth: "token", want: 429},
		{name: "reminders", op: "GET /messages/{msgid}/reminders", method: "GET", target: "/messages/hello/reminders", auth: "token", want: 200},
		{name: "register with unknown userids", op: "POST /messages", method: "POST", target: "/messages", auth: "token", want: 201,
			body: `{"msgid":"contract-unknown","app":"hr","title":"T","audience":{"userids":["alice","nobody-1"]}}`},
		{name: "register and send", op: "POST /messages", method: "POST", target: "/messages", auth: "token", want: 201,
			body: `{"msgid":"contract-sent","app":"hr","title":"Sent","body":"正文","url":"https://intranet.example.com/n/1","audience":{"userids":["alice"]},"send":true}`},
		{name: "recall", op: "POST /messages/{msgid}/recall", method: "POST", target: "/messages/contract-sent/recall", auth: "token", want: 200},
		{name: "recall again", op: "POST /messages/{msgid}/recall", method: "POST", target: "/messages/contract-sent/recall", auth: "token", want: 200},
		{name: "recall nothing sent", op: "POST /messages/{msgid}/recall", method: "POST", target: "/messages/contract-unknown/recall", auth: "token", want: 409},

		{name: "schedule", op: "POST /messages", method: "POST", target: "/messages", auth: "token", want: 201,
			body: `{"msgid":"contract-sched","app":"hr","title":"Later","audience":{"userids":["alice"]},"send":true,"send_at":"2026-06-01T09:00:00+08:00"}`},
		{name: "schedule in the past", op: "POST /messages", method: "POST", target: "/messages", auth: "token", want: 400,
			body: `{"app":"hr","title":"Later","audience":{"userids":["alice"]},"send":true,"send_at":"2001-01-01T09:00:00+08:00"}`},
		{name: "draft", op: "POST /messages", method: "POST", target: "/messages", auth: "token", want: 201,
			body: `{"msgid":"contract-draft","app":"hr","title":"Draft","audience":{"all":true},"draft":true}`},
		{name: "scheduled notice", op: "GET /messages/{msgid}", method: "GET", target: "/messages/contract-sched", auth: "token", want: 200},
		{name: "list scheduled", op: "GET /messages", method: "GET", target: "/messages?state=scheduled", auth: "token", want: 200},
		{name: "edit", op: "PATCH /messages/{msgid}", method: "PATCH", target: "/messages/contract-sched", auth: "token", want: 200,
			body: `{"title":"Later, edited"}`},
		{name: "edit a sent message", op: "PATCH /messages/{msgid}", method: "PATCH", target: "/messages/hello", auth: "token", want: 409,
			body: `{"title":"x"}`},
		{name: "send a draft now", op: "POST /messages/{msgid}/send", method: "POST", target: "/messages/contract-draft/send", auth: "token", want: 202},
		{name: "approval", op: "GET /messages/{msgid}/approval", method: "GET", target: "/messages/contract-sched/approval", auth: "token", want: 200},
		{name: "approve where no rule asks", op: "POST /messages/{msgid}/approval", method: "POST", target: "/messages/contract-sched/approval",
			body: `{"approve":true,"version_hash":"00"}`, auth: "token", want: 403},
		{name: "preview to me where no rule asks", op: "POST /messages/{msgid}/approval/preview", method: "POST", target: "/messages/contract-sched/approval/preview", auth: "token", want: 403},
		{name: "nudge where none waits", op: "POST /messages/{msgid}/approval/nudge", method: "POST", target: "/messages/contract-sched/approval/nudge", auth: "token", want: 409},
		{name: "withdraw where none waits", op: "POST /messages/{msgid}/approval/withdraw", method: "POST", target: "/messages/contract-sched/approval/withdraw", auth: "token", want: 409},
		{name: "cancel", op: "POST /messages/{msgid}/cancel", method: "POST", target: "/messages/contract-sched/cancel", auth: "token", want: 200},
		{name: "cancel again", op: "POST /messages/{msgid}/cancel", method: "POST", target: "/messages/contract-sched/cancel", auth: "token", want: 409},
		// This server's campaign has no follow-up engine (deps.FollowUps nil):
		// the follow-up endpoints say 404; campaign's tests run the engine.
		{name: "follow-up none", op: "GET /messages/{msgid}/follow_up", method: "GET", target: "/messages/hello/follow_up", auth: "token", want: 404},
		{name: "follow-up put none", op: "PUT /messages/{msgid}/follow_up", method: "PUT", target: "/messages/hello/follow_up",
			body: `{"reminders":["2h"]}`, auth: "token", want: 404},
		{name: "cancel round none", op: "POST /messages/{msgid}/follow_up/cancel-round", method: "POST", target: "/messages/hello/follow_up/cancel-round", auth: "token", want: 404},
		{name: "standing none", op: "GET /messages/{msgid}/standing", method: "GET", target: "/messages/hello/standing", auth: "token", want: 404},
		{name: "end standing none", op: "PATCH /messages/{msgid}/standing", method: "PATCH", target: "/messages/hello/standing",
			body: `{"until":null}`, auth: "token", want: 404},
		{name: "standing rules off", op: "GET /standing", method: "GET", target: "/standing", auth: "token", want: 404},
		{name: "standing csv off", op: "GET /standing.csv", method: "GET", target: "/standing.csv", auth: "token", want: 404},
		{name: "apps", op: "GET /apps", method: "GET", target: "/apps", auth: "token", want: 200},

		{name: "events", op: "GET /messages/{msgid}/events", method: "GET", target: "/messages/hello/events", auth: "token", want: 200, stream: true},
		{name: "events unknown", op: "GET /messages/{msgid}/events", method: "GET", target: "/messages/nosuch/events", auth: "token", want: 404},

		{name: "directory departments", op: "GET /directory/departments", method: "GET", target: "/directory/departments?app=hr", auth: "token", want: 200},
		{name: "directory departments unknown app", op: "GET /directory/departments", method: "GET", target: "/directory/departments?app=ops", auth: "token", want: 400},
		{name: "directory tags", op: "GET /directory/tags", method: "GET", target: "/directory/tags?app=hr", auth: "token", want: 200},
		{name: "directory people", op: "GET /directory/people", method: "GET", target: "/directory/people?app=hr&q=al&limit=5", auth: "token", want: 200},
		{name: "directory people bad limit", op: "GET /directory/people", method: "GET", target: "/directory/people?app=hr&q=al&limit=0", auth: "token", want: 400, invalidRequest: true},
		{name: "audience preview", op: "POST /audience/preview", method: "POST", target: "/audience/preview",
			body: `{"app":"hr","audience":{"tags":[5],"userids":["alice","ghost"]}}`, auth: "token", want: 200},
		{name: "audience preview empty", op: "POST /audience/preview", method: "POST", target: "/audience/preview",
			body: `{"app":"hr","audience":{}}`, auth: "token", want: 400},
		{name: "audience parse-list", op: "POST /audience/parse-list", method: "POST", target: "/audience/parse-list?app=hr",
			body: "alice\nghost\n", contentType: "text/plain", auth: "token", want: 200},

		{name: "save a template", op: "POST /templates", method: "POST", target: "/templates", auth: "token", want: 201,
			body: `{"app":"hr","name":"月度考勤","title":"请确认本月考勤","audience":{"departments":[2]},"follow_up":{"reminders":["2h"]},"markdown":"# 考勤","read_rule":"acknowledged"}`},
		{name: "a template without a name", op: "POST /templates", method: "POST", target: "/templates", auth: "token", want: 400, body: `{"app":"hr","name":""}`, invalidRequest: true},
		{name: "templates", op: "GET /templates", method: "GET", target: "/templates?app=hr", auth: "token", want: 200},
		{name: "a template", op: "GET /templates/{id}", method: "GET", target: "/templates/1", auth: "token", want: 200},
		{name: "change a template", op: "PUT /templates/{id}", method: "PUT", target: "/templates/1", auth: "session", want: 200,
			body: `{"app":"hr","name":"月度考勤（新）","title":"请确认上月考勤"}`},
		{name: "delete a template", op: "DELETE /templates/{id}", method: "DELETE", target: "/templates/1", auth: "token", want: 204},
		{name: "a deleted template", op: "GET /templates/{id}", method: "GET", target: "/templates/1", auth: "token", want: 404},
		{name: "audit", op: "GET /audit", method: "GET", target: "/audit", auth: "token", want: 200},
		// The fixture runs without an evidence log (TestLedgerAPI in
		// cmd/internal/process answers with one).
		{name: "checkpoint without a log", op: "GET /ledger/{corp}/checkpoint", method: "GET", target: "/ledger/acme/checkpoint", auth: "token", want: 404},
		{name: "consistency without a log", op: "GET /ledger/{corp}/consistency", method: "GET", target: "/ledger/acme/consistency?from=1", auth: "token", want: 404},
		{name: "audit filtered page", op: "GET /audit", method: "GET", target: "/audit?action=schedule&limit=1&since=2026-01-01T00:00:00Z", auth: "token", want: 200},
		{name: "audit bad limit", op: "GET /audit", method: "GET", target: "/audit?limit=0", auth: "token", want: 400, invalidRequest: true},
		{name: "audit bad action", op: "GET /audit", method: "GET", target: "/audit?action=drop", auth: "token", want: 400, invalidRequest: true},
	}
}

// loadSpec loads and validates docs/openapi.yaml.
func loadSpec(tb testing.TB) *openapi3.T {
	tb.Helper()
	l := openapi3.NewLoader()
	doc, err := l.LoadFromFile(specFile)
	if err != nil {
		tb.Fatalf("load %s: %v", specFile, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		tb.Fatalf("%s is not a valid OpenAPI document: %v", specFile, err)
	}
	return doc
}

func init() {
	// The SSE stream is validated for status and headers; its body never
	// ends.
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder)
}

func TestOpenAPIContract(t *testing.T) {
	doc := loadSpec(t)
	f, _ := newCampaignFixture(t)
	f.srv.comp.Attachments = newUploads(t)
	f.srv.dis.Evidence = fakeEvidence{f}
	tpls := store.NewTemplates(testenv.MySQL(t), []yidu.App{{Name: "hr", CorpID: "acme", AgentID: 1000002}}, f.clock.Now)
	f.rewire(t, func(d *deps) { d.Templates = tpls })
	withAudienceDirectory(t, f)
	cookie, csrf := f.login(t)
	cases := contractCases()

	exercised := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			route := specRoute(t, doc, tc.op)
			exercised[tc.op] = true
			req := httptest.NewRequest(tc.method, apiPrefix+tc.target, strings.NewReader(tc.body))
			if tc.body != "" {
				ct := tc.contentType
				if ct == "" {
					ct = "application/json"
				}
				req.Header.Set("Content-Type", ct)
			}
			switch tc.auth {
			case "token":
				req.Header.Set("Authorization", "Bearer "+acmeToken)
			case "session", "session-no-csrf":
				req.AddCookie(cookie)
				if tc.auth == "session" {
					req.Header.Set(csrfHeader, csrf)
				}
			}
			in := &openapi3filter.RequestValidationInput{
				Request:    req,
				PathParams: pathParams(route.Path, tc.target),
				Route:      route,
				Options:    &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
			}
			if !tc.invalidRequest {
				// The request itself follows the spec (a body read here is
				// put back for the server).
				if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
					t.Fatalf("the test's own request breaks the spec: %v", err)
				}
				req.Body = io.NopCloser(strings.NewReader(tc.body))
			}

			var status int
			var header http.Header
			var body []byte
			if tc.stream {
				status, header = streamHead(t, f, req)
			} else {
				w := httptest.NewRecorder()
				f.h.ServeHTTP(w, req)
				status, header, body = w.Code, w.Header(), w.Body.Bytes()
			}
			if status != tc.want {
				t.Fatalf("%s %s = %d: %s; want %d", tc.method, tc.target, status, body, tc.want)
			}
			out := &openapi3filter.ResponseValidationInput{
				RequestValidationInput: in,
				Status:                 status,
				Header:                 header,
				Options: &openapi3filter.Options{
					IncludeResponseStatus: true,
					ExcludeResponseBody:   tc.stream,
					AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
				},
			}
			out.SetBodyBytes(body)
			if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
				t.Errorf("%s %s answered %d against the spec: %v\nbody: %.500s", tc.method, tc.target, status, err, body)
			}
			if strings.HasPrefix(header.Get("Content-Type"), "application/json") {
				checkDocumented(t, route, status, body)
			}
		})
	}

	// Every documented operation is requested at least once.
	var missing []string
	for _, op := range specOperations(doc) {
		if !exercised[op] {
			missing = append(missing, op)
		}
	}
	if len(missing) > 0 {
		t.Errorf("docs/openapi.yaml documents %v, which the contract test never requests: add cases to contractCases", missing)
	}
}

// TestOpenAPICoversRoutes: every /api/v1 route the server serves is in
// the spec, and every operation in the spec is served.
func TestOpenAPICoversRoutes(t *testing.T) {
	doc := loadSpec(t)
	f := newFixture(t)
	routes, ok := f.h.(chi.Routes)
	if !ok {
		t.Fatalf("Routes() is a %T; the test walks a chi router", f.h)
	}
	var served []string
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if p, ok := strings.CutPrefix(route, apiPrefix); ok {
			p = strings.TrimSuffix(strings.ReplaceAll(p, "/*/", "/"), "/")
			served = append(served, method+" "+p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	documented := specOperations(doc)
	for _, s := range served {
		if !slices.Contains(documented, s) {
			t.Errorf("the server answers %s%s, which docs/openapi.yaml does not document", apiPrefix, s)
		}
	}
	for _, d := range documented {
		if !slices.Contains(served, d) {
			t.Errorf("docs/openapi.yaml documents %s, which the server does not route", d)
		}
	}
}

// specOperations returns "METHOD /path" for every operation of doc, sorted.
func specOperations(doc *openapi3.T) []string {
	var ops []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			ops = append(ops, method+" "+path)
		}
	}
	sort.Strings(ops)
	return ops
}

// specRoute returns the route of op ("GET /messages/{msgid}").
func specRoute(tb testing.TB, doc *openapi3.T, op string) *routers.Route {
	tb.Helper()
	method, path, _ := strings.Cut(op, " ")
	item := doc.Paths.Find(path)
	if item == nil || item.GetOperation(method) == nil {
		tb.Fatalf("docs/openapi.yaml has no operation %s", op)
	}
	return &routers.Route{Spec: doc, Server: doc.Servers[0], Path: path, PathItem: item, Method: method, Operation: item.GetOperation(method)}
}

// pathParams matches target's path against the template path.
func pathParams(template, target string) map[string]string {
	p, _, _ := strings.Cut(target, "?")
	ts, ps := strings.Split(template, "/"), strings.Split(p, "/")
	out := map[string]string{}
	for i := range min(len(ts), len(ps)) {
		if name, ok := strings.CutPrefix(ts[i], "{"); ok {
			out[strings.TrimSuffix(name, "}")] = ps[i]
		}
	}
	return out
}

// streamHead sends req to a real listener and returns the status and
// headers once they arrive, then hangs up (the stream never ends).
func streamHead(tb testing.TB, f *fixture, req *http.Request) (int, http.Header) {
	tb.Helper()
	ts, client := f.client(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := http.NewRequestWithContext(ctx, req.Method, ts.URL+req.URL.RequestURI(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	out.Header = req.Header.Clone()
	resp, err := client.Do(out)
	if err != nil {
		tb.Fatalf("stream: %v", err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// checkDocumented fails on every field of a JSON answer that the
// operation's response schema does not name: a field added to the code
// must be added to the spec.
func checkDocumented(tb testing.TB, route *routers.Route, status int, body []byte) {
	tb.Helper()
	resp := route.Operation.Responses.Status(status)
	if resp == nil || resp.Value == nil {
		return // ValidateResponse reported it
	}
	mt := resp.Value.Content.Get("application/json")
	if mt == nil || mt.Schema == nil {
		return
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		tb.Errorf("answer is not JSON: %v", err)
		return
	}
	for _, f := range undocumented(mt.Schema.Value, v, "$") {
		tb.Errorf("%s %s answers %d with field %s, which docs/openapi.yaml does not document", route.Method, route.Path, status, f)
	}
}

// undocumented returns the JSON paths of object fields in v that schema
// s does not list, recursively.
func undocumented(s *openapi3.Schema, v any, at string) []string {
	if s == nil || v == nil {
		return nil
	}
	var out []string
	switch x := v.(type) {
	case map[string]any:
		props := map[string]*openapi3.SchemaRef{}
		for name, p := range s.Properties {
			props[name] = p
		}
		for _, sub := range append(append(slices.Clone(s.AllOf), s.OneOf...), s.AnyOf...) {
			if sub.Value != nil {
				for name, p := range sub.Value.Properties {
					props[name] = p
				}
			}
		}
		open := s.AdditionalProperties.Schema != nil
		for k, fv := range x {
			p, ok := props[k]
			switch {
			case ok && p.Value != nil:
				out = append(out, undocumented(p.Value, fv, at+"."+k)...)
			case !ok && !open:
				out = append(out, at+"."+k)
			}
		}
	case []any:
		if s.Items != nil {
			for i, item := range x {
				if i >= 3 {
					break // the items share a schema; a few show a drift
				}
				out = append(out, undocumented(s.Items.Value, item, at+"[]")...)
			}
		}
	}
	sort.Strings(out)
	return out
}
