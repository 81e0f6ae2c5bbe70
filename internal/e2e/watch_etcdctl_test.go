//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// Every watch here but TestEtcdctl_watch_live starts at an explicit
// revision, so its output does not depend on when the server registered it.
// Simple output is three lines per event (type, key, value), five with a
// previous key-value; -w json is one line per response.

func TestEtcdctl_watch_prefix(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("w/a", "0", "x", "0") // revisions 2, 3: before the watch
		simple := s.start("watch", "--prefix", "w/", "--rev", "4")
		js := s.startSynced(1, "watch", "--prefix", "w/", "--rev", "2", "-w", "json")
		s.putAll("w/a", "1", "x/ignored", "2", "w/b", "2", "w/a", "3", "w", "4")
		s.ctl("del", "w/a")
		s.ctl("del", "w/nothing")
		s.ctl("del", "--prefix", "w/")
		s.ctl("put", "w/c", "5")
		s.endWatch(simple, 6*3)
		s.endWatch(js, 1+6)
	})
}

func TestEtcdctl_watch_key(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		w := s.start("watch", "k", "--rev", "2")
		future := s.start("watch", "k", "--rev", "6") // a revision still to come
		s.putAll("k", "1", "k2", "1", "kk", "1", "k", "2")
		s.ctl("del", "k")
		s.ctl("put", "k", "3")
		s.endWatch(w, 4*3)
		s.endWatch(future, 2*3)
	})
}

func TestEtcdctl_watch_range(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.ctl("put", "b", "0")
		w := s.startSynced(1, "watch", "b", "d", "--rev", "2", "-w", "json")
		s.putAll("a", "1", "b", "2", "c", "3", "d", "4", "bz", "5", "cc", "6")
		s.ctl("del", "a", "z")
		s.endWatch(w, 1+4+1) // 4 puts in range, then one response of 4 deletes
	})
}

func TestEtcdctl_watch_revReplaysHistory(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("h/a", "1", "h/b", "1", "h/a", "2", "other", "1")
		s.ctl("del", "h/b")
		s.ctl("put", "h/a", "3") // revision 7
		one := s.start("watch", "h/a", "--rev", "2")
		s.endWatch(one, 3*3)
		from4 := s.start("watch", "--prefix", "h/", "--rev", "4", "-w", "json")
		s.endWatch(from4, 1) // history is sent in one response
		from1 := s.start("watch", "--prefix", "", "--rev", "1", "-w", "json")
		s.endWatch(from1, 1)

		// A watch that replayed history goes on with live events.
		live := s.start("watch", "--prefix", "h/", "--rev", "6")
		if !live.waitLines(2 * 3) {
			s.note("the replay of revisions 6 and 7 did not arrive")
		}
		s.ctl("put", "h/c", "4")
		s.ctl("del", "--prefix", "h/")
		s.endWatch(live, 5*3)
	})
}

func TestEtcdctl_watch_prevKV(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("p/a", "1", "p/b", "1")
		simple := s.start("watch", "--prefix", "p/", "--prev-kv", "--rev", "2")
		js := s.startSynced(1, "watch", "--prefix", "p/", "--prev-kv", "--rev", "3", "-w", "json")
		s.putAll("p/a", "2", "p/c", "1")
		s.ctl("del", "p/b")
		s.ctl("del", "--prefix", "p/")
		// Events: put a, put b (history: no previous), put a (prev), put c,
		// delete b (prev), delete a, delete c (prev).
		s.endWatch(simple, 3+3+5+3+5+5+5)
		s.endWatch(js, 1+4)
	})
}

func TestEtcdctl_watch_deleteEvents(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("d/1", "a", "d/2", "b", "d/3", "c", "e", "x")
		js := s.startSynced(1, "watch", "--prefix", "d/", "--rev", "4", "-w", "json")
		simple := s.start("watch", "--prefix", "d/", "--rev", "6")
		s.ctl("del", "d/2")
		s.ctl("del", "d/2")           // nothing deleted: no revision, no event
		s.ctl("del", "--prefix", "d") // d/1 and d/3 in one revision
		s.ctl("put", "d/2", "again")
		s.endWatch(js, 1+3)
		s.endWatch(simple, 4*3)
	})
}

// TestEtcdctl_watch_live watches with no --rev, as etcdctl users mostly do.
// It puts live/sync until the watch shows it, so the watch is registered,
// then compares the events after that.
func TestEtcdctl_watch_live(t *testing.T) {
	t.Parallel()
	const syncEvent = "PUT\nlive/sync\nx\n"
	pr := startPair(t)
	var wantOut, gotOut string
	pr.run(t, func(s *session) {
		w := s.start("watch", "--prefix", "live/")
		ready := false
		for range 50 {
			if _, err := runEtcdctl(s.etcdctl, s.p.ClientAddr, "", "put", "live/sync", "x"); err != nil {
				s.fail("%v", err)
				break
			}
			if w.waitForWithin(200*time.Millisecond, func(out string) bool { return strings.Contains(out, syncEvent) }) {
				ready = true
				break
			}
		}
		if !ready {
			s.note("the watch never showed live/sync")
		}
		s.ctl("put", "live/a", "1")
		s.ctl("put", "other", "1")
		s.ctl("put", "--prev-kv", "live/a", "2")
		s.ctl("del", "live/a")
		afterSync := func(out string) string {
			return out[strings.LastIndex(out, syncEvent)+len(syncEvent):]
		}
		w.waitFor(func(out string) bool { return strings.Count(afterSync(out), "\n") >= 3*3 })
		w.cancel()
		<-w.done
		out := afterSync(w.output())
		if s.p.Kind == "etcd" {
			wantOut = out
		} else {
			gotOut = out
		}
	})
	requireSameTranscript(t, wantOut, gotOut)
}

func TestEtcdctl_watch_compactedRevision(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("c", "1", "c", "2", "c", "3", "c", "4") // revisions 2-5
		s.ctl("compaction", "4")
		s.endExited(s.start("watch", "c", "--rev", "2"))
		s.endExited(s.start("watch", "c", "--rev", "3", "-w", "json"))
		// The compacted revision itself can still be watched.
		ok := s.start("watch", "c", "--rev", "4")
		s.endWatch(ok, 2*3)
	})
}
