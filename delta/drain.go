package delta

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// drainLoop forwards spooled deltas every DrainInterval until Close.
func (s *Spool) drainLoop() {
	defer close(s.done)
	t := time.NewTicker(s.opts.DrainInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		_ = s.guard.Run(context.Background(), "spool drain", func(context.Context) error { s.drain(); return nil })
	}
}

// drain forwards every sealed segment, oldest first, and deletes each once
// Kafka acknowledged all its deltas, then seals the current one and
// forwards it too. It stops at the first failure (Kafka still down).
func (s *Spool) drain() { s.drainUntil(s.stop, time.Time{}) }

// drainUntil is drain, stopping early when stop closes or at deadline
// (zero: none).
func (s *Spool) drainUntil(stop <-chan struct{}, deadline time.Time) {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if !down {
		return
	}
	for {
		select {
		case <-stop:
			return
		default:
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return
		}
		s.mu.Lock()
		if len(s.sealed) == 0 {
			if s.cur != nil {
				// Only now the current segment: while Kafka is down the
				// older ones fail first, so an outage fills segments
				// instead of cutting one per attempt.
				s.mu.Unlock()
				if err := s.seal(); err != nil {
					s.log.Error("seal spool segment", "err", err)
					return
				}
				continue
			}
			s.down = false // empty: Publish tries Kafka first again
			s.log.Info("spool drained; publishing to Kafka directly again")
			s.mu.Unlock()
			return
		}
		seg := s.sealed[0]
		s.mu.Unlock()
		if err := s.forward(seg); err != nil {
			s.m.drainErrors.Inc()
			s.log.Warn("forward spooled deltas; retrying", "segment", seg.name, "err", err)
			return
		}
		if err := os.Remove(filepath.Join(s.opts.Dir, seg.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Error("remove drained spool segment", "segment", seg.name, "err", err)
			return
		}
		s.mu.Lock()
		s.sealed = s.sealed[1:]
		s.bytes -= seg.size
		s.m.bytes.Set(float64(s.bytes))
		s.mu.Unlock()
	}
}

// forward publishes one segment's deltas, DrainBatch at a time.
func (s *Spool) forward(seg segment) error {
	ds, err := ReadSpoolSegment(filepath.Join(s.opts.Dir, seg.name))
	if err != nil {
		var torn *TornError
		if !errors.As(err, &torn) {
			return err
		}
		s.log.Warn("spool segment ends in a torn record (a write cut by a crash, never acknowledged)", "segment", seg.name, "at", torn.Offset)
	}
	for chunk := range slices.Chunk(ds, s.opts.DrainBatch) {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.DrainTimeout)
		err := s.pub.Publish(ctx, chunk)
		cancel()
		if err != nil {
			return err
		}
		s.m.drained.Add(float64(len(chunk)))
	}
	return nil
}
