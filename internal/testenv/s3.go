package testenv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3EndpointEnv names the host:port of an S3-compatible server the tests
// of attachments.s3 run against (.ci/run starts s3proxy from Maven Central
// and sets it; .ci/s3proxy/start.sh starts one by hand). Without it a test
// starts s3proxy of its own from the jar .ci/s3proxy/fetch.sh caches
// (S3ProxyJarEnv, or its default place) when java is on PATH; without
// either it is skipped, or fails with YIDU_TEST_REAL=1. Its keys are
// YIDU_TEST_S3_ACCESS_KEY and YIDU_TEST_S3_SECRET_KEY (default the
// scripts' yidutest and yidutestsecret).
const S3EndpointEnv = "YIDU_TEST_S3_ENDPOINT"

// S3Server is an S3-compatible server and a bucket of the test's own.
type S3Server struct {
	Endpoint, AccessKey, SecretKey, Bucket string
	// Client is an administrator's client of the server (to look at what
	// a test wrote behind yidu's back).
	Client *minio.Client
}

// S3 returns the server of YIDU_TEST_S3_ENDPOINT with a new empty bucket,
// removed with its objects when tb ends.
func S3(tb testing.TB) S3Server {
	tb.Helper()
	s := S3Server{Endpoint: os.Getenv(S3EndpointEnv), AccessKey: cmp.Or(os.Getenv("YIDU_TEST_S3_ACCESS_KEY"), "yidutest"),
		SecretKey: cmp.Or(os.Getenv("YIDU_TEST_S3_SECRET_KEY"), "yidutestsecret"), Bucket: RandomName("yidu-test-")}
	if s.Endpoint == "" {
		s.Endpoint = startS3Proxy(tb, s.AccessKey, s.SecretKey)
	}
	c, err := minio.New(s.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), Region: "us-east-1"})
	Check(tb, "S3 client", err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		unavailable(tb, "S3 server at "+s.Endpoint, err)
	}
	s.Client = c
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for o := range c.ListObjects(ctx, s.Bucket, minio.ListObjectsOptions{Recursive: true}) {
			if o.Err == nil {
				_ = c.RemoveObject(ctx, s.Bucket, o.Key, minio.RemoveObjectOptions{})
			}
		}
		if err := c.RemoveBucket(ctx, s.Bucket); err != nil {
			tb.Logf("testenv: remove bucket %s: %v", s.Bucket, err)
		}
	})
	return s
}

// S3ProxyJarEnv names s3proxy's jar-with-dependencies (default
// ~/.cache/yidu/s3proxy-2.6.0/s3proxy-2.6.0-jar-with-dependencies.jar,
// where .ci/s3proxy/fetch.sh puts it).
const S3ProxyJarEnv = "YIDU_TEST_S3PROXY_JAR"

// startS3Proxy starts s3proxy on 127.0.0.1 with a filesystem store in a
// temporary folder and the keys given, killed when tb ends; it returns
// its host:port.
func startS3Proxy(tb testing.TB, access, secret string) string {
	tb.Helper()
	jar := os.Getenv(S3ProxyJarEnv)
	if jar == "" {
		home, _ := os.UserHomeDir()
		jar = filepath.Join(home, ".cache", "yidu", "s3proxy-2.6.0", "s3proxy-2.6.0-jar-with-dependencies.jar")
	}
	if _, err := os.Stat(jar); err != nil {
		unavailable(tb, "S3 server", fmt.Errorf("%s is not set and no s3proxy jar at %s (.ci/s3proxy/fetch.sh fetches it): %w", S3EndpointEnv, jar, err))
	}
	java := LookPath(tb, "java")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Check(tb, "free port", err)
	addr := l.Addr().String()
	l.Close()
	dir := tb.TempDir()
	conf := filepath.Join(dir, "s3proxy.conf")
	Check(tb, "s3proxy.conf", os.WriteFile(conf, []byte("s3proxy.endpoint=http://"+addr+"\n"+
		"s3proxy.authorization=aws-v2-or-v4\ns3proxy.identity="+access+"\ns3proxy.credential="+secret+"\n"+
		"s3proxy.cors-allow-all=true\njclouds.provider=filesystem\njclouds.filesystem.basedir="+filepath.Join(dir, "blobs")+"\n"), 0o600))
	log, err := os.Create(filepath.Join(dir, "s3proxy.log"))
	Check(tb, "s3proxy.log", err)
	cmd := exec.Command(java, "-jar", jar, "--properties", conf)
	cmd.Stdout, cmd.Stderr = log, log
	Check(tb, "start s3proxy", cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		log.Close()
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		// Any answer (403 without a signature) is a server up.
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
			return addr
		}
		select {
		case <-done:
			b, _ := os.ReadFile(log.Name())
			tb.Fatalf("testenv: s3proxy exited: %v\n%s", cmd.ProcessState, b)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("testenv: s3proxy did not answer at %s in 60 s: %v", addr, errors.Join(err, errors.New("see "+log.Name())))
		}
	}
}
