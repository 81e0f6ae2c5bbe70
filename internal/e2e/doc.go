// Package e2e runs the chute binary and real etcd tools against it.
//
// Everything here is test code, in _test.go files:
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
//
// E2E_TRANSCRIPTS=1 logs etcd's transcript of every differential test.
//
// A missing etcd or etcdctl fails the tests; it never skips them: install
// them with make deps (apt-get install etcd-client etcd-server).
package e2e
