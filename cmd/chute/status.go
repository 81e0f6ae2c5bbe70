package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"chute/internal/nodestatus"
)

// statusMain is `chute status`: it reads /status from each node's metrics
// listener and prints the members and queues as tables.
func statusMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chute status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	endpoints := fs.String("endpoints", "127.0.0.1:9379", "comma-separated host:port of nodes' --metrics-listen")
	timeout := fs.Duration("timeout", 5*time.Second, "bound on each request")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		return exitUsage
	}
	client := &http.Client{Timeout: *timeout}
	code := exitOK
	for _, ep := range splitList(*endpoints) {
		st, err := fetchStatus(client, ep)
		if err != nil {
			fmt.Fprintf(stderr, "chute status: %s: %v\n", ep, err)
			code = exitFatal
			continue
		}
		printStatus(stdout, ep, st)
	}
	return code
}

func fetchStatus(client *http.Client, endpoint string) (nodestatus.Node, error) {
	url := endpoint
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	resp, err := client.Get(strings.TrimSuffix(url, "/") + "/status")
	if err != nil {
		return nodestatus.Node{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nodestatus.Node{}, fmt.Errorf("GET /status: %s", resp.Status)
	}
	var st nodestatus.Node
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nodestatus.Node{}, fmt.Errorf("GET /status: %w", err)
	}
	return st, nil
}

func printStatus(w io.Writer, endpoint string, st nodestatus.Node) {
	fmt.Fprintf(w, "node %s (member %s, version %s) at %s\n\n", st.Name, st.Member, st.Version, endpoint)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tID\tSTATUS\tPEER URLS\tCLIENT URLS")
	for _, m := range st.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.Name, m.ID, m.Status, strings.Join(m.PeerURLs, ","), strings.Join(m.ClientURLs, ","))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tDISPATCHER\tEPOCH\tROWS\tHELD\tBYTES\tUNACKED\tCONSUMERS\tLOCAL CONSUMERS\tACK\tBACKUP")
	for _, q := range st.Queues {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", q.Name, q.Dispatcher, q.Epoch, q.Rows, q.Held, q.Bytes, q.Unacked,
			q.Consumers, q.LocalConsumers, orDash(string(q.Ack)), orDash(q.Backup))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	// Only when there is something to say: the last failed insert of each
	// ClickHouse queue (redacted), and the copies kept for other members.
	errs := false
	for _, q := range st.Queues {
		if e := q.LastInsertError; e != nil {
			fmt.Fprintf(w, "last insert error of %s at %s: %s code %d (HTTP %d): %s\n", q.Name, e.Time.Format(time.RFC3339), e.Class, e.Code, e.Status, e.Message)
			errs = true
		}
	}
	if errs {
		fmt.Fprintln(w)
	}
	if len(st.Backups) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "COPIES OF QUEUE\tFOR DISPATCHER\tROWS\tBYTES")
		for _, b := range st.Backups {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", b.Queue, b.Dispatcher, b.Rows, b.Bytes)
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
