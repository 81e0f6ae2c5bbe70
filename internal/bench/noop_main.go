package bench

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
)

// noopMain is `chute-bench noop-server --listen host:port [--put-delay d]
// [--txn-delay d]`: it serves a NoopServer until SIGINT or SIGTERM.
func noopMain(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("chute-bench noop-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to serve the no-op etcd KV API on")
	var d NoopDelays
	fs.DurationVar(&d.Put, "put-delay", 0, "hold each put this long before answering, as a server waiting for its disk would")
	fs.DurationVar(&d.Txn, "txn-delay", 0, "hold each txn this long before answering")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	if fs.NArg() > 0 {
		logger.Error("unexpected argument", "arg", fs.Arg(0))
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	l, err := net.Listen("tcp", *listen)
	if err != nil {
		logger.Error("cannot listen", "addr", *listen, "err", err)
		return 1
	}
	srv := NewNoopServer(d)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	logger.Info("noop server serving", "addr", l.Addr().String())

	select {
	case <-ctx.Done():
		srv.Stop()
		<-served
		return 0
	case err := <-served:
		logger.Error("noop server failed", "err", err)
		return 1
	}
}
