// Package webedge is the web edge the dashboard and the reading page
// share: what every answer carries (security headers, the CSP built per
// surface), who the client is (its address through the trusted proxies,
// internal/clientip; whether it came over HTTPS), whether an unsafe
// request is this site's own (CSRF token, Sec-Fetch-Site, Origin), the
// sessions in Redis (one implementation: the dashboard's admin sessions
// and the page's rolling reader sessions differ by key, lifetime and
// cookie), the end of a WeCom OAuth sign-in, and the error table that
// maps an outcome to its status and its words in Chinese and English.
//
// It decides nothing about who may do what: package access says who is
// asking, the services what they may do; webedge only translates HTTP.
package webedge
