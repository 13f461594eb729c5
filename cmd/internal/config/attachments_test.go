package config

import (
	"strings"
	"testing"
	"time"
)

// TestAttachmentsS3: attachments.s3 is off by default, read from the file
// with its keys overridable from the environment, and half of it (no
// endpoint) is refused rather than leaving uploads in MySQL unseen; no
// error quotes a key.
func TestAttachmentsS3(t *testing.T) {
	if s := Default().Attachments.S3; s.Enabled() || !s.SSL() {
		t.Errorf("default attachments.s3 = %+v; want off, use_ssl true", s)
	}
	p := writeConfig(t, `attachments:
  s3:
    endpoint: oss-cn-hangzhou.aliyuncs.com
    bucket: yidu-files
    region: oss-cn-hangzhou
    access_key: AKIDfile
    secret_key: secret-from-file
    use_ssl: false
    addressing: virtual
    presign_ttl: 10m
`)
	env := map[string]string{"YIDU_ATTACHMENTS_S3_SECRET_KEY": "secret-from-env"}
	cfg, err := Load(p, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Attachments.S3
	if !s.Enabled() || s.Bucket != "yidu-files" || s.Region != "oss-cn-hangzhou" || s.AccessKey != "AKIDfile" || s.SecretKey != "secret-from-env" ||
		s.SSL() || s.Addressing != "virtual" || s.PresignTTL.D() != 10*time.Minute {
		t.Errorf("attachments.s3 = %+v", s)
	}
	p = writeConfig(t, "attachments: {s3: {bucket: yidu-files, secret_key: secret-from-file}}\n")
	if _, err := Load(p, nil); err == nil || !strings.Contains(err.Error(), "attachments.s3.endpoint") || strings.Contains(err.Error(), "secret-from-file") {
		t.Errorf("Load without an endpoint = %v; want attachments.s3.endpoint named, no key quoted", err)
	}
}
