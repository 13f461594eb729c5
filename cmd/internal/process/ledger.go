package process

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/internal/loop"
	"github.com/yidu-io/yidu/ledger"
)

// LedgerKey reads the log's signing key from the configuration (the key,
// or the file holding it) and returns it with its verifier key; "" and
// no error when none is configured.
func LedgerKey(cfg config.Ledger) (skey, vkey string, err error) {
	skey = strings.TrimSpace(cfg.SigningKey)
	if skey == "" && cfg.SigningKeyFile != "" {
		b, err := os.ReadFile(cfg.SigningKeyFile)
		if err != nil {
			return "", "", fmt.Errorf("config: ledger.signing_key_file: %w", err)
		}
		skey = strings.TrimSpace(string(b))
	}
	if skey == "" {
		return "", "", nil
	}
	_, vkey, err = ledger.ParseSigningKey(skey)
	if err != nil {
		return "", "", fmt.Errorf("config: ledger.signing_key: %w", err)
	}
	return skey, vkey, nil
}

// LedgerOptions maps the configuration onto the ledger's options: the
// signer of its checkpoints and the TSA of each day's.
func LedgerOptions(cfg config.Ledger, log *slog.Logger) (ledger.Options, error) {
	opts := ledger.Options{Logger: log}
	skey, _, err := LedgerKey(cfg)
	if err != nil {
		return opts, err
	}
	if skey == "" {
		if log != nil {
			log.Warn("ledger: no ledger.signing_key: the evidence log's checkpoints are kept unsigned (docs/evidence.md)")
		}
	} else if opts.Signer, _, err = ledger.ParseSigningKey(skey); err != nil {
		return opts, err
	}
	if cfg.TSAURL != "" {
		if opts.Stamper, err = ledger.NewTSA(cfg.TSAURL, nil); err != nil {
			return opts, fmt.Errorf("config: ledger.tsa_url: %w", err)
		}
	}
	return opts, nil
}

// checkpointInterval is how often flushd checkpoints each corp's growing
// evidence log and closes its ended days: a minute, so a checkpoint
// signs every entry within a minute of its fact.
const checkpointInterval = time.Minute

// checkpointLoop checkpoints every corp's log that grew
// (ledger.CheckpointDue), closes every ended day (ledger.SealDue) and
// asks the TSA again for the tokens day checkpoints still owe
// (ledger.StampDue: the TSA was down or answered badly at the day's
// close) at start and every checkpointInterval until ctx ends. Every
// flushd replica runs it; replicas taking the same checkpoint write the
// same row once, and only the replica whose claim MySQL takes asks the
// TSA for a token. A panic or failure is recovered, logged and counted by g
// (yidu_loop_*{loop="checkpoint"}); the next turn tries again.
func checkpointLoop(ctx context.Context, l *ledger.Ledger, g *loop.Guard) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_ = g.Run(ctx, "ledger: close ended days", func(ctx context.Context) error {
			_, err := l.SealDue(ctx)
			return err
		})
		_ = g.Run(ctx, "ledger: checkpoint", func(ctx context.Context) error {
			_, err := l.CheckpointDue(ctx)
			return err
		})
		_ = g.Run(ctx, "ledger: timestamp day checkpoints", func(ctx context.Context) error {
			_, err := l.StampDue(ctx)
			return err
		})
		t.Reset(checkpointInterval)
	}
}
