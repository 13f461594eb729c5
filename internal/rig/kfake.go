package rig

import (
	"context"
	"net"
	"strconv"
	"time"
)

// StartKfake starts bin, a yidu-kfake binary (cmd/yidu-kfake), with
// topic of partitions on a free loopback port, and returns it with the
// broker's address once it has printed it. Kafka then does not share the
// Go runtime of the process being measured. The broker runs with
// -exit-on-eof on a stdin only this process holds, so it exits when this
// process does, in any way; Stop ends it before.
func StartKfake(ctx context.Context, bin, topic string, partitions int) (*Proc, string, error) {
	p, err := Start(Spec{
		Name: "yidu-kfake", Path: bin, HoldStdin: true, Announce: kfakeAddr,
		Args: []string{"-listen", "127.0.0.1:0", "-topic", topic, "-partitions", strconv.Itoa(partitions), "-exit-on-eof"},
	})
	if err != nil {
		return nil, "", err
	}
	addr, err := p.Addr(ctx, "kafka", 30*time.Second)
	if err != nil {
		_ = p.Stop(5 * time.Second)
		return nil, "", err
	}
	return p, addr, nil
}

// kfakeAddr reads yidu-kfake's one line on stdout: the broker's address.
func kfakeAddr(line string) (what, addr string, ok bool) {
	if _, _, err := net.SplitHostPort(line); err != nil {
		return "", "", false
	}
	return "kafka", line, true
}
