package main

import (
	"strings"
	"testing"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/wecom"
)

// TestAttachmentsCheck: doctor's attachments bucket check passes on the
// real S3 server's bucket, fails on a bucket that is not there or with a
// wrong secret (never quoting it), and is skipped without attachments.s3.
func TestAttachmentsCheck(t *testing.T) {
	if c := attachmentsCheck(t.Context(), config.S3{}); c.Status != wecom.CheckSkipped {
		t.Errorf("without attachments.s3 = %s %q; want skipped", c.Status, c.Detail)
	}
	srv := testenv.S3(t)
	off := false
	good := config.S3{Endpoint: srv.Endpoint, Bucket: srv.Bucket, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, UseSSL: &off}
	if c := attachmentsCheck(t.Context(), good); c.Status != wecom.CheckOK || !strings.Contains(c.Detail, srv.Bucket) {
		t.Errorf("the bucket = %s %q; want ok", c.Status, c.Detail)
	}
	missing := good
	missing.Bucket = "yidu-no-such-bucket"
	if c := attachmentsCheck(t.Context(), missing); c.Status != wecom.CheckFail || !strings.Contains(c.Detail, "does not exist") {
		t.Errorf("a missing bucket = %s %q; want FAIL, does not exist", c.Status, c.Detail)
	}
	wrong := good
	wrong.SecretKey = "not-the-secret-0123"
	if c := attachmentsCheck(t.Context(), wrong); c.Status != wecom.CheckFail || strings.Contains(c.Detail, wrong.SecretKey) {
		t.Errorf("a wrong secret = %s %q; want FAIL without the key", c.Status, c.Detail)
	}
}
