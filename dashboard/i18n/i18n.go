// Package i18n is the dashboard's languages: the catalogues of its
// words, the choice of a request's language and the switch.
//
// The page speaks one language at a time: Simplified Chinese by default
// (yidu's users are Chinese HR teams), English when the browser asks for it
// (Accept-Language) or the user picked it with the switch (cookie
// yidu_lang). Never both languages in one label.
//
// Adding a word: put the same key in dashboard/web/i18n/zh-CN.json and
// dashboard/web/i18n/en.json (TestCatalogues fails if one lacks it), then use it in a
// template as {{t "key"}} or in a script as tr("key") (app.js loads
// /i18n/<lang>.json, the catalogue of <html lang>). Keys are dotted,
// page.thing ("login.submit"); a key with fmt placeholders ("%s", "%d")
// goes through {{tf "key" args...}} in templates. A template using an unknown key
// fails TestTemplatesUseKnownKeys. Chinese words come from
// /work/shared/zh-CN.md's table.
package i18n

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/internal/webedge"
)

// Languages the page speaks; the first is the default.
var Languages = []string{"zh-CN", "en"}

// Cookie remembers the switch's choice.
const Cookie = "yidu_lang"

// Catalogue is one language's messages by key.
type Catalogue map[string]string

// Load reads the catalogues, one per language ("<lang>.json" in fsys),
// and refuses a key missing from any of them.
func Load(fsys fs.FS) (map[string]Catalogue, error) {
	out := map[string]Catalogue{}
	for _, lang := range Languages {
		b, err := fs.ReadFile(fsys, lang+".json")
		if err != nil {
			return nil, fmt.Errorf("i18n: catalogue %s: %w", lang, err)
		}
		var c Catalogue
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("i18n: catalogue %s: %w", lang, err)
		}
		out[lang] = c
	}
	ref := out[Languages[0]]
	for _, lang := range Languages[1:] {
		for _, k := range slices.Sorted(maps.Keys(ref)) {
			if _, ok := out[lang][k]; !ok {
				return nil, fmt.Errorf("i18n: catalogue %s lacks key %q", lang, k)
			}
		}
		for k := range out[lang] {
			if _, ok := ref[k]; !ok {
				return nil, fmt.Errorf("i18n: catalogue %s lacks key %q", Languages[0], k)
			}
		}
	}
	return out, nil
}

// Has reports whether the catalogue has key.
func (c Catalogue) Has(key string) bool { _, ok := c[key]; return ok }

// T is the template func of one catalogue: an unknown key renders as
// the key itself (visible, and TestTemplatesUseKnownKeys keeps templates
// from having any).
func (c Catalogue) T(key string) string {
	if v, ok := c[key]; ok {
		return v
	}
	return key
}

// TF is T with fmt placeholders.
func (c Catalogue) TF(key string, args ...any) string {
	return fmt.Sprintf(c.T(key), args...)
}

// LangFor is the page's language for r: the switch's cookie, else the
// first language Accept-Language prefers that the page speaks, else
// zh-CN.
func LangFor(r *http.Request) string {
	if c, err := r.Cookie(Cookie); err == nil && slices.Contains(Languages, c.Value) {
		return c.Value
	}
	return AcceptLanguage(r.Header.Get("Accept-Language"))
}

// AcceptLanguage picks from an Accept-Language header (RFC 9110 12.5.4):
// the highest q wins, ties in order; zh* is zh-CN, en* is en.
func AcceptLanguage(h string) string {
	best, bestQ := Languages[0], 0.0
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

// HandleLang is the language switch: GET /lang?to=en&back=/m/x remembers
// the choice for a year and goes back. back must be a path of this site;
// secure: the cookie is Secure (the public URL is https).
func HandleLang(secure bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		to := r.URL.Query().Get("to")
		if !slices.Contains(Languages, to) {
			webedge.WriteError(w, http.StatusBadRequest, "to must be one of "+strings.Join(Languages, ", "))
			return
		}
		// The same rule as sign-in's next (access.SafeNext): a path of this
		// site, never one a browser could read as another host.
		back := access.SafeNext(r.URL.Query().Get("back"))
		http.SetCookie(w, &http.Cookie{Name: Cookie, Value: to, Path: "/", MaxAge: 365 * 24 * 3600,
			HttpOnly: false, Secure: secure, SameSite: http.SameSiteLaxMode})
		http.Redirect(w, r, back, http.StatusSeeOther)
	}
}

// HandleCatalogue serves one catalogue of cats to the page's script (a
// JSON fetch: the CSP's connect-src 'self' allows it, no inline script
// needed), GET /i18n/<lang>.json.
func HandleCatalogue(cats map[string]Catalogue) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		lang := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/i18n/"), ".json")
		c, ok := cats[lang]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("Cache-Control", "public, max-age=300")
		_ = json.NewEncoder(w).Encode(c)
	}
}

// AuditDetail is an audit row's detail in the page's words: each
// "key=value" field's key, and the fixed phrases, through the catalogue
// (audit.detail.<key>); values (hashes, UserIDs, reasons) are shown as
// recorded. A key the catalogue lacks stays as it is.
func AuditDetail(c Catalogue, d string) string {
	if k := "audit.detail." + strings.ReplaceAll(d, " ", "_"); c.Has(k) {
		return c.T(k)
	}
	if out, ok := roleChangeDetail(c, d); ok {
		return out
	}
	// All or nothing: a detail with a word the catalogue lacks is shown
	// as recorded, never half in one language and half in the other.
	fields := strings.Fields(d)
	for i, f := range fields {
		key, val, ok := strings.Cut(f, "=")
		if !ok {
			k := "audit.detail." + f
			if !c.Has(k) {
				return d
			}
			fields[i] = c.T(k)
			continue
		}
		k := "audit.detail." + key
		if !c.Has(k) {
			return d
		}
		if v := "audit.value." + val; c.Has(v) {
			val = c.T(v)
		}
		fields[i] = c.T(k) + val
	}
	return strings.Join(fields, " ")
}

// roleChange is a role_change row's detail as access.RecordRoleChanges
// writes it: "grant viewer departments=3,4 of acme to wecom lisi".
var roleChange = regexp.MustCompile(`^(grant|revoke) (\S+)( \S+=\S+)? of (\S+) to (\S+) (\S+)$`)

// roleChangeDetail puts a role change in the page's words (授予 查看者
// （departments=3,4）于 acme 给 企业微信 lisi); false when d is not one
// or a word of it has no translation.
func roleChangeDetail(c Catalogue, d string) (string, bool) {
	m := roleChange.FindStringSubmatch(d)
	if m == nil {
		return "", false
	}
	keys := []string{"audit.rolechange." + m[1], "audit.role." + m[2], "audit.kind." + m[5]}
	for _, k := range keys {
		if !c.Has(k) {
			return "", false
		}
	}
	scope := ""
	if m[3] != "" {
		scope = "（" + strings.TrimSpace(m[3]) + "）"
	}
	corp := m[4]
	if corp == "*" {
		corp = c.T("audit.rolechange.every_corp")
	}
	return c.T(keys[0]) + " " + c.T(keys[1]) + scope + " " + c.T("audit.rolechange.of") + " " + corp + " " +
		c.T("audit.rolechange.to") + " " + c.T(keys[2]) + " " + m[6], true
}
