package pagereader

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// Fetch GETs path (on the receiver: /r/<app>/<msgid>/a/<sha256>) with the
// reader's session and the headers given, as the page's pdf.js does; it
// returns the answer's status and headers and its body read into buf
// (grown as needed; nil for a new one). With headersOnly the body is not
// read: the request is cut after the headers, as pdf.js cuts its first
// full GET once it knows ranges are served.
func (r *Reader) Fetch(ctx context.Context, path string, header http.Header, buf []byte, headersOnly bool) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+path, nil)
	if err != nil {
		return 0, nil, buf, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, cancel, err := r.do(req)
	if err != nil {
		return 0, nil, buf, fmt.Errorf("pagereader: GET %s: %w", path, err)
	}
	defer cancel()
	defer resp.Body.Close()
	buf = buf[:0]
	if headersOnly {
		return resp.StatusCode, resp.Header, buf, nil
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := resp.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return resp.StatusCode, resp.Header, buf, nil
		}
		if err != nil {
			return resp.StatusCode, resp.Header, buf, fmt.Errorf("pagereader: GET %s: %w", path, err)
		}
	}
}
