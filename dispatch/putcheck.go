package dispatch

import (
	"fmt"
	"sync"
	"unicode/utf8"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/sink"
)

// errEmptyQueueName refuses a put to /q//p/{key}.
var errEmptyQueueName = status.Error(codes.InvalidArgument, "etcdserver: the queue name is empty: a producer key is /q/{name}/p/{key}")

// checkProduce refuses a put that is not to a producer key, whose queue
// name or key is not UTF-8 (on every member alike: the dispatcher's own
// could keep such a message, but never hand it over, back it up or
// forward it, and it stopped its queue's handover for good), to a queue
// whose name is empty or, for a ClickHouse queue, names no table a put
// may reach (checkQueueName), or whose value is not a row of its
// ClickHouse queue (sink.ValidateRow). Every error is InvalidArgument.
func (m *Manager) checkProduce(p *pb.PutRequest, k Key) error {
	ch, err := m.checkProducer(p, k)
	if err == nil && ch {
		err = checkRow(p)
	}
	return err
}

// checkProducer is checkProduce without the value: it refuses a put that
// is not to a producer key or to a queue checkQueueName refuses, and
// reports whether the queue is a ClickHouse queue, whose values
// checkRow checks.
func (m *Manager) checkProducer(p *pb.PutRequest, k Key) (bool, error) {
	if k.Kind != KindProduce {
		return false, status.Error(codes.InvalidArgument, "etcdserver: not a producer key: "+string(p.Key))
	}
	if !utf8.ValidString(k.Tail) {
		return false, errKeyNotUTF8(k.Queue, k.Tail)
	}
	return m.checkQueueName(k.Queue)
}

// checkRow refuses a put to a ClickHouse queue whose value is not a row
// (sink.ValidateRow).
func checkRow(p *pb.PutRequest) error {
	if err := sink.ValidateRow(p.Value); err != nil {
		return status.Error(codes.InvalidArgument, "etcdserver: "+string(p.Key)+": "+err.Error())
	}
	return nil
}

// checkQueueName reports whether name is a ClickHouse queue, and refuses
// an empty name, a ClickHouse queue's name that is not table or db.table
// (sink.CheckQueue) and a table outside Config.ClickHouseTables' list.
// An ordinary queue's name costs a prefix test; a ClickHouse queue's is
// judged once per name while the list and the database stay the same
// (tableGate), as every put asks.
func (m *Manager) checkQueueName(name string) (bool, error) {
	if name == "" {
		return false, errEmptyQueueName
	}
	if !utf8.ValidString(name) {
		return false, errQueueNotUTF8(name)
	}
	table, ch := sink.TableOf(name)
	if !ch {
		return false, nil
	}
	allow, db := m.clickHouseTables()
	return true, m.tables.check(name, table, allow, db)
}

// clickHouseTables returns the list of tables puts may reach and the
// database of names without one, from Config.ClickHouseTables, else
// the default list and Config.ClickHouse's database.
func (m *Manager) clickHouseTables() (*sink.AllowList, string) {
	if m.cfg.ClickHouseTables != nil {
		return m.cfg.ClickHouseTables()
	}
	if m.cfg.ClickHouse != nil {
		_, db := m.cfg.ClickHouse()
		return nil, db
	}
	return nil, ""
}

// gateNames bounds the queue names a tableGate remembers; past it, it
// forgets them all and starts again, so that puts to many names cost a
// check each, never memory.
const gateNames = 4096

// tableGate remembers, per ClickHouse queue name, whether puts may use
// it, for one list of allowed tables and one database: a reload that
// changes either (a new *sink.AllowList, another database) forgets
// everything.
type tableGate struct {
	mu    sync.RWMutex // guards allow, db and known
	allow *sink.AllowList
	db    string
	known map[string]error // queue name -> nil (may put) or the refusal
}

// check returns nil when puts may use the ClickHouse queue name, whose
// table (from sink.TableOf) is table, under allow and db, and the
// InvalidArgument error that says why not otherwise.
func (g *tableGate) check(name, table string, allow *sink.AllowList, db string) error {
	g.mu.RLock()
	if g.allow == allow && g.db == db {
		if err, ok := g.known[name]; ok {
			g.mu.RUnlock()
			return err
		}
	}
	g.mu.RUnlock()
	err := judgeTable(name, table, allow, db)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.known == nil || g.allow != allow || g.db != db || len(g.known) >= gateNames {
		g.allow, g.db, g.known = allow, db, make(map[string]error)
	}
	g.known[name] = err
	return err
}

// judgeTable is check without the memory.
func judgeTable(name, table string, allow *sink.AllowList, db string) error {
	if err := sink.CheckQueue(name); err != nil {
		return status.Error(codes.InvalidArgument, "etcdserver: "+name+": "+err.Error())
	}
	d, t := sink.SplitTable(db, table)
	if !allow.Allows(d, t) {
		return status.Error(codes.InvalidArgument, fmt.Sprintf("etcdserver: %s: table %s.%s is not in --clickhouse-allow-tables (%s)", name, d, t, allow))
	}
	return nil
}
