package mvcc

import "iter"

// watcherGroup holds the synced watchers, indexed so that a write looks
// only at those that may want it: a watcher of one key under its key, the
// others (ranges, prefixes, from-key) in a set walked for every write, as
// etcd's watcherGroup keeps single keys in a map. Walking every watcher
// for every write, under the store's lock, made each write cost 5 ms with
// 100,000 watchers of other keys. The store's lock guards it.
type watcherGroup struct {
	keys   map[string]map[*Watcher]struct{}
	ranges map[*Watcher]struct{}
	n      int
}

func newWatcherGroup() watcherGroup {
	return watcherGroup{keys: make(map[string]map[*Watcher]struct{}), ranges: make(map[*Watcher]struct{})}
}

func (g *watcherGroup) add(w *Watcher) {
	if !w.r.Single() {
		if _, ok := g.ranges[w]; !ok {
			g.ranges[w] = struct{}{}
			g.n++
		}
		return
	}
	set := g.keys[string(w.r.Key)]
	if set == nil {
		set = make(map[*Watcher]struct{})
		g.keys[string(w.r.Key)] = set
	}
	if _, ok := set[w]; !ok {
		set[w] = struct{}{}
		g.n++
	}
}

func (g *watcherGroup) remove(w *Watcher) {
	if !w.r.Single() {
		if _, ok := g.ranges[w]; ok {
			delete(g.ranges, w)
			g.n--
		}
		return
	}
	set := g.keys[string(w.r.Key)]
	if _, ok := set[w]; !ok {
		return
	}
	delete(set, w)
	g.n--
	if len(set) == 0 {
		delete(g.keys, string(w.r.Key))
	}
}

func (g *watcherGroup) len() int { return g.n }

// all yields every watcher; the caller may remove the one yielded.
func (g *watcherGroup) all() iter.Seq[*Watcher] {
	return func(yield func(*Watcher) bool) {
		for w := range g.ranges {
			if !yield(w) {
				return
			}
		}
		for _, set := range g.keys {
			for w := range set {
				if !yield(w) {
					return
				}
			}
		}
	}
}

// forChanges yields, once each, the watchers that may want one of
// changes: those of a changed key and every range. pass numbers the
// call, a different number each time. The caller may remove the one
// yielded.
func (g *watcherGroup) forChanges(pass uint64, changes []changeRecord) iter.Seq[*Watcher] {
	return func(yield func(*Watcher) bool) {
		for w := range g.ranges {
			if !yield(w) {
				return
			}
		}
		for i := range changes {
			for w := range g.keys[string(changes[i].kv.Key)] {
				if w.visited == pass {
					continue // a key changed twice in one write
				}
				w.visited = pass
				if !yield(w) {
					return
				}
			}
		}
	}
}
