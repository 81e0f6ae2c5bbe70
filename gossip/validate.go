package gossip

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/memberlist"

	"chute/internal/setting"
)

// FieldError is a setting that cannot work; Field names it.
type FieldError = setting.FieldError

// Validate reports every problem of c, each a *FieldError, joined. It
// does no I/O: DNS names are resolved by New.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Pkg: "gossip", Sentinel: ErrInvalidConfig, Field: field, Err: fmt.Errorf(format, args...)})
	}
	if err := checkNodeName(c.Name); err != nil {
		bad("Name", "name %q: %v", c.Name, err)
	}
	switch {
	case c.Cluster == "":
		bad("Cluster", "cluster must not be empty")
	case len(c.Cluster) > memberlist.LabelMaxSize:
		bad("Cluster", "cluster name is %d bytes, more than %d", len(c.Cluster), memberlist.LabelMaxSize)
	}
	if c.BindAddr == "" {
		bad("BindAddr", "bind address must not be empty")
	} else if _, _, err := splitGossipAddr(c.BindAddr, true); err != nil {
		bad("BindAddr", "bind address %q: %v", c.BindAddr, err)
	}
	if c.AdvertiseAddr != "" {
		if _, _, err := splitGossipAddr(c.AdvertiseAddr, false); err != nil {
			bad("AdvertiseAddr", "advertise address %q: %v", c.AdvertiseAddr, err)
		}
	}
	for _, seed := range c.Join {
		if _, _, err := splitGossipAddr(seed, false); err != nil {
			bad("Join", "join seed %q: %v", seed, err)
		}
	}
	switch lo, hi := c.joinBackoff(); {
	case c.JoinBackoffMin < 0 || c.JoinBackoffMax < 0:
		bad("JoinBackoffMin", "join backoff is negative")
	case lo > hi:
		bad("JoinBackoffMin", "join backoff min %v is above max %v", lo, hi)
	}
	if len(c.Key) > 0 {
		if err := memberlist.ValidateKey(c.Key); err != nil {
			bad("Key", "key is %d bytes, want 16, 24 or 32", len(c.Key))
		}
	}
	for _, l := range []struct {
		field string
		urls  []string
	}{{"PeerURLs", c.PeerURLs}, {"ClientURLs", c.ClientURLs}} {
		for _, u := range l.urls {
			if u == "" || strings.Contains(u, ",") {
				bad(l.field, "url %q is empty or holds a comma", u)
			}
		}
	}
	for k := range c.Tags {
		if ownTag(k) {
			bad("Tags", "%q is one of the membership's own tags", k)
		}
	}
	sized := c.startTags()
	sized[tagLeaving] = "1" // published at the end (MarkLeaving)
	for k, v := range c.ReserveTags {
		if len(v) > len(sized[k]) {
			sized[k] = v
		}
	}
	if n := tagsSize(sized); n > memberlist.MetaMaxSize {
		bad("PeerURLs", "tags (urls, version, cluster, Tags, ReserveTags) take %d bytes, more than serf's %d", n, memberlist.MetaMaxSize)
	}
	return errors.Join(errs...)
}
