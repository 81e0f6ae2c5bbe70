# clickhouse.sh: sourced by run.sh and bench.sh. ch_start DIR HTTP TCP starts
# a private ClickHouse (Debian's clickhouse-server) with deploy/clickhouse's
# config under DIR on loopback and waits for it; its pid is in $ch_pid. ch
# SQL runs a statement over HTTP.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

wait_http() { # url what logfile
	for _ in $(seq 300); do
		curl -fs "$1" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "$2 did not start; its log:"; tail -20 "$3"; exit 1
}

ch_start() { # dir http tcp
	ch_http=$2
	mkdir -p "$1"
	sed -e "s|@DIR@|$1|g" -e "s|@HTTP@|$2|g" -e "s|@TCP@|$3|g" \
		"$here/clickhouse/config.xml" >"$1/config.xml"
	cp "$here/clickhouse/users.xml" "$1/users.xml"
	PATH=$PATH:/usr/sbin clickhouse-server --config-file="$1/config.xml" >"$1/stdout.log" 2>&1 &
	ch_pid=$!
	wait_http "http://127.0.0.1:$2/ping" ClickHouse "$1/stdout.log"
}

ch() { curl -fsS "http://127.0.0.1:$ch_http/" --data-binary "$1"; }
