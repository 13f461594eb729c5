// Package tsatest runs a real RFC 3161 time-stamping authority for tests:
// Debian's `openssl ts -reply` behind an HTTP handler, with a certificate
// of its own, and checks tokens with `openssl ts -verify`, a verifier that
// is not yidu's. Only tests import it: no production binary carries it.
package tsatest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// TSA is a running test TSA.
type TSA struct {
	// URL takes TimeStampReqs (POST, application/timestamp-query).
	URL string
	// Cert is the TSA's certificate (PEM), the trust anchor of its tokens.
	Cert    string
	dir     string
	openssl string
	mu      sync.Mutex
	n       int
	// Requests counts the requests answered.
	Requests int
}

const config = `[ tsa ]
default_tsa = tsa1
[ tsa1 ]
dir = %[1]s
serial = %[1]s/serial
crypto_device = builtin
signer_cert = %[1]s/tsa.crt
certs = %[1]s/tsa.crt
signer_key = %[1]s/tsa.key
signer_digest = sha256
default_policy = 1.2.3.4.1
digests = sha256
accuracy = secs:1
ordering = yes
tsa_name = no
ess_cert_id_chain = no
ess_cert_id_alg = sha256
`

// Start makes a TSA's key and certificate in a temporary directory and
// serves it until tb ends. It skips tb when openssl is not installed
// (and fails it under YIDU_TEST_REAL=1).
func Start(tb testing.TB) *TSA {
	tb.Helper()
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		if os.Getenv("YIDU_TEST_REAL") != "" {
			tb.Fatalf("tsatest: openssl is not installed: %v", err)
		}
		tb.Skip("tsatest: openssl is not installed")
	}
	t := &TSA{dir: tb.TempDir(), openssl: openssl}
	t.Cert = filepath.Join(t.dir, "tsa.crt")
	if err := os.WriteFile(filepath.Join(t.dir, "serial"), []byte("01\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(t.dir, "tsa.cnf"), fmt.Appendf(nil, config, t.dir), 0o600); err != nil {
		tb.Fatal(err)
	}
	if out, err := exec.Command(openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
		"-keyout", filepath.Join(t.dir, "tsa.key"), "-out", t.Cert, "-days", "30", "-subj", "/CN=yidu test TSA",
		"-addext", "extendedKeyUsage=critical,timeStamping", "-addext", "keyUsage=critical,digitalSignature").CombinedOutput(); err != nil {
		tb.Fatalf("tsatest: certificate: %v\n%s", err, out)
	}
	srv := httptest.NewServer(http.HandlerFunc(t.serve))
	tb.Cleanup(srv.Close)
	t.URL = srv.URL + "/tsa"
	return t
}

func (t *TSA) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/timestamp-query" {
		http.Error(w, "POST application/timestamp-query", http.StatusBadRequest)
		return
	}
	q, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// openssl keeps the serial in a file: one reply at a time.
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n++
	qf, rf := filepath.Join(t.dir, "q"+strconv.Itoa(t.n)+".tsq"), filepath.Join(t.dir, "r"+strconv.Itoa(t.n)+".tsr")
	if err := os.WriteFile(qf, q, 0o600); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	cmd := exec.Command(t.openssl, "ts", "-reply", "-config", filepath.Join(t.dir, "tsa.cnf"), "-queryfile", qf, "-out", rf)
	if out, err := cmd.CombinedOutput(); err != nil {
		http.Error(w, fmt.Sprintf("openssl ts -reply: %v: %s", err, out), http.StatusInternalServerError)
		return
	}
	b, err := os.ReadFile(rf)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	t.Requests++
	w.Header().Set("Content-Type", "application/timestamp-reply")
	_, _ = w.Write(b)
}

// Verify checks token (a TimeStampToken, DER) over data with `openssl ts
// -verify` and the TSA's certificate; nil when openssl says OK.
func (t *TSA) Verify(data, token []byte) error {
	dir, err := os.MkdirTemp(t.dir, "verify")
	if err != nil {
		return err
	}
	df, tf := filepath.Join(dir, "data"), filepath.Join(dir, "token.der")
	if err := os.WriteFile(df, data, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(tf, token, 0o600); err != nil {
		return err
	}
	out, err := exec.Command(t.openssl, "ts", "-verify", "-data", df, "-in", tf, "-token_in", "-CAfile", t.Cert).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("Verification: OK")) {
		return fmt.Errorf("openssl ts -verify: %v: %s", err, out)
	}
	return nil
}
