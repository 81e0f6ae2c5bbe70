package bench

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

// errChildExited marks errors about a matrix child that is gone.
var errChildExited = errors.New("bench: child exited")

// childWaitDelay bounds how long Wait keeps copying a child's output after
// it exited.
const childWaitDelay = 2 * time.Second

// child is a matrix child process. One goroutine, started by startChild,
// waits for the process; it ends when the process does, and stop makes sure
// that happens.
type child struct {
	name string
	cmd  *exec.Cmd
	// done is closed once the process has exited and err is set.
	done chan struct{}
	// err is what Wait returned; read it only after done is closed.
	err error
}

// startChild starts exe with args and the environment env (KEY=value
// entries; nil: this process's) in dir, its stdout and stderr going to out.
func startChild(name, exe string, args, env []string, dir string, out io.Writer) (*child, error) {
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.WaitDelay = childWaitDelay
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start %s (%s): %w", name, exe, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// childEnv is environ without its OpenTelemetry variables (OTEL_*) and
// the variables extra sets, then extra: a matrix child traces exactly
// when the matrix asks, whatever the shell running the bench has set.
func childEnv(environ []string, extra ...string) []string {
	out := make([]string, 0, len(environ)+len(extra))
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "OTEL_") && !slices.ContainsFunc(extra, func(e string) bool { return sameVar(kv, e) }) {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// sameVar reports whether the NAME=value pairs a and b name one variable.
func sameVar(a, b string) bool {
	na, _, _ := strings.Cut(a, "=")
	nb, _, _ := strings.Cut(b, "=")
	return na == nb
}

// exitErr is how the process ended; call it only after done is closed.
func (c *child) exitErr() error {
	if c.err == nil {
		return errors.New("exit status 0")
	}
	return c.err
}

// stop sends SIGTERM, waits up to grace, then kills, and always waits for
// the process to be gone. It is idempotent; it reports a kill, or an exit
// that happened before stop was called.
func (c *child) stop(grace time.Duration) error {
	select {
	case <-c.done:
		if c.err != nil {
			return fmt.Errorf("bench: %s had exited: %w", c.name, c.err)
		}
		return nil
	default:
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		_ = c.cmd.Process.Kill() // it may already be gone; done tells
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
		return nil
	case <-t.C:
	}
	_ = c.cmd.Process.Kill() // ditto
	<-c.done
	return fmt.Errorf("bench: %s ignored SIGTERM for %v and was killed", c.name, grace)
}
