package faults

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// inNamespace runs f on a thread that has joined the network namespace
// called name, then brings the thread back to the namespace it came from
// before handing it back to the scheduler. Sockets keep the namespace
// they were made in, so what f opens works from any thread afterwards.
// Threads are not thrown away instead: a thread's end sends
// Pdeathsig to the children it started, and the test harnesses start
// their processes with one (ClickHouse, chute). Only a thread that
// cannot get back stays locked, and so ends, as the lesser harm.
func inNamespace(name string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("faults: this thread's namespace: %w", err)
			return
		}
		defer home.Close()
		target, err := os.Open("/run/netns/" + name)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("faults: namespace %s: %w", name, err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("faults: join namespace %s: %w", name, err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("faults: leave namespace %s: %w", name, err))
			return // locked: the thread ends with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
