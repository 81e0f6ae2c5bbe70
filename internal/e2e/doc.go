// Package e2e runs the chute binary and real etcd tools against it.
//
// Everything here is test code, in _test.go files built with the e2e tag
// (go test -tags e2e; make test passes it), so go test ./... without the
// tag needs neither etcd nor ClickHouse installed:
//
//   - harness_test.go: TestMain builds chute once per test binary (or takes
//     the binary named by E2E_CHUTE_BIN). StartChute and StartEtcd start a
//     process on free loopback ports and return a *Proc once it serves;
//     Proc.Stop (SIGTERM, bounded wait, SIGKILL), Kill, Signal and Restart
//     control it, and the test's cleanup stops it and logs its output when
//     the test failed.
//   - etcdctl_test.go: runs etcdctl and keeps a transcript of a session
//     (commands, stdin, stdout, stderr, exit codes). compareWithEtcd runs
//     one scripted session against a real etcd and against chute, replaces
//     what legitimately differs (member, cluster and lease ids, ports,
//     timings, db sizes, versions, raft terms and indexes, hashes, table
//     padding) and requires the rest to be identical.
//   - *_etcdctl_test.go: the differential tests, by concern; kv_clientv3_test.go
//     compares what etcdctl 3.4 cannot ask (count_only, revision filters,
//     watch filters, progress) with the Go client.
//   - harness_cluster_test.go, cluster_*_test.go: clusters of processes on
//     127.0.N.x with --gossip-profile fast: joining in any order, replication
//     delay, concurrent writes, kill -9 and rejoin, a 30 s SIGSTOP, wrong key
//     or cluster, leases of a killed owner, multi-endpoint clients, member
//     remove, a second node under a running node's name exiting 1.
//   - harness_queue_test.go, queue_*_test.go: queues through the binary:
//     watch/put/delete, exactly once across three nodes, shared consumers,
//     dispatcher killed, concurrent first puts, byte cap, batch produce,
//     order across a dispatcher move, full queues moving between nodes.
//   - clickhouse_*_test.go, reload_test.go: ClickHouse queues against a
//     private ClickHouse (internal/chtest): etcdctl puts to rows, 30,000 rows
//     over three nodes, dead letters, a 20 s outage, other databases and
//     quoted names, passwords never leaking, unknown tables, refused values,
//     no URL, SIGHUP reloading the URL, https with a CA file (a wrong CA
//     is a config error in /status until SIGHUP re-reads the right one);
//     with an OTLP receiver, no password in any exported span either.
//   - tracing_test.go, metrics_test.go, status_cluster_test.go: the
//     OpenTelemetry issue: one trace from an otelgrpc producer through the
//     forward to the INSERT span (internal/otlptest receives over OTLP gRPC
//     and HTTP), retries as span events, /metrics equal to a scripted
//     workload, chute status of a 3-node cluster.
//   - handoff_test.go: SIGTERM of a dispatcher hands its queues over.
//   - disk_test.go: queues on disk: a lone node's SIGTERM inserts what
//     ClickHouse takes and keeps the rest for its next start, a damaged
//     queue log segment costs only the damaged record, --unsafe-no-fsync
//     and --quota-backend-bytes.
//   - faults_*_test.go: the fault scenarios (docs/reliability.md) on top of
//     internal/faults (producers recording outcomes, consumers recording
//     deliveries, the oracle): kill -9 of the dispatcher under each ack
//     mode, kill -9 of every node at once on the same data dirs (and with
//     one deleted), SIGSTOP, ClickHouse down, graceful restarts;
//     short here, full with CHUTE_FAULTS=full (make test-faults), which
//     writes docs/reliability.md.
//   - auth_*_test.go: etcd auth: an etcdctl session of users, roles and
//     denials compared with etcd, a producer whose denied calls reach
//     neither ClickHouse nor the key space, a consumer limited to its own
//     keys, tokens valid on every node of a cluster, JWT tokens from key
//     files, certificate CNs as users, and no password or token in logs,
//     /status, /metrics or spans.
//   - docs_test.go: the etcdctl and SQL blocks of the README and docs run
//     against a node and a ClickHouse; every exported metric is documented.
//
// E2E_TRANSCRIPTS=1 logs etcd's transcript of every differential test.
// E2E_ETCDCTL_AUTH=1 runs every differential test with auth enabled on
// both servers and etcdctl logged in as root.
//
// A missing etcd, etcdctl or clickhouse-server fails the tests; it never
// skips them: install them with make deps (apt-get install etcd-client
// etcd-server clickhouse-server).
package e2e
