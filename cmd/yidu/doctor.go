package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/yidu-io/yidu/callback/wxcrypt"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/cmd/internal/process"
	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/wecom"
)

// errDoctorFailed is doctor's result when a check failed (exit 1).
var errDoctorFailed = fmt.Errorf("doctor: a check failed")

// doctor runs `yidu doctor --app NAME`: what the configuration, the WeCom
// API and the receiver's callback URL allow for app NAME, each check on a
// line with what works, what is missing and what an errcode means
// (docs/wecom-setup.md). It changes and sends nothing.
func doctor(ctx context.Context, cfg config.Config, appName string, out io.Writer) error {
	app, ok := cfg.App(appName)
	if !ok {
		// A name the configuration does not have is a slip on the
		// command line, as a bad flag is: exit 2.
		names := make([]string, len(cfg.Apps))
		for i, a := range cfg.Apps {
			names[i] = a.Name
		}
		return usagef("doctor: no app %q in the configuration (apps: %s)", appName, strings.Join(names, ", "))
	}
	var checks []wecom.Check
	add := func(name string, status wecom.CheckStatus, detail string) {
		checks = append(checks, wecom.Check{Name: name, Status: status, Detail: detail})
	}

	// The receiver's secrets: present and well formed.
	cryptr, err := wxcrypt.New(app.Token, app.EncodingAESKey, app.CorpID)
	if err != nil {
		add("callback secrets", wecom.CheckFail, fmt.Sprintf("token (%s) and encoding_aes_key (%s): %v",
			config.EnvName(appName, "token"), config.EnvName(appName, "encoding_aes_key"), err))
	} else {
		add("callback secrets", wecom.CheckOK, "token and a 43-character encoding_aes_key")
	}

	// The WeCom API, with each secret.
	if app.Secret == "" {
		add("app secret", wecom.CheckFail, fmt.Sprintf("none (%s): yidu can neither send nor read the directory", config.EnvName(appName, "secret")))
	} else {
		process.PointWeCom(cfg.WeCom)
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		var trusted []wecom.TrustedURL
		if cfg.Receiver.PublicURL != "" {
			trusted = append(trusted, wecom.TrustedURL{For: "tracked links (receiver.public_url)", URL: cfg.Receiver.PublicURL})
		}
		if la, ok := cfg.WeComLoginApp(); ok && la.Name == app.Name {
			trusted = append(trusted, wecom.TrustedURL{For: "sign-in with WeCom (dashboard.public_url)", URL: cfg.Dashboard.PublicURL, Required: true})
		}
		checks = append(checks, wecom.Doctor(wctx, wecom.App{CorpID: app.CorpID, AgentID: app.AgentID, Secret: app.Secret}, app.ContactsSecret, trusted...)...)
		cancel()
	}

	// The callback URL, as WeCom verifies it (doc path 91144): a signed GET
	// whose echostr the receiver must decrypt and answer.
	switch {
	case cfg.Receiver.PublicURL == "":
		add("callback URL", wecom.CheckSkipped, "receiver.public_url not set: cannot reach the receiver as WeCom does; "+
			"set it, or check https://<receiver host>/wecom/callback/"+appName+" by saving it in the admin console")
	case cryptr == nil:
		add("callback URL", wecom.CheckSkipped, "no callback secrets to sign WeCom's verification with")
	default:
		target := strings.TrimRight(cfg.Receiver.PublicURL, "/") + "/wecom/callback/" + appName
		if err := verifyCallbackURL(ctx, cryptr, target); err != nil {
			add("callback URL", wecom.CheckFail, target+": "+err.Error())
		} else {
			add("callback URL", wecom.CheckOK, target+" answers WeCom's URL verification")
		}
	}

	checks = append(checks, verifyFileChecks(ctx, cfg)...)
	checks = append(checks, spoolCheck(cfg.Receiver))
	checks = append(checks, kafkaTopicCheck(ctx, cfg.Kafka))
	checks = append(checks, attachmentsCheck(ctx, cfg.Attachments.S3))

	failed := false
	for _, c := range checks {
		fmt.Fprintf(out, "%-4s %s: %s\n", c.Status, c.Name, c.Detail)
		failed = failed || c.Status == wecom.CheckFail
	}
	if failed {
		return errDoctorFailed
	}
	return nil
}

// kafkaTopicCheck reads the deltas topic's settings from the brokers and
// compares them with the configuration's (kafka.replication_factor,
// min_insync_replicas, partitions): a topic with one copy, or whose
// acks=all returns with one copy, can lose a read WeCom was answered 200
// for.
func kafkaTopicCheck(ctx context.Context, c config.Kafka) wecom.Check {
	const name = "kafka topic"
	cl, err := kafkaClient(c)
	if err != nil {
		return wecom.Check{Name: name, Status: wecom.CheckFail, Detail: err.Error()}
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	st, err := delta.DescribeTopic(ctx, cl, c.Topic)
	if err != nil {
		return wecom.Check{Name: name, Status: wecom.CheckFail, Detail: fmt.Sprintf("%s: %v", strings.Join(c.Brokers, ","), err)}
	}
	if problems := st.Problems(topicSpec(c)); len(problems) > 0 {
		return wecom.Check{Name: name, Status: wecom.CheckFail, Detail: strings.Join(problems, "; ")}
	}
	return wecom.Check{Name: name, Status: wecom.CheckOK, Detail: fmt.Sprintf("%s: %d partitions, replication factor %d, min.insync.replicas %d",
		c.Topic, st.Partitions, st.ReplicationFactor, st.MinInsyncReplicas)}
}

// verifyCallbackURL sends target the signed verification GET WeCom sends
// when the URL is saved, and checks the plaintext comes back.
func verifyCallbackURL(ctx context.Context, c *wxcrypt.Crypter, target string) error {
	echo := "yidu-doctor-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	q, err := c.Echo([]byte(echo), strconv.FormatInt(time.Now().Unix(), 10), "doctor")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second) // WeCom waits 5 s (doc path 90238)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("unreachable: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	switch {
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("answered %s %q: is it yidu's receiver, with this app's token and encoding_aes_key?", resp.Status, strings.TrimSpace(string(body)))
	case string(body) != echo:
		return fmt.Errorf("answered 200 but not the decrypted echostr: another token or encoding_aes_key?")
	}
	return nil
}

// verifyFileChecks fetch wecom.verify_file from the root of the
// receiver's and the dashboard's public URLs, as WeCom does when the
// trusted domain is verified (可信域名 → 申请校验域名).
func verifyFileChecks(ctx context.Context, cfg config.Config) []wecom.Check {
	name, body, err := cfg.WeCom.ReadVerifyFile()
	switch {
	case err != nil:
		return []wecom.Check{{Name: "domain verification file", Status: wecom.CheckFail, Detail: err.Error()}}
	case name == "":
		return []wecom.Check{{Name: "domain verification file", Status: wecom.CheckSkipped, Detail: "wecom.verify_file not set (WeCom asks for it when the trusted domain is verified)"}}
	}
	var out []wecom.Check
	for _, base := range []string{cfg.Receiver.PublicURL, cfg.Dashboard.PublicURL} {
		if base == "" {
			continue
		}
		u, err := url.Parse(base)
		if err != nil {
			continue
		}
		target := u.Scheme + "://" + u.Host + "/" + name
		c := wecom.Check{Name: "domain verification file", Status: wecom.CheckOK, Detail: target + " serves it"}
		if got, err := fetchSmall(ctx, target); err != nil {
			c.Status, c.Detail = wecom.CheckFail, target+": "+err.Error()
		} else if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(body)) {
			c.Status, c.Detail = wecom.CheckFail, target+": answers another content than wecom.verify_file (is the ingress serving it, and is it yidu?)"
		}
		out = append(out, c)
	}
	return out
}

// fetchSmall GETs target and returns at most 1 KiB of a 200's body.
func fetchSmall(ctx context.Context, target string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("unreachable: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("answered %s", resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 1<<10))
}

// tmpfsMagic is statfs(2)'s f_type of a tmpfs (linux/magic.h).
const tmpfsMagic = 0x01021994

// spoolCheck reports the receiver's spool (docs/reliability.md, Kafka
// down): where it is, how full, and whether it survives what it must. A
// spool on tmpfs is gone with the host's memory: the reads it holds
// during a Kafka outage are lost with a reboot.
func spoolCheck(r config.Receiver) wecom.Check {
	c := wecom.Check{Name: "receiver spool"}
	dir := r.SpoolDir
	if dir == "" || dir == config.SpoolOff {
		c.Status, c.Detail = wecom.CheckWarn, "off: a read Kafka does not acknowledge is answered 503, and WeCom gives up after 3 tries (set data_dir or receiver.spool_dir)"
		return c
	}
	var used int64
	segs, _ := filepath.Glob(filepath.Join(dir, "*.spool"))
	for _, f := range segs {
		if fi, err := os.Stat(f); err == nil {
			used += fi.Size()
		}
	}
	// The directory may not exist yet (the receiver creates it): look at
	// the nearest existing parent's filesystem.
	at := dir
	for {
		if _, err := os.Stat(at); err == nil || filepath.Dir(at) == at {
			break
		}
		at = filepath.Dir(at)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(at, &st); err != nil {
		c.Status, c.Detail = wecom.CheckFail, fmt.Sprintf("%s: %v", dir, err)
		return c
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	c.Status = wecom.CheckOK
	c.Detail = fmt.Sprintf("%s: %d of %d bytes used (%d segments, %.1f%%), %d bytes free on its filesystem",
		dir, used, r.SpoolMaxBytes, len(segs), 100*float64(used)/float64(max(r.SpoolMaxBytes, 1)), free)
	switch {
	case int64(st.Type) == tmpfsMagic:
		c.Status = wecom.CheckWarn
		c.Detail += "; on tmpfs: the spooled reads do not survive a reboot (use a persistent volume)"
	case free < r.SpoolMaxBytes-used:
		c.Status = wecom.CheckWarn
		c.Detail += fmt.Sprintf("; less free space than receiver.spool_max_bytes (%d) leaves: the disk fills first (each read then 503)", r.SpoolMaxBytes)
	}
	return c
}
