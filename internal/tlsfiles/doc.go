// Package tlsfiles turns a node's TLS settings into the tls.Config of its
// listeners and dialers: the etcd API, the peer link, the metrics server.
//
// A Source holds one endpoint's identity and trust. It comes from files
// (etcd's --cert-file, --key-file, --trusted-ca-file, --client-cert-auth,
// --client-crl-file and their --peer-* twins), from a certificate made at
// start (--auto-tls), or from a secret every member shares (the gossip
// key: Derived). Configs are built per handshake from what the Source
// holds then; the files are looked at again at most once a second on a
// handshake, and at once on Reload (SIGHUP), so a rotated certificate is
// used by the next connection without a restart. A file that cannot be
// read after a change leaves the old certificate in use, with a WARN.
//
// Derived certificates: every member derives one Ed25519 CA key from the
// gossip key and the cluster name (HKDF-SHA256), builds the same CA
// certificate from fixed fields, and issues itself a leaf certificate for
// DerivedServerName with a fresh key. Listeners require a client
// certificate of that CA and dialers verify the server's, so the peer link
// of a cluster with a gossip key is mutually authenticated and encrypted
// with nothing to distribute but the key members already share.
package tlsfiles
