package webedge

import (
	"encoding/json"
	"errors"
	"net/http"
)

// Answer is how an outcome is answered: its status, a code a script can
// test, and its words in Chinese (the page's readers) and English (the
// dashboard's API).
type Answer struct {
	Status int
	Code   string
	ZH, EN string
}

// The answers both surfaces give.
var (
	NotFound    = Answer{http.StatusNotFound, "not_found", "未找到该通知", "not found"}
	Unavailable = Answer{http.StatusServiceUnavailable, "unavailable", "暂时无法打开，请稍后再试", "temporarily unavailable"}
	CrossSite   = Answer{http.StatusForbidden, "cross_site", "请求来源不正确", "cross-site request refused"}
	TooLarge    = Answer{http.StatusRequestEntityTooLarge, "too_large", "请求过大", "request body too large"}
)

// Rule answers the errors that are Err (errors.Is), or that Is
// matches (an error type, errors.As).
type Rule struct {
	Err error
	Is  func(error) bool
	Answer
	// Words are the English words from the error itself (nil: EN, or the
	// error's own text when EN is empty).
	Words func(error) string
}

// Table maps outcomes to their answers, in one place per surface; the
// first rule that matches answers.
type Table []Rule

// Find returns the answer of err, its EN resolved (Rule.Words); false
// for an error of no rule.
func (t Table) Find(err error) (Answer, bool) {
	if err == nil {
		return Answer{}, false
	}
	for i := range t {
		r := &t[i]
		if (r.Err != nil && errors.Is(err, r.Err)) || (r.Is != nil && r.Is(err)) {
			a := r.Answer
			switch {
			case r.Words != nil:
				a.EN = r.Words(err)
			case a.EN == "":
				a.EN = err.Error()
			}
			return a, true
		}
	}
	return Answer{}, false
}

// WriteJSON answers v as JSON, never cached.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError answers {"error": msg} with code (the dashboard's API).
func WriteError(w http.ResponseWriter, code int, msg string) {
	WriteJSON(w, code, map[string]string{"error": msg})
}
