#!/usr/bin/env bash
# DNS-SD browse at scale: N nodes registered in one BIND zone (by nsupdate,
# not N agents), browsed with `rlx-discover browse --no-mdns --domain`.
# Prints, per mode (queries / zone transfer), the DNS source's own time (the
# attempt's elapsed_ms), the queries it sent, and the whole command's wall
# time, as medians of REPS runs. Results: bench/dns/RESULTS.md (by hand).
#
#   sudo bench/dns/run.sh [N=1000] [REPS=5]
#
# Everything runs in a network namespace this script creates (named listens
# on 127.0.0.1:53 there); named's files live in a temp dir; both are removed
# on exit. Needs: named, nsupdate, tsig-keygen (bind9, bind9-utils,
# bind9-dnsutils), /usr/bin/python3, and a built rlx-discover
# (RLX_DISCOVER=path, default target/release/rlx-discover).
set -euo pipefail
cd "$(dirname "$0")/../.."
N="${1:-1000}"
REPS="${2:-5}"
BIN="${RLX_DISCOVER:-target/release/rlx-discover}"
[ -x "$BIN" ] || { echo "build it first: cargo build --release -p rlx-discover" >&2; exit 2; }
NS="rlx-benchdns-$$"
DIR="$(mktemp -d)"
ZONE=bench.test
NAMED_PID=""
cleanup() {
  [ -n "$NAMED_PID" ] && kill "$NAMED_PID" 2>/dev/null || true
  for p in $(ip netns pids "$NS" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
  ip netns del "$NS" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT
ip netns add "$NS"
ip -n "$NS" link set lo up
in_ns() { ip netns exec "$NS" env RLX_NETNS_GUARD=1 "$@"; }

tsig-keygen -a hmac-sha256 rlx-update > "$DIR/update.key"
chmod 600 "$DIR/update.key"
: > "$DIR/bind.keys"
cat > "$DIR/$ZONE.db" <<Z
\$TTL 60
@ IN SOA ns.$ZONE. hostmaster.$ZONE. 1 60 60 600 60
@ IN NS ns.$ZONE.
ns IN A 127.0.0.1
Z
cat > "$DIR/named.conf" <<C
include "$DIR/update.key";
options {
  directory "$DIR"; pid-file "$DIR/named.pid"; session-keyfile "$DIR/session.key";
  managed-keys-directory "$DIR"; bindkeys-file "$DIR/bind.keys";
  dump-file "$DIR/dump.db"; statistics-file "$DIR/stats";
  listen-on port 53 { 127.0.0.1; }; listen-on-v6 { none; };
  recursion no; dnssec-validation no; minimal-responses no; notify no;
  # BIND 9.18.28+ caps an RRset at 100 records by default; the PTR set
  # holds one record per node.
  max-records-per-type 0;
  allow-transfer { 127.0.0.1; };
};
controls { };
zone "$ZONE" { type primary; file "$DIR/$ZONE.db"; allow-update { key "rlx-update"; }; };
C
ip netns exec "$NS" /usr/sbin/named -g -c "$DIR/named.conf" > "$DIR/named.log" 2>&1 &
NAMED_PID=$!
for _ in $(seq 100); do grep -q running "$DIR/named.log" && break; sleep 0.1; done
grep -q running "$DIR/named.log" || { cat "$DIR/named.log" >&2; exit 1; }

# N registrations as an agent makes them (a typical ~250-byte TXT record),
# 50 per UPDATE message; addresses in 198.18.0.0/15 (benchmarking range,
# unreachable here, so admission refuses them at once).
/usr/bin/python3 - "$N" "$ZONE" > "$DIR/updates.txt" <<'PY'
import sys
n, zone = int(sys.argv[1]), sys.argv[2]
txt = ('"txtvers=1" "id=%016x" "os=linux" "arch=x86_64" "cores=64" "ram=549755813888" '
       '"ramfree=500000000000" "disk=2000000000000" "gflops=812.4" "io=3100" '
       '"dev0=cuda,85899345920,0,1,0,NVIDIA A100-SXM4-80GB" '
       '"dev1=cuda,85899345920,0,1,0,NVIDIA A100-SXM4-80GB" "ver=0.1.0" "expires=4102444800"')
print("server 127.0.0.1 53")
for i in range(n):
    if i % 50 == 0:
        if i: print("send")
        print("zone", zone)
    h = "node%04d" % i
    print(f"update add _rlx._tcp.{zone}. 60 PTR {h}._rlx._tcp.{zone}.")
    print(f"update add {h}._rlx._tcp.{zone}. 60 SRV 0 0 9100 {h}.{zone}.")
    print(f"update add {h}._rlx._tcp.{zone}. 60 TXT " + txt % i)
    print(f"update add {h}.{zone}. 60 A 198.18.{i // 250}.{1 + i % 250}")
print("send")
PY
in_ns nsupdate -v -k "$DIR/update.key" "$DIR/updates.txt" || { tail -20 "$DIR/named.log" >&2; exit 1; }

cat > "$DIR/axfr.toml" <<T
[discover]
mdns = false
dns_sd = { domain = "$ZONE", server = "127.0.0.1:53", zone_transfer = true }
T
run_mode() { # mode -> "elapsed_ms queries wall_ms answered"
  local t0 t1 out
  t0=$(date +%s%N)
  if [ "$1" = transfer ]; then
    out=$(in_ns "$BIN" browse --json --config "$DIR/axfr.toml" --no-mdns 2>/dev/null || true)
  else
    out=$(in_ns "$BIN" browse --json --no-mdns --domain "$ZONE" --dns-server 127.0.0.1:53 2>/dev/null || true)
  fi
  t1=$(date +%s%N)
  /usr/bin/python3 -c '
import json, re, sys
v = json.loads(sys.stdin.read())
t = [t for t in v["report"]["tried"] if t["source"] == "dns"][0]
m = re.search(r"(\d+) instance\(s\), (\d+) quer", t["what"])
print(t["elapsed_ms"], m.group(2), int(sys.argv[1]) // 1000000, m.group(1))
' "$((t1 - t0))" <<<"$out"
}
echo "N=$N registered nodes, $REPS runs per mode, $(nproc) cores, $("$BIN" --version)"
for mode in queries transfer; do
  rows=()
  for _ in $(seq "$REPS"); do rows+=("$(run_mode "$mode")"); done
  printf '%s\n' "${rows[@]}" | /usr/bin/python3 -c '
import statistics, sys
rows = [list(map(int, l.split())) for l in sys.stdin if l.strip()]
col = lambda i: [r[i] for r in rows]
print("%-9s browse %4d ms (min %d, max %d)  queries %d  instances %d  whole command %d ms" % (
    sys.argv[1], statistics.median(col(0)), min(col(0)), max(col(0)), rows[0][1], rows[0][3],
    statistics.median(col(2))))
' "$mode"
done
