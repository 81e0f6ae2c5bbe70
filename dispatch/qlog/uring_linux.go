package qlog

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The parts of Linux's io_uring interface (linux/io_uring.h) the ring
// uses.
const (
	uringOpNop   = 0
	uringOpFsync = 3
	uringOpWrite = 23

	uringFsyncDatasync = 1 << 0 // IORING_FSYNC_DATASYNC

	uringSQELink  = 1 << 2 // IOSQE_IO_LINK: the next entry runs after this one, if it succeeded
	uringSQEAsync = 1 << 4 // IOSQE_ASYNC: run on the ring's workers, never inline in the submit

	// IORING_FEAT_NATIVE_WORKERS (Linux 5.12): the ring's workers are
	// threads of this process, so their CPU is the process's.
	uringFeatNativeWorkers = 1 << 9

	uringRegisterEventfd = 4 // IORING_REGISTER_EVENTFD

	uringOffSQRing = 0          // IORING_OFF_SQ_RING
	uringOffCQRing = 0x8000000  // IORING_OFF_CQ_RING
	uringOffSQEs   = 0x10000000 // IORING_OFF_SQES

	// uringEntries is the ring's size: a commit submits at most two
	// entries and waits for them before the next.
	uringEntries = 4
)

// uringParams is struct io_uring_params.
type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  struct {
		head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
		userAddr                                                        uint64
	}
	cqOff struct {
		head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
		userAddr                                                        uint64
	}
}

// uringSQE is struct io_uring_sqe, 64 bytes.
type uringSQE struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	opFlags     uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFDIn  int32
	addr3       uint64
	pad         uint64
}

// uringCQE is struct io_uring_cqe, 16 bytes.
type uringCQE struct {
	userData uint64
	res      int32
	flags    uint32
}

// ring writes and fsyncs the head's file through an io_uring, so that the
// writer's goroutine waits for the disk parked (on an eventfd, in Go's
// network poller) rather than in a system call. Go's runtime takes the
// processor back from a goroutine in a system call only through its
// monitor thread, which polls every 20 µs while any call lasts longer than
// that: a busy log's writes and fsyncs kept it polling, a tenth of a
// node's CPU on a virtual machine (docs/benchmarks.md). The ring's
// workers, threads of this process the kernel runs, do the writes and
// fsyncs. Only the writer's goroutine uses a ring, one operation at a
// time.
type ring struct {
	fd                   int
	sqMem, cqMem, sqeMem []byte
	sqHead, sqTail       *uint32
	sqMask               uint32
	sqArray              []uint32
	sqes                 []uringSQE
	cqHead, cqTail       *uint32
	cqMask               uint32
	cqes                 []uringCQE
	ev                   *os.File // the eventfd the ring signals each completion on
	evBuf                [8]byte
	broken               bool // a submission failed: the ring is not used again
}

// errNoRing is a kernel without what the ring needs.
var errNoRing = errors.New("qlog: io_uring has no native workers (Linux 5.12)")

// newRing sets up a ring, or returns why it cannot: a kernel before
// 5.12, io_uring disabled (kernel.io_uring_disabled, a seccomp policy).
func newRing() (_ *ring, err error) {
	var p uringParams
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uringEntries, uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("qlog: io_uring_setup: %w", errno)
	}
	r := &ring{fd: int(fd)}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	if p.features&uringFeatNativeWorkers == 0 {
		return nil, errNoRing
	}
	if r.sqMem, err = r.mmap(uringOffSQRing, int(p.sqOff.array+p.sqEntries*4)); err != nil {
		return nil, err
	}
	if r.cqMem, err = r.mmap(uringOffCQRing, int(p.cqOff.cqes+p.cqEntries*uint32(unsafe.Sizeof(uringCQE{})))); err != nil {
		return nil, err
	}
	if r.sqeMem, err = r.mmap(uringOffSQEs, int(p.sqEntries)*int(unsafe.Sizeof(uringSQE{}))); err != nil {
		return nil, err
	}
	r.sqHead = (*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.head]))
	r.sqTail = (*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.tail]))
	r.sqMask = *(*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.ringMask]))
	r.sqArray = unsafe.Slice((*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.array])), p.sqEntries)
	r.sqes = unsafe.Slice((*uringSQE)(unsafe.Pointer(&r.sqeMem[0])), p.sqEntries)
	r.cqHead = (*uint32)(unsafe.Pointer(&r.cqMem[p.cqOff.head]))
	r.cqTail = (*uint32)(unsafe.Pointer(&r.cqMem[p.cqOff.tail]))
	r.cqMask = *(*uint32)(unsafe.Pointer(&r.cqMem[p.cqOff.ringMask]))
	r.cqes = unsafe.Slice((*uringCQE)(unsafe.Pointer(&r.cqMem[p.cqOff.cqes])), p.cqEntries)

	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("qlog: eventfd: %w", err)
	}
	r.ev = os.NewFile(uintptr(efd), "io_uring eventfd") // non-blocking: in the poller
	fd32 := int32(efd)
	if _, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, fd, uringRegisterEventfd, uintptr(unsafe.Pointer(&fd32)), 1, 0, 0); errno != 0 {
		return nil, fmt.Errorf("qlog: io_uring_register eventfd: %w", errno)
	}
	// A no-op through the whole path: submit, completion, eventfd.
	if res, ok := r.run(uringSQE{opcode: uringOpNop}, nil); !ok || res[0] != 0 {
		return nil, errors.New("qlog: io_uring: a no-op did not complete")
	}
	return r, nil
}

func (r *ring) mmap(off int64, size int) ([]byte, error) {
	b, err := unix.Mmap(r.fd, off, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("qlog: mmap io_uring: %w", err)
	}
	return b, nil
}

// close releases the ring; no operation may be in flight.
func (r *ring) close() {
	for _, b := range [][]byte{r.sqeMem, r.cqMem, r.sqMem} {
		if b != nil {
			_ = unix.Munmap(b)
		}
	}
	r.sqeMem, r.cqMem, r.sqMem = nil, nil, nil
	if r.ev != nil {
		_ = r.ev.Close()
	}
	_ = unix.Close(r.fd)
}

// writeSync writes buf at off in f and, with sync, then fdatasyncs f, as
// f.WriteAt and datasync would, and returns their error; done is false
// when the ring could not take the operation or wrote only part of buf (a
// disk filling up; the fsync linked to it was cancelled), and the caller
// does it all itself: writing buf again at off is harmless.
func (r *ring) writeSync(f *os.File, buf []byte, off int64, sync bool) (done bool, err error) {
	if len(buf) == 0 || len(buf) > maxRecordLimit || r.broken { // an entry's length is 32 bits
		return false, nil
	}
	raw, err := f.SyscallConn()
	if err != nil {
		return false, nil
	}
	var res [2]int32
	var ok bool
	cerr := raw.Control(func(fd uintptr) {
		w := uringSQE{opcode: uringOpWrite, flags: uringSQEAsync, fd: int32(fd), off: uint64(off),
			addr: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf)))), len: uint32(len(buf))}
		if !sync {
			res, ok = r.run(w, nil)
			return
		}
		w.flags |= uringSQELink
		res, ok = r.run(w, &uringSQE{opcode: uringOpFsync, fd: int32(fd), opFlags: uringFsyncDatasync})
	})
	runtime.KeepAlive(buf)
	if cerr != nil || !ok {
		return false, nil
	}
	switch n := res[0]; {
	case n < 0:
		return true, &os.PathError{Op: "write", Path: f.Name(), Err: unix.Errno(-n)}
	case int(n) < len(buf):
		return false, nil
	case sync && res[1] < 0:
		return true, syncFailed{&os.PathError{Op: "fdatasync", Path: f.Name(), Err: unix.Errno(-res[1])}}
	}
	return true, nil
}

// run submits a, then b linked after it when not nil, and waits for their
// completions; it returns each one's result. ok is false when nothing
// was submitted; the ring is then broken.
func (r *ring) run(a uringSQE, b *uringSQE) (res [2]int32, ok bool) {
	n := uint32(1)
	if b != nil {
		n = 2
	}
	tail := *r.sqTail // only this goroutine moves the tail
	if tail-atomic.LoadUint32(r.sqHead)+n > uint32(len(r.sqes)) {
		r.broken = true
		return res, false
	}
	a.userData = 0
	r.put(tail, a)
	if b != nil {
		b.userData = 1
		r.put(tail+1, *b)
	}
	atomic.StoreUint32(r.sqTail, tail+n)
	submitted := uint32(0)
	for submitted < n {
		k, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(n-submitted), 0, 0, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			break
		}
		submitted += uint32(k)
	}
	if submitted < n {
		// What was not submitted stays in the queue: the ring is not
		// entered again. What was is waited for.
		r.broken = true
		r.reap(submitted)
		return res, false
	}
	return r.reap(n), true
}

// put writes sqe at the submission queue's slot for position at.
func (r *ring) put(at uint32, sqe uringSQE) {
	i := at & r.sqMask
	r.sqes[i] = sqe
	r.sqArray[i] = i
}

// reap waits for n completions (at most two), parked on the eventfd, and
// returns their results by user data.
func (r *ring) reap(n uint32) (res [2]int32) {
	for got := uint32(0); got < n; {
		head := *r.cqHead // only this goroutine moves the head
		for ; head != atomic.LoadUint32(r.cqTail); head++ {
			c := r.cqes[head&r.cqMask]
			if c.userData < uint64(n) {
				res[c.userData] = c.res
			}
			got++
		}
		atomic.StoreUint32(r.cqHead, head)
		if got >= n {
			break
		}
		if _, err := r.ev.Read(r.evBuf[:]); err != nil {
			// The eventfd cannot fail a read but by being closed, which
			// only close does: wait in the kernel instead.
			_, _, _ = unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 0, 1, 1, 0, 0) // IORING_ENTER_GETEVENTS
		}
	}
	return res
}
