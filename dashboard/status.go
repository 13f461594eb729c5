package dashboard

import "sync/atomic"

// statusLine is what SetStatus gave the page: a line shown above every
// page while it says something (the demo: "syncing the directory…").
type statusLine struct {
	fn atomic.Pointer[func(lang string) string]
}

// SetStatus makes every page show fn's answer, when not empty, as a status
// line at its top; an empty list page with a status line reloads itself
// until a message appears. The demo tells what it is doing in the background
// (directory sync, registration); nil removes the line. fn must be fast
// and safe for concurrent use, and must not return secrets.
func (s *Server) SetStatus(fn func() string) {
	if fn == nil {
		s.status.fn.Store(nil)
		return
	}
	s.SetStatusIn(func(string) string { return fn() })
}

// SetStatusIn is SetStatus with the line in the page's language (zh-CN,
// en): one language a page, never both in one line.
func (s *Server) SetStatusIn(fn func(lang string) string) {
	if fn == nil {
		s.status.fn.Store(nil)
		return
	}
	s.status.fn.Store(&fn)
}

func (l *statusLine) text(lang string) string {
	if fn := l.fn.Load(); fn != nil {
		return (*fn)(lang)
	}
	return ""
}
