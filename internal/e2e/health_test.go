//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// grpcHealth returns what gRPC's health service of cli's endpoint says
// of "" (the whole server).
func grpcHealth(t testing.TB, cli *clientv3.Client) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	ctx, cancel := rpcCtx()
	defer cancel()
	r, err := healthpb.NewHealthClient(cli.ActiveConnection()).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("gRPC health check: %v", err)
	}
	return r.Status
}

// TestHealth_etcdParity asks gRPC's health service of etcd 3.4 and of
// the chute binary the same questions (what load balancers, Kubernetes'
// gRPC probes and grpc_health_probe ask on the client port) and
// compares the answers.
func TestHealth_etcdParity(t *testing.T) {
	t.Parallel()
	var got [2][]string
	for i, p := range []*Proc{StartEtcd(t), StartChute(t)} {
		got[i] = healthTranscript(t, p)
	}
	sameTranscripts(t, got[0], got[1])
}

// healthTranscript checks "" and an unknown name, and watches both.
func healthTranscript(t *testing.T, p *Proc) []string {
	t.Helper()
	cli := newClient(t, p)
	h := healthpb.NewHealthClient(cli.ActiveConnection())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []string
	answer := func(q string, r *healthpb.HealthCheckResponse, err error) {
		if err != nil {
			s := status.Convert(err)
			out = append(out, fmt.Sprintf("%s: %v %q", q, s.Code(), s.Message()))
			return
		}
		out = append(out, fmt.Sprintf("%s: %v", q, r.Status))
	}
	for _, name := range []string{"", "etcdserverpb.KV"} {
		r, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: name})
		answer("check "+name, r, err)
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		w, err := h.Watch(wctx, &healthpb.HealthCheckRequest{Service: name})
		if err == nil {
			r, err = w.Recv()
		}
		answer("watch "+name, r, err)
		wcancel()
	}
	return out
}
