package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"chute/gossip"
	"chute/kv"
	chuteotel "chute/otel"
)

// shutdownTimeout bounds the whole ordered shutdown.
const shutdownTimeout = 10 * time.Second

// runNode starts a node from cfg and blocks until ctx is cancelled
// (SIGTERM/SIGINT) or a part fails; then it shuts down in order: stop
// being ready, stop the etcd API, stop the metrics listener, flush telemetry.
func runNode(ctx context.Context, cfg Config, logger *slog.Logger) error {
	providers, err := chuteotel.New(chuteotel.Config{InstanceID: cfg.Name, Version: version})
	if err != nil {
		return err
	}
	kcfg := kv.DefaultConfig()
	kcfg.Name = cfg.Name
	kcfg.ClusterID = gossip.ClusterID(cfg.Cluster)
	kcfg.MemberID = gossip.MemberID(cfg.Name)
	kcfg.ListenClientURLs = cfg.ListenClientURLs
	kcfg.AdvertiseClientURLs = cfg.AdvertiseClientURLs
	kcfg.AdvertisePeerURLs = cfg.AdvertisePeerURLs
	kcfg.MaxRequestBytes = cfg.MaxRequestBytes
	kcfg.MaxTxnOps = cfg.MaxTxnOps
	kcfg.MaxKeyBytes = cfg.MaxKeyBytes
	kcfg.HistoryRevisions = cfg.HistoryRevisions
	kcfg.Version = version
	kcfg.Logger = logger.With("component", "kv")
	kcfg.Meter = providers.MeterProvider()
	srv, err := kv.New(kcfg)
	if err != nil {
		return err
	}

	var httpSrv *http.Server
	httpErr := make(chan error, 1)
	if cfg.MetricsListen != "" {
		ln, err := net.Listen("tcp", cfg.MetricsListen)
		if err != nil {
			return fmt.Errorf("metrics listener %s: %w", cfg.MetricsListen, err)
		}
		httpSrv = &http.Server{Handler: opsHandler(srv, providers), ReadHeaderTimeout: 10 * time.Second}
		go func() { httpErr <- httpSrv.Serve(ln) }()
		logger.Info("serving metrics", "addr", ln.Addr().String())
	}
	if err := srv.Start(); err != nil {
		if httpSrv != nil {
			_ = httpSrv.Close()
			<-httpErr
		}
		return err
	}
	logger.Info("chute started", "name", cfg.Name, "cluster", cfg.Cluster,
		"member_id", fmt.Sprintf("%x", kcfg.MemberID), "version", version)

	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-httpErr:
		runErr = fmt.Errorf("metrics listener: %w", err)
		httpSrv = nil
	}

	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	errs := []error{runErr, srv.Shutdown(sctx)}
	if httpSrv != nil {
		if err := httpSrv.Shutdown(sctx); err != nil {
			errs = append(errs, err)
		}
		if err := <-httpErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, providers.Shutdown(sctx))
	logger.Info("stopped")
	return errors.Join(errs...)
}

// opsHandler serves the operator endpoints of the metrics listener.
func opsHandler(srv *kv.Server, providers *chuteotel.Providers) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !srv.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", providers.MetricsHandler())
	return mux
}
