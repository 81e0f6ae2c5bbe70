#!/usr/bin/env bash
# run.sh BIN: start one chute node on etcd's default client port, show a put
# and a get with etcdctl, then keep the node in the foreground until Ctrl-C.
set -euo pipefail
bin=${1:-bin/chute}
dir=$(mktemp -d)
"$bin" --name dev --listen-client-urls http://127.0.0.1:2379 \
	--metrics-listen 127.0.0.1:9379 >"$dir/chute.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT INT TERM

for _ in $(seq 100); do
	curl -fs http://127.0.0.1:9379/readyz >/dev/null 2>&1 && break
	kill -0 $pid 2>/dev/null || { cat "$dir/chute.log"; exit 1; }
	sleep 0.1
done
curl -fs http://127.0.0.1:9379/readyz >/dev/null || { echo "chute did not become ready"; cat "$dir/chute.log"; exit 1; }

run() { echo "\$ $*"; "$@"; }
export ETCDCTL_API=3
run etcdctl --endpoints 127.0.0.1:2379 put greeting "hello from chute"
run etcdctl --endpoints 127.0.0.1:2379 get greeting -w json
run etcdctl --endpoints 127.0.0.1:2379 endpoint status -w table
echo
echo "chute is serving the etcd API on 127.0.0.1:2379 and metrics on http://127.0.0.1:9379/metrics"
echo "logs: $dir/chute.log; press Ctrl-C to stop"
wait $pid
