#!/usr/bin/env python3
"""chute producer example in Python, with the etcd3 client.

Puts one row, then a batch of rows in one transaction, to the ClickHouse
queue ch:events (the table default.events, columns id UInt64 and msg String):

    pip install etcd3        # or: apt-get install python3-etcd3
    python3 producer.py --endpoint 127.0.0.1:2379 --rows 100

etcd3 0.12 was generated with an old protobuf: with protobuf 4 or later,
set PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python (Debian's package needs
nothing).
"""
import argparse
import json

import etcd3
import grpc


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--endpoint", default="127.0.0.1:2379", help="one chute node, host:port")
    p.add_argument("--queue", default="ch:events", help="ch:<table> or ch:<db>.<table>")
    p.add_argument("--rows", type=int, default=100, help="rows in the batch (at most 128: --max-txn-ops)")
    args = p.parse_args()

    host, port = args.endpoint.rsplit(":", 1)
    client = etcd3.client(host=host, port=int(port))

    # One row: a put to /q/<queue>/p/<key>; the value is one JSON object.
    # etcd3 passes the server's errors on as grpc.RpcError: e.code() is
    # INVALID_ARGUMENT for a value that is not one JSON object, and
    # RESOURCE_EXHAUSTED ("etcdserver: too many requests") while the queue
    # is full: back off and put again.
    try:
        client.put("/q/%s/p/1" % args.queue, json.dumps({"id": 1, "msg": "hello from Python"}))
    except grpc.RpcError as e:
        raise SystemExit("put: %s: %s" % (e.code().name, e.details()))

    # A batch: a transaction of producer puts only, queued all or nothing.
    ops = [
        client.transactions.put("/q/%s/p/%d" % (args.queue, i), json.dumps({"id": i, "msg": "batched"}))
        for i in range(2, args.rows + 2)
    ]
    try:
        ok, _ = client.transaction(compare=[], success=ops, failure=[])
    except grpc.RpcError as e:
        raise SystemExit("txn: %s: %s" % (e.code().name, e.details()))
    if not ok:
        raise SystemExit("transaction failed")
    print("queued %d rows on %s" % (args.rows + 1, args.queue))


if __name__ == "__main__":
    main()
