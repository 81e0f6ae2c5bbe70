package kv

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// healthService is gRPC's standard health service (grpc.health.v1.Health),
// which etcd registers on its client port under the service name ""
// for all of its services: load balancers, service meshes, Kubernetes'
// gRPC probes and grpc_health_probe ask it. Only "" is known, as in etcd;
// any other name is NotFound. It answers SERVING while the server is
// ready (Config.Ready, /readyz in cmd/chute) and NOT_SERVING before
// that and once it shuts down. No user is needed with auth enabled,
// as in etcd (openMethods, authorizer.stream).
//
// It is not grpc's health.Server: that Watch outlives the server's
// shutdown (it ends only when its client goes, so GracefulStop waited
// for it), and its status is set, where this one reads the server's.
type healthService struct {
	healthpb.UnimplementedHealthServer
	srv *Server
}

// healthWatchEvery is how often a health Watch looks for a change.
const healthWatchEvery = 500 * time.Millisecond

// allServices is the service name etcd registers its status under.
const allServices = ""

func (h *healthService) status() healthpb.HealthCheckResponse_ServingStatus {
	s := h.srv
	if s.Ready() && (s.cfg.Ready == nil || s.cfg.Ready()) {
		return healthpb.HealthCheckResponse_SERVING
	}
	return healthpb.HealthCheckResponse_NOT_SERVING
}

func (h *healthService) Check(_ context.Context, r *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if r.Service != allServices {
		return nil, status.Error(codes.NotFound, "unknown service")
	}
	return &healthpb.HealthCheckResponse{Status: h.status()}, nil
}

func (h *healthService) List(context.Context, *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	return &healthpb.HealthListResponse{Statuses: map[string]*healthpb.HealthCheckResponse{
		allServices: {Status: h.status()},
	}}, nil
}

// Watch sends the status at once and again whenever it changes, as
// grpc's does (SERVICE_UNKNOWN for a name it does not know, and the
// stream stays open). When the server shuts down it sends NOT_SERVING,
// if it had not, and ends the stream (OK), so that the client's
// health checking moves to another endpoint and the shutdown does not
// wait for the stream.
func (h *healthService) Watch(r *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	ctx := stream.Context()
	if r.Service != allServices {
		if err := stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVICE_UNKNOWN}); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-h.srv.stop:
			return nil
		}
	}
	last := healthpb.HealthCheckResponse_UNKNOWN
	send := func(st healthpb.HealthCheckResponse_ServingStatus) error {
		if st == last {
			return nil
		}
		last = st
		return stream.Send(&healthpb.HealthCheckResponse{Status: st})
	}
	tick := time.NewTicker(healthWatchEvery)
	defer tick.Stop()
	for {
		if err := send(h.status()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-h.srv.stop:
			return send(healthpb.HealthCheckResponse_NOT_SERVING)
		case <-tick.C:
		}
	}
}
