package bench

import (
	"context"
	"log/slog"
	"os"
)

// runKVGroup is the KV group of the ClickHouse plan: unary puts of
// distinct plain keys, mc.base.Clients putters over mc.base.Conns
// connections whose endpoint lists hold all three members, first against
// three chute nodes (a fresh raft cluster), then against three etcd
// members (mc.etcd) started by the bench; each group's children are
// stopped and their data removed before the next starts. measure runs a
// cell n times and keeps the median.
func runKVGroup(ctx context.Context, mc matrixConfig, dir string, measure func(n int, mk func() cell, check func(cell) error) (Result, error), logger *slog.Logger) error {
	rep := max(mc.repeat, 1)
	err := func() error {
		nodes, stop, err := startCluster(ctx, mc, dir, "kv-chute", logger)
		defer stop()
		if err != nil {
			return err
		}
		_, err = measure(rep, func() cell { return kvCell(mc.base, ServerChuteKV3, 3, nodes) }, nil)
		return err
	}()
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
	_, err = measure(rep, func() cell { return kvCell(mc.base, ServerEtcd3, 0, members) }, nil)
	return err
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
	return cell{server: server, nodes: nodes, cfg: cfg, procs: members}
}
