package dashboard

import (
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/yidu-io/yidu/access"
)

// The page speaks one language at a time: Simplified Chinese by default
// (yidu's users are Chinese HR teams), English when the browser asks for it
// (Accept-Language) or the user picked it with the switch (cookie
// yidu_lang). Never both languages in one label.
//
// Adding a word: put the same key in web/i18n/zh-CN.json and
// web/i18n/en.json (TestCatalogues fails if one lacks it), then use it in a
// template as {{t "key"}} or in a script as tr("key") (app.js loads
// /i18n/<lang>.json, the catalogue of <html lang>). Keys are dotted,
// page.thing ("login.submit"); a key with fmt placeholders ("%s", "%d")
// goes through {{tf "key" args...}} in templates. A template using an unknown key
// fails TestTemplatesUseKnownKeys. Chinese words come from
// /work/shared/zh-CN.md's table.

// Languages the page speaks; the first is the default.
var languages = []string{"zh-CN", "en"}

// langCookie remembers the switch's choice.
const langCookie = "yidu_lang"

// catalogue is one language's messages by key.
type catalogue map[string]string

// loadCatalogues reads the embedded catalogues, one per language, and
// refuses a key missing from any of them.
func loadCatalogues() (map[string]catalogue, error) {
	out := map[string]catalogue{}
	for _, lang := range languages {
		b, err := webFS.ReadFile("web/i18n/" + lang + ".json")
		if err != nil {
			return nil, fmt.Errorf("dashboard: catalogue %s: %w", lang, err)
		}
		var c catalogue
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("dashboard: catalogue %s: %w", lang, err)
		}
		out[lang] = c
	}
	ref := out[languages[0]]
	for _, lang := range languages[1:] {
		for _, k := range slices.Sorted(maps.Keys(ref)) {
			if _, ok := out[lang][k]; !ok {
				return nil, fmt.Errorf("dashboard: catalogue %s lacks key %q", lang, k)
			}
		}
		for k := range out[lang] {
			if _, ok := ref[k]; !ok {
				return nil, fmt.Errorf("dashboard: catalogue %s lacks key %q", languages[0], k)
			}
		}
	}
	return out, nil
}

// t is the template func of one catalogue: an unknown key renders as the
// key itself (visible, and TestTemplatesUseKnownKeys keeps templates from
// having any).
func (c catalogue) t(key string) string {
	if v, ok := c[key]; ok {
		return v
	}
	return key
}

// tf is t with fmt placeholders.
func (c catalogue) tf(key string, args ...any) string {
	return fmt.Sprintf(c.t(key), args...)
}

// parsePages parses the templates once per language, each with its own t.
func parsePages(cats map[string]catalogue) (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for lang, c := range cats {
		funcs := template.FuncMap{"t": c.t, "tf": c.tf, "lang": func() string { return lang },
			"badge": func(state string, lateBy int64) string { return stateBadge(c, state, lateBy) }}
		p, err := template.New("").Funcs(templateFuncs).Funcs(funcs).ParseFS(webFS, "web/templates/*.html")
		if err != nil {
			return nil, fmt.Errorf("dashboard: templates: %w", err)
		}
		out[lang] = p
	}
	return out, nil
}

// langFor is the page's language for r: the switch's cookie, else the
// first language Accept-Language prefers that the page speaks, else
// zh-CN.
func langFor(r *http.Request) string {
	if c, err := r.Cookie(langCookie); err == nil && slices.Contains(languages, c.Value) {
		return c.Value
	}
	return acceptLanguage(r.Header.Get("Accept-Language"))
}

// acceptLanguage picks from an Accept-Language header (RFC 9110 12.5.4):
// the highest q wins, ties in order; zh* is zh-CN, en* is en.
func acceptLanguage(h string) string {
	best, bestQ := languages[0], 0.0
	for i, part := range strings.Split(h, ",") {
		if i >= 32 {
			break
		}
		tag, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 || f > 1 {
				continue
			}
			q = f
		}
		tag = strings.ToLower(strings.TrimSpace(tag))
		lang := ""
		switch {
		case tag == "zh" || strings.HasPrefix(tag, "zh-"):
			lang = "zh-CN"
		case tag == "en" || strings.HasPrefix(tag, "en-"):
			lang = "en"
		}
		if lang != "" && q > bestQ {
			best, bestQ = lang, q
		}
	}
	return best
}

// handleLang is the language switch: GET /lang?to=en&back=/m/x remembers
// the choice for a year and goes back. back must be a path of this site.
func (s *Server) handleLang(w http.ResponseWriter, r *http.Request) {
	to := r.URL.Query().Get("to")
	if !slices.Contains(languages, to) {
		writeError(w, http.StatusBadRequest, "to must be one of "+strings.Join(languages, ", "))
		return
	}
	// The same rule as sign-in's next (access.SafeNext): a path of this
	// site, never one a browser could read as another host.
	back := access.SafeNext(r.URL.Query().Get("back"))
	http.SetCookie(w, &http.Cookie{Name: langCookie, Value: to, Path: "/", MaxAge: 365 * 24 * 3600,
		HttpOnly: false, Secure: s.httpsOnly, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// handleCatalogue serves one catalogue to the page's script (a JSON
// fetch: the CSP's connect-src 'self' allows it, no inline script needed).
func (s *Server) handleCatalogue(w http.ResponseWriter, r *http.Request) {
	lang := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/i18n/"), ".json")
	c, ok := s.cats[lang]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_ = json.NewEncoder(w).Encode(c)
}
