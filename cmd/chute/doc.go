// Command chute runs one node of a chute cluster: equal Go nodes that find
// each other by gossip and speak the etcd v3 gRPC API, with queues whose
// ch: or clickhouse: names the cluster drains into ClickHouse.
//
//	chute [flags]          run a node until SIGTERM or SIGINT, then shut down in order
//	chute status [flags]   print the whole cluster's members and queues, asked of one node's /status/cluster (--endpoints host:port of --metrics-listen)
//	chute --version        print the version
//	chute --help           list every flag and its default
//
// Every setting is a flag (--listen-client-urls), a key of the YAML file
// named by --config or CHUTE_CONFIG (listen_client_urls), and an environment
// variable (CHUTE_LISTEN_CLIENT_URLS). Precedence: flags > environment >
// file > defaults. Every source goes through the flag's Set, so a value
// means the same wherever it is written; lists are comma separated, or YAML
// lists in the file; an empty environment variable counts as unset; a YAML
// null counts as absent; an unknown file key is an error. The advertise
// settings default to their listen values when no source gives them.
//
// etcd 3.5's server flags that mean nothing here (--wal-dir,
// --initial-cluster, --experimental-*, ...) are accepted and each logs one
// warning, so existing etcd command lines start; they are not read from the
// file or the environment. Any other unknown flag is a usage error.
//
// Exit codes: 0 after a clean shutdown, --help or --version; 1 when the
// node stops on an error; 2 for a usage or configuration error.
package main
