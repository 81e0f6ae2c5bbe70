// chute producer example in Node.js, with the etcd3 client
// (https://www.npmjs.com/package/etcd3). Puts one row, then a batch of rows
// in one transaction, to the ClickHouse queue ch:events (the table
// default.events, columns id UInt64 and msg String):
//
//   npm install etcd3
//   node producer.js 127.0.0.1:2379 100
'use strict';
const { Etcd3 } = require('etcd3');

async function main() {
  const endpoint = process.argv[2] || '127.0.0.1:2379'; // one chute node or several, comma-separated
  const rows = Number(process.argv[3] || 100); // at most 128 puts in one transaction (--max-txn-ops)
  const queue = 'ch:events';
  const client = new Etcd3({ hosts: endpoint.split(',') });
  try {
    // One row: a put to /q/<queue>/p/<key>; the value is one JSON object.
    // A value that is not is rejected (InvalidArgument); a full queue
    // answers "etcdserver: too many requests": retry later.
    await client.put(`/q/${queue}/p/1`).value(JSON.stringify({ id: 1, msg: 'hello from Node' }));

    // A batch: a transaction of producer puts only, queued all or nothing.
    // etcd3 builds transactions from a comparison: compare a plain key
    // (never a queue key) with one that always holds.
    const ops = [];
    for (let id = 2; id < rows + 2; id++) {
      ops.push(client.put(`/q/${queue}/p/${id}`).value(JSON.stringify({ id, msg: 'batched' })));
    }
    const res = await client.if('/chute/producer', 'Version', '>', -1).then(...ops).commit();
    if (!res.succeeded) throw new Error('transaction failed');
    console.log(`queued ${rows + 1} rows on ${queue}`);
  } finally {
    client.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
