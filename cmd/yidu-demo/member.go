package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

var viewRE = regexp.MustCompile(`data-view="([^"]+)"[^>]*data-version="([0-9]+)"`)

// readOnPage is one member on the reading page, in a browser of their
// own: signed in through the fake WeCom's OAuth2, the page opened (link),
// and with ack its end reached (read_to_end) and 我已阅读并知悉 pressed
// (acknowledged), through the receiver's events endpoint.
func (m *Main) readOnPage(ctx context.Context, userID string, ack bool) error {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	page := "http://" + m.App.ReceiverAddr + "/r/" + demoApp + "/" + url.PathEscape(m.Round.MsgID)
	get := func(target string) (*http.Response, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return nil, nil, err
		}
		req.Header.Set("User-Agent", "Mozilla/5.0 (iPhone) wxwork/4.1 MicroMessenger")
		resp, err := c.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		return resp, b, err
	}
	// The page sends a member without a session to WeCom's sign-in (the
	// fake's member list); choosing the member comes back signed in.
	resp, _, err := get(page)
	if err != nil {
		return err
	}
	if resp.Request.URL.Host != m.fakeSrv.Addr {
		return fmt.Errorf("GET %s ended %d at %s; want WeCom's sign-in", page, resp.StatusCode, resp.Request.URL)
	}
	signIn := resp.Request.URL
	q := signIn.Query()
	q.Set("as", userID)
	signIn.RawQuery = q.Encode()
	resp, html, err := get(signIn.String())
	if err != nil {
		return err
	}
	sm := viewRE.FindSubmatch(html)
	if resp.StatusCode != http.StatusOK || sm == nil {
		return fmt.Errorf("signed in, the page answered %d at %s without a view", resp.StatusCode, resp.Request.URL)
	}
	if !ack {
		return nil
	}
	for _, ev := range []string{"read_to_end", "acknowledged"} {
		b := fmt.Sprintf(`{"event":%q,"version":%s,"view":%q}`, ev, sm[2], sm[1])
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, page+"/events", strings.NewReader(b))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		out, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("event %s: %d %s", ev, resp.StatusCode, bytes.TrimSpace(out))
		}
	}
	return nil
}

// saveEvidence writes userID's evidence record (JSON) and 告知确认书 (PDF)
// from the dashboard API into EvidenceDir (a new temporary directory when
// empty), once the record holds the acknowledgement (flushd wrote it).
func (m *Main) saveEvidence(ctx context.Context, userID string) error {
	r := &m.Round
	if r.EvidenceDir = m.EvidenceDir; r.EvidenceDir == "" {
		dir, err := os.MkdirTemp("", "yidu-demo-evidence-")
		if err != nil {
			return fmt.Errorf("evidence: %w", err)
		}
		r.EvidenceDir = dir
	}
	base := "http://" + m.App.DashboardAddr + "/api/v1/messages/" + url.PathEscape(r.MsgID) + "/evidence/" + url.PathEscape(userID)
	var rec []byte
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		b, err := m.fetch(ctx, base)
		if err != nil {
			return fmt.Errorf("evidence: %w", err)
		}
		rec = b
		if r.EvidenceAcked = acknowledgedIn(b); r.EvidenceAcked {
			break
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("evidence of %s: no acknowledgement in MySQL yet: %w", userID, ctx.Err())
		}
	}
	pdf, err := m.fetch(ctx, base+".pdf")
	if err != nil {
		return fmt.Errorf("evidence PDF: %w", err)
	}
	if !bytes.HasPrefix(pdf, []byte("%PDF-")) {
		return errors.New("evidence PDF: not a PDF")
	}
	if r.EvidenceJSON, err = r.save("evidence-"+userID+".json", rec); err != nil {
		return fmt.Errorf("evidence: %w", err)
	}
	if r.EvidencePDF, err = r.save("evidence-"+userID+".pdf", pdf); err != nil {
		return fmt.Errorf("evidence: %w", err)
	}
	return nil
}

// save writes b into the round's EvidenceDir as name and returns its
// path.
func (r *Round) save(name string, b []byte) (string, error) {
	path := filepath.Join(r.EvidenceDir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return "", err
	}
	return path, nil
}

// acknowledgedIn reports whether an evidence record shows the member
// read, with an acknowledged signal.
func acknowledgedIn(rec []byte) bool {
	var v struct {
		Read    bool `json:"read"`
		Signals []struct {
			Kind string `json:"kind"`
		} `json:"signals"`
	}
	if json.Unmarshal(rec, &v) != nil || !v.Read {
		return false
	}
	for _, s := range v.Signals {
		if s.Kind == "acknowledged" {
			return true
		}
	}
	return false
}

// fetch GETs target with the demo's token: the body of a 200.
func (m *Main) fetch(ctx context.Context, target string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+m.APIToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", target, resp.StatusCode, bytes.TrimSpace(b))
	}
	return b, nil
}

// doJSON does req and decodes an answer of status want into out.
func doJSON(req *http.Request, want int, out any) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, bytes.TrimSpace(b))
	}
	return json.Unmarshal(b, out)
}

// remindThenEvidence reminds the hosted notice's unread members by hand
// (a reminder in manual_reminders), then takes the evidence a reminder
// shows in: the JSON and PDF of a reminded member, the notice's ZIP, and
// that member's own PDF from 我的记录 on the reading page.
func (m *Main) remindThenEvidence(ctx context.Context) error {
	r := &m.Round
	var rem struct {
		Reminded int `json:"reminded"`
	}
	code, err := m.api(ctx, http.MethodPost, "/messages/"+url.PathEscape(r.MsgID)+"/remind", map[string]any{}, &rem)
	if err != nil || code != http.StatusOK || rem.Reminded == 0 {
		return fmt.Errorf("remind unread: %d, %d reminded, %v", code, rem.Reminded, err)
	}
	r.Reminded = rem.Reminded
	reminded := r.Members[roundAcks]
	base := "http://" + m.App.DashboardAddr + "/api/v1/messages/" + url.PathEscape(r.MsgID)
	rec, err := m.fetch(ctx, base+"/evidence/"+url.PathEscape(reminded))
	if err != nil {
		return fmt.Errorf("evidence after a reminder: %w", err)
	}
	if !bytes.Contains(rec, []byte(`"kind":"manual"`)) {
		return fmt.Errorf("evidence of %s: no manual reminder in %s", reminded, rec)
	}
	if pdf, err := m.fetch(ctx, base+"/evidence/"+url.PathEscape(reminded)+".pdf"); err != nil || !bytes.HasPrefix(pdf, []byte("%PDF-")) {
		return fmt.Errorf("evidence PDF after a reminder: %v", err)
	}
	zb, err := m.fetch(ctx, base+"/evidence.zip")
	if err != nil {
		return fmt.Errorf("evidence ZIP after a reminder: %w", err)
	}
	if _, err := zip.NewReader(bytes.NewReader(zb), int64(len(zb))); err != nil {
		return fmt.Errorf("evidence ZIP after a reminder (%d bytes): %w", len(zb), err)
	}
	r.ZIPBytes = len(zb)
	c, err := m.memberClient(ctx, reminded)
	if err != nil {
		return err
	}
	target := "http://" + m.App.ReceiverAddr + "/r/" + demoApp + "/records/" + url.PathEscape(reminded) + "/" + url.PathEscape(r.MsgID) + "/evidence.pdf"
	resp, err := c.Get(target)
	if err != nil {
		return fmt.Errorf("我的记录 PDF: %w", err)
	}
	pdf, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !bytes.HasPrefix(pdf, []byte("%PDF-")) {
		return fmt.Errorf("我的记录 PDF of %s: %d %.80q %v", reminded, resp.StatusCode, pdf, err)
	}
	r.OwnPDFBytes = len(pdf)
	return nil
}

// memberClient signs userID in on the reading pages through the fake
// WeCom's OAuth2 and returns a client holding the session.
func (m *Main) memberClient(ctx context.Context, userID string) (*http.Client, error) {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	page := "http://" + m.App.ReceiverAddr + "/r/" + demoApp + "/records/" + url.PathEscape(userID)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, page, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.Request.URL.Host != m.fakeSrv.Addr {
		return nil, fmt.Errorf("GET %s ended %d at %s; want WeCom's sign-in", page, resp.StatusCode, resp.Request.URL)
	}
	signIn := resp.Request.URL
	q := signIn.Query()
	q.Set("as", userID)
	signIn.RawQuery = q.Encode()
	req, err = http.NewRequestWithContext(ctx, http.MethodGet, signIn.String(), nil)
	if err != nil {
		return nil, err
	}
	if resp, err = c.Do(req); err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("我的记录 of %s after sign-in: %d at %s", userID, resp.StatusCode, resp.Request.URL)
	}
	return c, nil
}
