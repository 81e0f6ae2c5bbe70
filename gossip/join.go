package gossip

import (
	"errors"
	"strings"
	"time"

	"chute/internal/backoff"
)

// joinLoop joins the seeds, round after round with backoff, until one
// answers, Leave, Shutdown or serf stops. It logs every failed round at
// warn (so at most once per backoff step) and the success at info.
func (m *Membership) joinLoop() {
	defer m.wg.Done()
	b := backoff.Backoff{Min: m.joinBackoffMin, Max: m.joinBackoffMax}
	start := time.Now()
	for round := 1; ; round++ {
		seed, err := m.joinRound()
		if err == nil {
			m.markJoined()
			m.log.Info("joined cluster", "seed", seed, "rounds", round,
				"elapsed", time.Since(start).Round(time.Millisecond), "alive", len(m.Alive()))
			return
		}
		if m.stopping() {
			return
		}
		wait := b.Next()
		m.log.Warn("join failed, retrying", "seeds", m.seeds, "round", round,
			"retry_in", wait.Round(time.Millisecond), "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-m.stop:
			t.Stop()
			return
		case <-m.leaving:
			t.Stop()
			return
		case <-m.serf.ShutdownCh():
			t.Stop()
			return
		}
	}
}

// joinRound tries the seeds one by one and returns the first that answered
// and left this node with another alive member. Each try is bounded by
// memberlist's TCPTimeout per address the seed resolves to.
func (m *Membership) joinRound() (string, error) {
	var errs []string
	self := 0 // seeds that resolved to this node alone
	for _, seed := range m.seeds {
		n, err := m.joinSeed(seed)
		if errors.Is(err, ErrShutdown) {
			return "", err
		}
		if n > 0 && m.hasOthersAlive() {
			return seed, nil
		}
		var msg string
		switch {
		case err != nil:
			msg = oneLine(err)
		case n == 0:
			msg = "resolves to no address"
		default:
			msg = "only this node answered" // the seed resolved to us
			self++
		}
		errs = append(errs, seed+": "+msg)
	}
	if self == len(m.seeds) {
		m.seedsSelf.Store(true)
	}
	return "", errors.New(strings.Join(errs, "; "))
}

// joinSeed joins one seed, or returns ErrShutdown once Leave or Shutdown
// was called. It holds joinMu: see Membership.joinMu.
func (m *Membership) joinSeed(seed string) (int, error) {
	m.joinMu.Lock()
	defer m.joinMu.Unlock()
	if m.stopping() {
		return 0, ErrShutdown
	}
	return m.serf.Join([]string{seed}, true)
}

// oneLine flattens memberlist's multierror ("1 error occurred:\n\t* ...")
// to its errors' texts joined by "; ", so a join failure logs on one line.
func oneLine(err error) string {
	var multi interface{ WrappedErrors() []error }
	if !errors.As(err, &multi) {
		return err.Error()
	}
	var parts []string
	for _, e := range multi.WrappedErrors() {
		parts = append(parts, e.Error())
	}
	return strings.Join(parts, "; ")
}

// stopping reports whether Leave or Shutdown has been called.
func (m *Membership) stopping() bool {
	select {
	case <-m.stop:
		return true
	case <-m.leaving:
		return true
	default:
		return false
	}
}

func (m *Membership) hasOthersAlive() bool {
	for _, mb := range m.Alive() {
		if mb.Name != m.name {
			return true
		}
	}
	return false
}
