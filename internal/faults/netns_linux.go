package faults

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// inNamespace runs f on a thread that has joined the network namespace
// called name. Sockets keep the namespace they were made in, so what f
// opens works from any thread afterwards. The thread is never handed
// back to the Go scheduler: its goroutine ends locked to it, which
// makes the runtime end the thread rather than reuse it in the wrong
// namespace.
func inNamespace(name string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		fd, err := os.Open("/run/netns/" + name)
		if err != nil {
			errc <- fmt.Errorf("faults: namespace %s: %w", name, err)
			return
		}
		defer fd.Close()
		if err := unix.Setns(int(fd.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("faults: join namespace %s: %w", name, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}
