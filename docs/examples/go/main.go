// Command go is chute's producer example in Go, with etcd's own client
// (go.etcd.io/etcd/client/v3): one put, then a batch of rows in one
// transaction, to the ClickHouse queue ch:events (the table default.events,
// columns id UInt64 and msg String). From the repository root:
//
//	go run ./docs/examples/go -endpoints 127.0.0.1:2379 -rows 100
//
// internal/e2e runs it against a node and counts the rows in ClickHouse.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// event is one row of default.events. chute sends the JSON as it is put:
// its fields are the table's columns.
type event struct {
	ID  uint64 `json:"id"`
	Msg string `json:"msg"`
}

func main() {
	endpoints := flag.String("endpoints", "127.0.0.1:2379", "comma-separated chute nodes (any of them will do)")
	queue := flag.String("queue", "ch:events", "queue: ch:<table> or ch:<db>.<table> for ClickHouse")
	rows := flag.Int("rows", 100, "rows in the batch (at most 128: --max-txn-ops, 128 by default)")
	flag.Parse()

	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(*endpoints, ","),
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// One row: a put to /q/<queue>/p/<key>. The key names the message (it
	// is not a column); the value must be one JSON object.
	first, _ := json.Marshal(event{ID: 1, Msg: "hello from Go"})
	if _, err := cli.Put(ctx, "/q/"+*queue+"/p/1", string(first)); err != nil {
		// InvalidArgument: not a JSON object; "etcdserver: too many
		// requests": the queue is full (back off and retry).
		log.Fatalf("put: %v", err)
	}

	// A batch: a txn whose success branch holds only producer puts is
	// queued all or nothing, in order, and usually lands in one insert.
	ops := make([]clientv3.Op, 0, *rows)
	for i := range *rows {
		id := uint64(i + 2)
		v, _ := json.Marshal(event{ID: id, Msg: "batched"})
		ops = append(ops, clientv3.OpPut(fmt.Sprintf("/q/%s/p/%d", *queue, id), string(v)))
	}
	if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		log.Fatalf("txn: %v", err)
	}
	fmt.Printf("queued %d rows on %s\n", *rows+1, *queue)
}
