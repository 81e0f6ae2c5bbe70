package mvcc

// revision identifies one change in the store. main is the store revision of
// the write that made it (all changes of one txn share it); sub orders the
// changes inside that write, from 0. Revisions are ordered by main, then sub.
type revision struct {
	main int64
	sub  int64
}
