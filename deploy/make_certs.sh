#!/usr/bin/env bash
# Makes a throwaway PKI for a parameter-server cluster with openssl: a CA,
# a certificate per server shard, per worker, an admin and a reader, and a
# bearer token per identity.
#
#   deploy/make_certs.sh DIR --servers=S --workers=W [--names=NAME,...]
#                        [--days=N] [--owner=UID:GID] [--new_ca]
#
# Writes into DIR (created; existing files are replaced):
#   ca.pem ca.key                 the CA (keep ca.key away from the cluster);
#                                 kept when DIR holds both already (new
#                                 leaves under the same CA), unless --new_ca
#   server-<s>.pem server-<s>.key CN server-<s> (also a client certificate:
#                                 servers register in etcd); SANs localhost, 127.0.0.1,
#                                 ::1, ps-server-<s> (compose),
#                                 ps-server-<s>.ps-server and
#                                 ps-server-<s>.ps-server.default.svc[.cluster.local]
#                                 (Kubernetes), ps-server (the Service) and
#                                 each --names entry ("{s}" becomes the shard)
#   worker-<w>.pem worker-<w>.key CN worker-<w>, SAN URI ps://worker/<w>;
#                                 also a server certificate (ps_worker
#                                 --metrics_listen): SANs localhost,
#                                 127.0.0.1, ps-worker-<w>
#   etcd.pem etcd.key             CN etcd: the coordinator's server
#                                 certificate (docs/elastic.md); SANs
#                                 localhost, 127.0.0.1, ::1, etcd
#   admin.pem admin.key           CN admin   (ps_ctl)
#   reader.pem reader.key         CN reader  (evaluation, dashboards)
#   tokens.txt                    the servers' --auth_token_file: one
#                                 "IDENTITY TOKEN" line per identity
#   <identity>.token              that identity's line, for its client's
#                                 --auth_token_file
# Keys and token files are mode 0600 (0400 with --owner, which needs root and
# hands them to the user the containers run as). Certificates are ECDSA
# P-256, valid for --days (default 365). To rotate the leaves, run it again
# on the same DIR (the CA stays) and give the processes the new files:
# servers and clients re-read them (ps_server --tls_reload_secs).
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

dir="" servers="" workers="" names="" days=365 owner="" new_ca=0
for arg in "$@"; do
  case "$arg" in
    -h|--help) usage; exit 0 ;;
    --servers=*) servers="${arg#*=}" ;;
    --workers=*) workers="${arg#*=}" ;;
    --names=*) names="${arg#*=}" ;;
    --days=*) days="${arg#*=}" ;;
    --owner=*) owner="${arg#*=}" ;;
    --new_ca) new_ca=1 ;;
    -*) echo "make_certs: unknown flag $arg (see --help)" >&2; exit 2 ;;
    *) [ -z "$dir" ] || { echo "make_certs: one DIR only" >&2; exit 2; }; dir="$arg" ;;
  esac
done
[ -n "$dir" ] || { echo "make_certs: DIR is missing (see --help)" >&2; exit 2; }
[[ "$servers" =~ ^[1-9][0-9]*$ ]] || { echo "make_certs: --servers=S (S >= 1) is required" >&2; exit 2; }
[[ "$workers" =~ ^[1-9][0-9]*$ ]] || { echo "make_certs: --workers=W (W >= 1) is required" >&2; exit 2; }
[[ "$days" =~ ^[1-9][0-9]*$ ]] || { echo "make_certs: --days must be a positive integer" >&2; exit 2; }
command -v openssl >/dev/null || { echo "make_certs: openssl not found (apt-get install openssl)" >&2; exit 1; }

mkdir -p "$dir"
cd "$dir"
umask 077
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# sign NAME CN EXTENSIONS: NAME.key and NAME.pem, signed by the CA.
sign() {
  local name=$1 cn=$2 ext=$3
  key "$name.key"
  openssl req -new -key "$name.key" -subj "/O=ps/CN=$cn" -out "$tmp/$name.csr"
  printf '%s\n' "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" "$ext" >"$tmp/$name.ext"
  openssl x509 -req -in "$tmp/$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial \
    -CAserial "$tmp/ca.srl" -days "$days" -sha256 -extfile "$tmp/$name.ext" -out "$name.pem" \
    2>/dev/null
}

if [ $new_ca -eq 1 ] || [ ! -s ca.pem ] || [ ! -s ca.key ]; then
  key ca.key
  openssl req -x509 -new -key ca.key -subj "/O=ps/CN=ps throwaway CA" -days "$days" -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out ca.pem
  ca_note="a new CA"
else
  ca_note="the CA already in $(pwd)"
fi

for ((s = 0; s < servers; s++)); do
  san="DNS:localhost,IP:127.0.0.1,IP:::1,DNS:ps-server,DNS:ps-server-$s,DNS:ps-server-$s.ps-server"
  san+=",DNS:ps-server-$s.ps-server.default.svc,DNS:ps-server-$s.ps-server.default.svc.cluster.local"
  IFS=, read -r -a extra <<<"$names"
  for n in "${extra[@]}"; do
    [ -n "$n" ] || continue
    n=${n//\{s\}/$s}
    if [[ "$n" =~ ^[0-9.]+$ || "$n" == *:* ]]; then san+=",IP:$n"; else san+=",DNS:$n"; fi
  done
  sign "server-$s" "server-$s" "extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$san"
done
sign etcd etcd "extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1,DNS:etcd"
for ((w = 0; w < workers; w++)); do
  # serverAuth and the DNS/IP names too: ps_worker --metrics_listen serves
  # HTTPS with this certificate. The URI stays first (the identity).
  sign "worker-$w" "worker-$w" "extendedKeyUsage=clientAuth,serverAuth
subjectAltName=URI:ps://worker/$w,DNS:localhost,IP:127.0.0.1,DNS:ps-worker-$w"
done
for who in admin reader; do
  sign "$who" "$who" "extendedKeyUsage=clientAuth
subjectAltName=URI:ps://$who"
done

: >tokens.txt
for who in $(seq -f 'worker-%g' 0 $((workers - 1))) admin reader; do
  line="$who $(openssl rand -hex 32)"
  echo "$line" >>tokens.txt
  echo "$line" >"$who.token"
done
chmod 644 ./*.pem
chmod 600 ./*.key ./*.token tokens.txt
if [ -n "$owner" ]; then
  chown "$owner" ./*.pem ./*.key ./*.token tokens.txt
  chmod 400 ./*.key ./*.token tokens.txt
fi
echo "make_certs: $servers server, $workers worker, etcd, admin and reader certificates and tokens, signed by $ca_note, in $(pwd)"
