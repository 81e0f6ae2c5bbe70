package qlog

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	bolt "go.etcd.io/bbolt"

	"chute/internal/testutil"
)

// benchAppenders is how many goroutines append at once, per CPU.
const benchAppenders = 32

// BenchmarkAppend appends 200-byte records from many goroutines, fsync
// on: one op is one Append. release also releases each record once
// appended, as a queue that keeps up does. batch appends 128 records a
// call from 2 goroutines a CPU, as a node taking txns of 128 puts does:
// about 512 records a commit, past preallocMaxCommit.
func BenchmarkAppend(b *testing.B) {
	for _, bc := range []struct {
		name            string
		noSync, release bool
		prealloc        int64
		batch           int
	}{
		{"fsync", false, false, 0, 1},
		{"fsync_noprealloc", false, false, -1, 1},
		{"fsync_release", false, true, 0, 1},
		{"nosync", true, false, 0, 1},
		{"fsync_batch", false, false, 0, 128},
		{"fsync_batch_noprealloc", false, false, -1, 128},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Dir = b.TempDir()
			cfg.NoSync = bc.noSync
			if bc.prealloc != 0 {
				cfg.PreallocBytes = bc.prealloc
			}
			l, err := Open(cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			recs := make([][]byte, bc.batch)
			for i := range recs {
				recs[i] = make([]byte, 200)
			}
			appenders := benchAppenders
			if bc.batch > 1 {
				appenders = 2
			}
			b.SetParallelism(appenders)
			written := diskWrites()
			cpu, cpuOK := testutil.ProcessCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					seq, err := l.Append(context.Background(), recs...)
					if err != nil {
						b.Error(err)
						return
					}
					if bc.release {
						_ = l.Release(seq)
					}
				}
			})
			b.StopTimer()
			s := l.Stats()
			secs := b.Elapsed().Seconds()
			b.ReportMetric(float64(s.Appended)/secs, "records/s")
			b.ReportMetric(float64(s.Fsyncs)/secs, "fsyncs/s")
			b.ReportMetric(s.RecordsPerFsync(), "records/fsync")
			reportDiskWrites(b, written, int64(s.Appended))
			reportCPU(b, cpu, cpuOK, int64(s.Appended))
		})
	}
}

// reportCPU reports the CPU time this process used since before, a
// testutil.ProcessCPU, per record.
func reportCPU(b *testing.B, before int64, ok bool, records int64) {
	if after, _ := testutil.ProcessCPU(); ok && records > 0 {
		b.ReportMetric(float64(after-before)/1e3/float64(records), "cpu-µs/record")
	}
}

// BenchmarkBolt does what BenchmarkAppend does with bbolt, whose Batch
// groups concurrent writes into one transaction (two fsyncs: pages, then
// meta page). release deletes each record in a later batch. A batch
// commits once it holds as many writes as there are appenders (or after
// bbolt's 10ms), so it waits for nobody who is not coming; defaults
// keeps bbolt's batch of 1000, as a server that cannot know how many
// writers come would.
func BenchmarkBolt(b *testing.B) {
	for _, bc := range []struct {
		name              string
		release, defaults bool
	}{
		{"batch", false, false},
		{"batch_release", true, false},
		{"batch_defaults", false, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			db, err := bolt.Open(filepath.Join(b.TempDir(), "q.db"), 0o600, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			if !bc.defaults {
				db.MaxBatchSize = benchAppenders * runtime.GOMAXPROCS(0)
			}
			bucket := []byte("q")
			if err := db.Update(func(tx *bolt.Tx) error {
				_, err := tx.CreateBucket(bucket)
				return err
			}); err != nil {
				b.Fatal(err)
			}
			var (
				mu      sync.Mutex
				lastTx  *bolt.Tx
				commits atomic.Int64
				records atomic.Int64
			)
			count := func(tx *bolt.Tx) {
				mu.Lock()
				if tx != lastTx {
					lastTx = tx
					commits.Add(1)
				}
				mu.Unlock()
			}
			rec := make([]byte, 200)
			b.SetParallelism(benchAppenders)
			written := diskWrites()
			cpu, cpuOK := testutil.ProcessCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var key [8]byte
				for pb.Next() {
					if err := db.Batch(func(tx *bolt.Tx) error {
						count(tx)
						bk := tx.Bucket(bucket)
						seq, err := bk.NextSequence()
						if err != nil {
							return err
						}
						binary.BigEndian.PutUint64(key[:], seq)
						return bk.Put(key[:], rec)
					}); err != nil {
						b.Error(err)
						return
					}
					records.Add(1)
					if bc.release {
						if err := db.Batch(func(tx *bolt.Tx) error {
							count(tx)
							return tx.Bucket(bucket).Delete(key[:])
						}); err != nil {
							b.Error(err)
							return
						}
					}
				}
			})
			b.StopTimer()
			secs := b.Elapsed().Seconds()
			b.ReportMetric(float64(records.Load())/secs, "records/s")
			b.ReportMetric(float64(commits.Load())/secs, "commits/s")
			b.ReportMetric(float64(records.Load())/float64(commits.Load()), "records/commit")
			reportDiskWrites(b, written, records.Load())
			reportCPU(b, cpu, cpuOK, records.Load())
		})
	}
}

// diskWrites returns the bytes this process has had written to storage
// (write_bytes of /proc/self/io), -1 where that is not known. The kernel
// counts them as pages are dirtied, a whole folio at a time: overwriting
// zeros written ahead (Config.PreallocBytes) on this machine's ext4
// reads about 23 KB a 200-byte record, while /proc/diskstats shows about
// as many bytes reaching the disk as without the zeros.
func diskWrites() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// reportDiskWrites reports the bytes written to storage per record since
// diskWrites returned before.
func reportDiskWrites(b *testing.B, before, records int64) {
	if after := diskWrites(); before >= 0 && after >= 0 && records > 0 {
		b.ReportMetric(float64(after-before)/float64(records), "disk-B/record")
	}
}
