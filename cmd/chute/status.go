package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"chute/internal/nodestatus"
)

// statusMaxBody bounds the /status/cluster answer `chute status` reads.
const statusMaxBody = 64 << 20

// statusMain is `chute status`: it asks one node's metrics listener for
// the whole cluster (GET /status/cluster: the node gathers every alive
// member's queues over the peer link) and prints the members and queues
// as tables, or as JSON. The endpoints are alternatives, tried in order
// until one answers. --watch prints again every --interval until Ctrl-C
// or --count prints.
func statusMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chute status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	endpoints := fs.String("endpoints", "127.0.0.1:9379", "comma-separated host:port (or URL) of nodes' --metrics-listen, tried in order until one answers")
	timeout := fs.Duration("timeout", 5*time.Second, "bound on each request")
	asJSON := fs.Bool("json", false, "print the cluster's status as JSON (one object per line with --watch)")
	watch := fs.Bool("watch", false, "print again every --interval, until Ctrl-C")
	interval := fs.Duration("interval", 2*time.Second, "pause between two prints with --watch (at least 100ms)")
	count := fs.Int("count", 0, "with --watch, stop after this many prints; 0: until Ctrl-C")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		return exitUsage
	}
	if *interval < 100*time.Millisecond || *count < 0 || *timeout <= 0 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "chute status: --interval must be at least 100ms, --count not negative, --timeout positive, and no arguments")
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	s := statusCmd{
		client:    &http.Client{Timeout: *timeout},
		endpoints: splitList(*endpoints),
		json:      *asJSON,
		stdout:    stdout,
		stderr:    stderr,
	}
	if !*watch {
		return s.once(ctx, false)
	}
	return s.watch(ctx, *interval, *count)
}

// statusCmd is one `chute status`.
type statusCmd struct {
	client    *http.Client
	endpoints []string
	json      bool
	stdout    io.Writer
	stderr    io.Writer
}

// once fetches and prints the cluster's status once; it returns the exit
// code: exitFatal when no endpoint answered.
func (s statusCmd) once(ctx context.Context, watching bool) int {
	var errs []string
	for _, ep := range s.endpoints {
		st, err := fetchClusterStatus(ctx, s.client, ep)
		if err != nil {
			errs = append(errs, fmt.Sprintf("chute status: %s: %v", ep, err))
			continue
		}
		for _, e := range errs { // the endpoints tried before
			fmt.Fprintln(s.stderr, e)
		}
		switch {
		case s.json && watching:
			b, _ := json.Marshal(st)
			fmt.Fprintf(s.stdout, "%s\n", b)
		case s.json:
			b, _ := json.MarshalIndent(st, "", "  ")
			fmt.Fprintf(s.stdout, "%s\n", b)
		default:
			if watching {
				fmt.Fprint(s.stdout, "\x1b[H\x1b[2J") // top: clear, then print from the top
			}
			printClusterStatus(s.stdout, ep, st)
		}
		return exitOK
	}
	for _, e := range errs {
		fmt.Fprintln(s.stderr, e)
	}
	return exitFatal
}

// watch prints every interval until ctx ends or count prints (0: no
// bound but ctx); it returns the code of the last print.
func (s statusCmd) watch(ctx context.Context, interval time.Duration, count int) int {
	t := time.NewTicker(interval)
	defer t.Stop()
	code := exitOK
	for n := 1; count == 0 || n <= count; n++ {
		code = s.once(ctx, true)
		if count != 0 && n == count {
			break
		}
		select {
		case <-ctx.Done():
			return code
		case <-t.C:
		}
	}
	return code
}

func fetchClusterStatus(ctx context.Context, client *http.Client, endpoint string) (nodestatus.Cluster, error) {
	url := endpoint
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+"/status/cluster", nil)
	if err != nil {
		return nodestatus.Cluster{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nodestatus.Cluster{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nodestatus.Cluster{}, fmt.Errorf("GET /status/cluster: %s", resp.Status)
	}
	var st nodestatus.Cluster
	dec := json.NewDecoder(io.LimitReader(resp.Body, statusMaxBody))
	if err := dec.Decode(&st); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w (over %d bytes?)", err, statusMaxBody)
		}
		return nodestatus.Cluster{}, fmt.Errorf("GET /status/cluster: %w", err)
	}
	return st, nil
}

// printClusterStatus prints a title line, a blank line, the members
// table, a blank line, the queues table and a blank line; then, only
// when there is something to say, the members that did not answer, the
// last insert errors and the copies kept for other members.
func printClusterStatus(w io.Writer, endpoint string, st nodestatus.Cluster) {
	fmt.Fprintf(w, "cluster seen by node %s (member %s, version %s) at %s\n\n", st.Name, st.Member, st.Version, endpoint)
	names := make(map[string]string, len(st.Members))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tID\tSTATUS\tANSWERED\tVERSION\tPEER URLS\tCLIENT URLS")
	for _, m := range st.Members {
		names[m.ID] = m.Name
		answered := "yes"
		switch {
		case m.Error != "":
			answered = "no"
		case !m.Answered:
			answered = "-" // not asked: not alive
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, m.ID, m.Status, answered, orDash(m.Version),
			orDash(strings.Join(m.PeerURLs, ",")), orDash(strings.Join(m.ClientURLs, ",")))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	member := func(id string) string {
		if name, ok := names[id]; ok {
			return name
		}
		return orDash(id)
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tDISPATCHER\tEPOCH\tROWS\tHELD\tBYTES\tUNACKED\tCONSUMERS\tACK\tBACKUP")
	for _, q := range st.Queues {
		rows, bytes, unacked, consumers := "?", "?", "?", "?"
		if q.DispatcherAnswered {
			rows, bytes = strconv.Itoa(q.Rows), strconv.FormatInt(q.Bytes, 10)
			unacked, consumers = strconv.Itoa(q.Unacked), strconv.Itoa(q.Consumers)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", q.Name, member(q.Dispatcher), q.Epoch, rows, q.Held, bytes, unacked,
			consumers, orDash(string(q.Ack)), member(q.Backup))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)

	notes := false
	for _, m := range st.Members {
		switch {
		case m.Error != "":
			fmt.Fprintf(w, "member %s did not answer: %s\n", m.Name, m.Error)
			notes = true
		case m.Omitted > 0:
			fmt.Fprintf(w, "member %s left %d queues and copies out of its answer\n", m.Name, m.Omitted)
			notes = true
		}
	}
	for _, q := range st.Queues {
		if !q.DispatcherAnswered {
			fmt.Fprintf(w, "queue %s: its dispatcher did not answer; ROWS, BYTES, UNACKED, CONSUMERS unknown\n", q.Name)
			notes = true
		}
		if e := q.LastInsertError; e != nil {
			fmt.Fprintf(w, "last insert error of %s at %s: %s code %d (HTTP %d): %s\n", q.Name, e.Time.Format(time.RFC3339), e.Class, e.Code, e.Status, e.Message)
			notes = true
		}
	}
	if notes {
		fmt.Fprintln(w)
	}
	if len(st.ClickHouseServers) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "CLICKHOUSE SERVER (seen by %s)\tSTATE\tDOWN UNTIL\tFAILURES\tOK\tTRANSIENT\tDATA\tCONFIG\tWIRE BYTES\n", st.Name)
		for _, sv := range st.ClickHouseServers {
			state, until := "up", "-"
			if !sv.Up {
				state, until = "down", sv.DownUntil.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", sv.Server, state, until, sv.Failures,
				sv.Batches["ok"], sv.Batches["transient"], sv.Batches["data"], sv.Batches["config"], sv.WireBytes)
		}
		_ = tw.Flush()
		fmt.Fprintln(w)
	}
	if len(st.Backups) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "COPIES OF QUEUE\tKEPT BY\tFOR DISPATCHER\tROWS\tBYTES")
		for _, b := range st.Backups {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", b.Queue, member(b.KeptBy), member(b.Dispatcher), b.Rows, b.Bytes)
		}
		_ = tw.Flush()
		fmt.Fprintln(w)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
