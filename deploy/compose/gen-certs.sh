#!/bin/sh
# Makes the certificates of docker-compose.yml: a private CA, one
# certificate per chute node (server and client: the node serves the etcd
# API and the peer link with it, and presents it when it dials a peer),
# and a client certificate for etcdctl. From the repository root:
#
#   deploy/compose/gen-certs.sh [DIR]
#
# DIR defaults to deploy/compose/certs (ignored by git). Idempotent: a file
# that is present, signed by the CA and valid for another 30 days is kept;
# a missing CA makes every certificate again. Needs openssl.
#
#   ca.pem ca-key.pem              the CA (keep ca-key.pem to add nodes)
#   chute-N.pem chute-N-key.pem    node N: DNS chute-N and localhost, IP 127.0.0.1
#   client.pem client-key.pem      etcdctl: CN etcdctl, client auth only
#
# These are development certificates: the keys are readable by every user,
# so that the containers' user (65532) can read them through the bind mount.
set -eu

dir=${1:-$(dirname "$0")/certs}
nodes="chute-1 chute-2 chute-3"
days=825           # leaf validity; the CA lasts ten years
renew=2592000      # 30 days: a certificate closer to its end is made again

command -v openssl >/dev/null 2>&1 || {
	echo "gen-certs.sh: openssl not found; install it (apt-get install openssl)" >&2
	exit 1
}
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# newkey FILE: an ECDSA P-256 key in PKCS#8.
newkey() {
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
	chmod 0644 "$1"
}

# fresh CERT: CERT exists, the CA signed it and it is valid for 30 days.
fresh() {
	[ -s "$1" ] && [ -s "${1%.pem}-key.pem" ] &&
		openssl verify -CAfile "$dir/ca.pem" "$1" >/dev/null 2>&1 &&
		openssl x509 -in "$1" -noout -checkend "$renew" >/dev/null 2>&1
}

# issue NAME CN USAGE SAN: signs NAME.pem (key NAME-key.pem) with the CA.
issue() {
	name=$1 cn=$2 usage=$3 san=$4
	if fresh "$dir/$name.pem"; then
		return
	fi
	newkey "$dir/$name-key.pem"
	{
		echo "basicConstraints = critical, CA:FALSE"
		echo "keyUsage = critical, digitalSignature"
		echo "extendedKeyUsage = $usage"
		echo "subjectKeyIdentifier = hash"
		echo "authorityKeyIdentifier = keyid"
		if [ -n "$san" ]; then
			echo "subjectAltName = $san"
		fi
	} >"$tmp/$name.ext"
	openssl req -new -key "$dir/$name-key.pem" -subj "/O=chute compose/CN=$cn" -out "$tmp/$name.csr"
	openssl x509 -req -in "$tmp/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca-key.pem" \
		-set_serial "0x$(openssl rand -hex 16)" -days "$days" -sha256 \
		-extfile "$tmp/$name.ext" -out "$dir/$name.pem" 2>/dev/null
	echo "gen-certs.sh: wrote $dir/$name.pem"
}

if ! { [ -s "$dir/ca.pem" ] && [ -s "$dir/ca-key.pem" ] &&
	openssl x509 -in "$dir/ca.pem" -noout -checkend "$renew" >/dev/null 2>&1; }; then
	newkey "$dir/ca-key.pem"
	openssl req -new -x509 -key "$dir/ca-key.pem" -subj "/O=chute compose/CN=chute compose CA" \
		-days 3650 -sha256 -out "$dir/ca.pem" \
		-addext "basicConstraints = critical, CA:TRUE, pathlen:0" \
		-addext "keyUsage = critical, keyCertSign, cRLSign"
	rm -f "$dir"/chute-*.pem "$dir"/client*.pem
	echo "gen-certs.sh: wrote $dir/ca.pem"
fi

for n in $nodes; do
	issue "$n" "$n" "serverAuth, clientAuth" "DNS:$n, DNS:localhost, IP:127.0.0.1"
done
issue client etcdctl clientAuth ""
