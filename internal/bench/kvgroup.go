package bench

import (
	"context"
	"log/slog"
	"os"
)

// runKVGroup is the KV group of the ClickHouse plan: unary puts of
// distinct plain keys, mc.base.Clients putters over mc.base.Conns
// connections spread over the three members (Config.Endpoints), against three
// chute nodes (a fresh raft cluster) and three etcd members (mc.etcd)
// started by the bench, both up for the whole group. The runs alternate,
// chute then etcd, in mc.repeat rounds (runRounds), so that what drifts
// on the machine meanwhile (ClickHouse merging the matrix's rows, a
// neighbour) weighs on both sides alike, while each side's data still
// grows from run to run; each side is reported (add) as the median of
// its runs. Every child is
// stopped and its data removed at the end.
func runKVGroup(ctx context.Context, mc matrixConfig, dir string, run func(cell) (Result, error), add func(Result), logger *slog.Logger) error {
	rep := max(mc.repeat, 1)
	nodes, stop, err := startCluster(ctx, mc, dir, "kv-chute", logger)
	defer stop()
	if err != nil {
		return err
	}
	ports, err := freePorts(6)
	if err != nil {
		return err
	}
	data, err := groupDir(dir, "kv-etcd", logger)
	if err != nil {
		return err
	}
	defer data.remove()
	members := etcdTargets(mc.etcd, ports, data.path, os.Environ())
	started, err := startTargets(ctx, mc, dir, members, logger)
	defer stopTargets(started, logger)
	if err != nil {
		return err
	}
	rs, err := runRounds(rep, []roundCell{
		{mk: func() cell { return kvCell(mc.base, ServerChuteKV3, 3, nodes) }},
		{mk: func() cell { return kvCell(mc.base, ServerEtcd3, 0, members) }},
	}, run)
	if err != nil {
		return err
	}
	add(rs[0])
	add(rs[1])
	return nil
}

// kvCell is a run of base's putters making unary puts of plain keys
// under /bench/kv/<run>/ to every one of members, labelled server.
func kvCell(base Config, server string, nodes int, members []*target) cell {
	cfg := base
	cfg.Endpoints = make([]string, len(members))
	for i, m := range members {
		cfg.Endpoints[i] = m.endpoint
	}
	cfg.Tables, cfg.ClickHouseURL, cfg.Claim = nil, "", ""
	cfg.Txn, cfg.Rate = 0, 0
	cfg.KeyPrefix = "/bench/kv/" + newRunID() + "/"
	cfg.Label = server
	return cell{server: server, nodes: nodes, cfg: cfg, procs: members, side: sideProcs(0)}
}
