// Package deploy holds no Go code: it is the home of chute's deployment
// files, and its tests keep them true.
//
//	docker/     Dockerfile (multi-stage, static binary, distroless, non-root) and its .dockerignore
//	compose/    three nodes, ClickHouse, Jaeger and Prometheus for one machine
//	k8s/        StatefulSet, headless and client Services, ConfigMap, Secret, PodDisruptionBudget
//	systemd/    chute.service, its environment file and an example config with every key
//	clickhouse/ the private ClickHouse of make run, make bench and the tests
//	dev/        the scripts of make run and make bench
//	monitoring/ a Grafana dashboard and Prometheus alert rules
//	helm/chute/ the Helm chart: deploy/k8s's objects, ServiceMonitor and PrometheusRule optional
//	tests/      a Go module of its own: the checks that need Prometheus'
//	            parsers or Helm (make test-deploy; see its doc.go)
//
// The tests (go test -tags e2e ./deploy; they run the binary, so they are
// process-level tests of the e2e tag) build the binary once and check, without a
// container engine or a cluster:
//
//   - every file parses (YAML, multi-document; the unit; the Dockerfile);
//   - every --flag in a command line (Dockerfile CMD, compose command,
//     StatefulSet args, ExecStart) is one of chute --help (not an etcd
//     flag it ignores or refuses), every CHUTE_*
//     variable names one, every OTEL_* variable is one chute reads;
//   - each deployment's command line, environment and config file load:
//     the binary, given them plus one invalid flag, reports that flag and
//     nothing else; given them with every address moved to free loopback
//     ports, no seeds and --bootstrap-expect 1, it serves /readyz, keeps
//     its raft log in --data-dir and exits 0 on SIGTERM;
//   - every deployment names an absolute data dir, on storage that
//     outlives the process: a volumeClaimTemplate mounted writable (k8s),
//     a named volume per node (compose), a VOLUME the image's user owns
//     that is also its WORKDIR (Dockerfile), the unit's StateDirectory
//     (systemd); the nodes a deployment starts together bootstrap
//     together (bootstrap_expect is the compose nodes, the replicas);
//   - nothing is written into the repository: every node runs with a
//     temporary data dir and working directory, and TestMain fails the
//     run when a <name>.chute directory appears in deploy/ or the root;
//   - the structure the issue asks for: a StatefulSet whose serviceName is
//     a headless Service, probes on /healthz and /readyz at the metrics
//     port, a preStop hook within the grace period, a PodDisruptionBudget
//     selecting the pods, the ClickHouse URL from a Secret, the node name
//     from the pod name, advertised addresses from the pod IP and --join
//     through the headless Service, so that 3 or 5 replicas need the same
//     files; compose nodes that join each other, a table created at start
//     and Prometheus scraping each node;
//   - TLS: compose/gen-certs.sh (run with openssl, which the tests need)
//     writes certificates that openssl verifies, and again changes
//     nothing; the compose nodes and the StatefulSet serve the etcd API
//     and the peer link over https:// with client certificates required,
//     from the generated files and the Secret chute-tls (mounted whole,
//     read-only); a node started from them serves a client holding a
//     certificate of the CA and refuses one without;
//   - the docs (README.md, docs/, deploy/README.md): every flag, metric,
//     key form, setting, endpoint and /status field is documented, every
//     flag a chute command line in them uses exists, and every relative
//     link resolves.
//
// internal/e2e/docs_test.go runs the docs' etcdctl blocks against a node.
package deploy
