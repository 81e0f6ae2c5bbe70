// Package tests checks the deployment files whose checks need heavy
// dependencies: the Prometheus rule and PromQL parsers and Helm's
// template engine. It is a module of its own so that none of them enters
// chute's go.mod; make test-deploy runs it.
//
// Without build tags (nothing to install, no process started):
//
//   - deploy/monitoring/chute-rules.yaml loads with Prometheus' rule
//     parser, has the alerts operators rely on, and each expression parses;
//   - every query of deploy/monitoring/chute-dashboard.json parses as
//     PromQL once Grafana's variables are filled in, and its panels fit
//     the grid without overlapping;
//   - the Helm chart deploy/helm/chute renders, with its defaults, the
//     objects of deploy/k8s (same names, ports, arguments, probes,
//     configuration), GOMEMLIMIT at goMemLimitPercent of the memory
//     limit, the ServiceMonitor and the PrometheusRule (the rules file
//     itself) only when enabled, and scales, renames, persists (a claim
//     per pod for --data-dir, or an emptyDir) and bootstraps raft as its
//     values say.
//
// With -tags e2e (a Go toolchain and clickhouse-server installed), the
// tests build chute from the repository root, then:
//
//   - start one node against a private ClickHouse, drive puts that insert,
//     dead-letter and fail, and require every metric name and label the
//     dashboard and the rules use on its /metrics;
//   - run the binary with the chart's rendered arguments, environment and
//     config file: every flag exists and the configuration loads.
package tests
