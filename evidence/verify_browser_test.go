package evidence

import (
	"archive/zip"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/internal/tsatest"
	"github.com/yidu-io/yidu/ledger"
)

// TestOfflineVerifier: the pack's verify.html, opened from the pack in
// chromium with no network, checks the pack with the log's key (核验通过),
// and refuses a copy whose record was edited and rehashed, and the pack
// under another key.
func TestOfflineVerifier(t *testing.T) {
	path := testenv.LookPath(t, "chromium")
	f := newFixture(t, 3)
	s := f.service(t, true)
	z, _ := buildZIP(t, s, everyone{}, Filter{})
	dir := t.TempDir()
	zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	testenv.Check(t, "zip", err)
	rc, err := zr.Open(zipVerifier)
	testenv.Check(t, "verify.html in the pack", err)
	var html bytes.Buffer
	_, _ = html.ReadFrom(rc)
	rc.Close()
	page := filepath.Join(dir, "verify.html")
	testenv.Check(t, "write", os.WriteFile(page, html.Bytes(), 0o600))
	good := filepath.Join(dir, "good.zip")
	testenv.Check(t, "write", os.WriteFile(good, z, 0o600))
	forged := filepath.Join(dir, "forged.zip")
	testenv.Check(t, "write", os.WriteFile(forged, rehash(t, rewrite(t, z, func(n string, b []byte) []byte {
		if n == "zhangsan/record.json" {
			return bytes.ReplaceAll(b, []byte(`"read_time":"2026-11-02T04:05:00Z"`), []byte(`"read_time":"2026-11-02T02:05:00Z"`))
		}
		return b
	})), 0o600))
	other := newFakeLedger(t, "2026-11-02")

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, chromedp.ExecPath(path), chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-dev-shm-usage", true))
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(alloc)
	defer cancelTab()
	run := func(file, key string) string {
		t.Helper()
		steps := []chromedp.Action[chromedp.Void]{
			chromedp.Navigate("file://" + page),
			chromedp.SetUploadFiles("#zip", []string{file}),
			chromedp.SetValue("#key", key),
			chromedp.Click("#go"),
		}
		for _, a := range steps {
			if _, err := chromedp.Run(tab, a); err != nil {
				t.Fatalf("verify.html with %s: %v", filepath.Base(file), err)
			}
		}
		if _, err := chromedp.Run(tab, chromedp.Poll[bool](`document.getElementById("out").textContent.includes("核验通过") || document.getElementById("out").textContent.includes("未通过")`)); err != nil {
			t.Fatalf("verify.html with %s: %v", filepath.Base(file), err)
		}
		text, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById("out").textContent`))
		if err != nil {
			t.Fatalf("verify.html with %s: %v", filepath.Base(file), err)
		}
		return text
	}
	if out := run(good, f.ledger.vkey); !strings.Contains(out, "核验通过") || strings.Contains(out, "FAIL") || !strings.Contains(out, "checkpoint: yidu.test/"+corp) {
		t.Errorf("verify.html on the pack:\n%s", out)
	}
	if out := run(forged, f.ledger.vkey); !strings.Contains(out, "未通过") || !strings.Contains(out, "manifest.sig") || !strings.Contains(out, "the read at 2026-11-02T02:05:00Z is not proved") {
		t.Errorf("verify.html on the forged copy:\n%s", out)
	}
	if out := run(good, other.vkey); !strings.Contains(out, "未通过") || !strings.Contains(out, "not signed by the log's key") {
		t.Errorf("verify.html with another key:\n%s", out)
	}

	// Day checkpoints (issue 48): each record's is proved consistent with
	// the checkpoint of its entries; one of a forked tree, signed and
	// stamped alike, is refused.
	tsa := tsatest.Start(t)
	stamper, err := ledger.NewTSA(tsa.URL, nil)
	testenv.Check(t, "tsa", err)
	f.ledger.add("user00003", 3, "signal", ledger.Body{"read_time": "2026-11-03T01:00:00Z", "source": 1})
	tl := &tsaLedger{fakeLedger: f.ledger, tb: t, stamper: stamper}
	st, err := New(f.db, f.versions, Options{PageEvents: f.page, Now: func() time.Time { return t0.Add(72 * time.Hour) },
		Ledger: tl, Signer: f.ledger.signer, VerifierKey: f.ledger.vkey})
	testenv.Check(t, "New", err)
	stamped := filepath.Join(dir, "stamped.zip")
	z, _ = buildZIP(t, st, everyone{}, Filter{})
	testenv.Check(t, "write", os.WriteFile(stamped, z, 0o600))
	tl.fork = true
	forked := filepath.Join(dir, "forked.zip")
	z, _ = buildZIP(t, st, everyone{}, Filter{})
	testenv.Check(t, "write", os.WriteFile(forked, z, 0o600))
	if out := run(stamped, f.ledger.vkey); !strings.Contains(out, "核验通过") || strings.Contains(out, "FAIL") ||
		!strings.Contains(out, "zhangsan/record.json: the day checkpoint of 2026-11-02: consistent with the checkpoint of") {
		t.Errorf("verify.html on a pack with day checkpoints:\n%s", out)
	}
	if out := run(forked, f.ledger.vkey); !strings.Contains(out, "未通过") ||
		!strings.Contains(out, "zhangsan/record.json: the day checkpoint of 2026-11-02: is not consistent") {
		t.Errorf("verify.html on a pack whose day checkpoint is of a forked tree:\n%s", out)
	}
}
