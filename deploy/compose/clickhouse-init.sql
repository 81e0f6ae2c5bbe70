-- Run by the ClickHouse image at its first start (empty data directory).
-- The table the queue ch:events drains into: a put to /q/ch:events/p/<key>
-- whose value is {"id":1,"msg":"..."} becomes one row.
CREATE TABLE IF NOT EXISTS default.events
(
    id UInt64,
    msg String,
    at DateTime DEFAULT now()
)
ENGINE = MergeTree
ORDER BY id;
