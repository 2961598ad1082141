#!/usr/bin/python3
"""Flood the segment with bogus _rlx._tcp announcements: K instances, each
with SRV, a schema-v1 TXT and an A record pointing at an address where
nothing listens, sent to the mDNS group (224.0.0.251:5353) in packets of a
few instances: every PERIOD_S seconds, and at once (at most every 100 ms)
whenever someone on the segment asks for _rlx._tcp. Runs until killed.

usage: flood.py IP K PERIOD_S BOGUS_PREFIX [SOURCE_PORT]

BOGUS_PREFIX is the first two octets of the addresses claimed (e.g. 10.7),
spread over BOGUS_PREFIX.200.0 - BOGUS_PREFIX.239.255. Prints "ready" after
the first full round. Runs only inside a lab namespace.

SOURCE_PORT 0 (the default) sends from an ephemeral port: only a listener
that takes answers from any port (mdns-sd, which does not say who sent
what) hears the flood. 5353 sends from the mDNS port, as a responder does,
so a listener that reads answers with their source (the continuous browse
of `watch`) hears it too and counts it against the flooder's own address;
legacy one-shot queries (from another port) are then answered by unicast
to the asker, echoing its query id (RFC 6762 section 6.7), as
tests/heavy/watch_flood.rs's generator does.
"""
import select
import socket
import sys
import time

from zeroconf import DNSAddress, DNSOutgoing, DNSPointer, DNSService, DNSText, const

ip, k, period, prefix = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
sport = int(sys.argv[5]) if len(sys.argv) > 5 else 0
TYPE = "_rlx._tcp.local."
PER_PACKET = 8


def txt(i):
    pairs = [b"txtvers=1", b"id=%016x" % (0xF100D00000000000 + i), b"os=linux",
             b"cores=64", b"ram=1099511627776", b"ramfree=1099511627776",
             b"dev0=cuda,85899345920,0,1,0,Bogus H100"]
    return b"".join(bytes([len(p)]) + p for p in pairs)


packets = []
for start in range(0, k, PER_PACKET):
    out = DNSOutgoing(const._FLAGS_QR_RESPONSE | const._FLAGS_AA)
    for i in range(start, min(k, start + PER_PACKET)):
        name = "bogus-%d.%s" % (i, TYPE)
        host = "bogus-%d.local." % i
        addr = "%s.%d.%d" % (prefix, 200 + (i // 256) % 40, i % 256)
        out.add_answer_at_time(DNSPointer(TYPE, const._TYPE_PTR, const._CLASS_IN, 4500, name), 0)
        out.add_answer_at_time(DNSService(name, const._TYPE_SRV, const._CLASS_IN | const._CLASS_UNIQUE,
                                          120, 0, 0, 9100, host), 0)
        out.add_answer_at_time(DNSText(name, const._TYPE_TXT, const._CLASS_IN | const._CLASS_UNIQUE,
                                       4500, txt(i)), 0)
        out.add_answer_at_time(DNSAddress(host, const._TYPE_A, const._CLASS_IN | const._CLASS_UNIQUE,
                                          120, socket.inet_aton(addr)), 0)
    packets.extend(out.packets())

rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
rx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
rx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
rx.bind(("0.0.0.0", 5353))
rx.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
              socket.inet_aton("224.0.0.251") + socket.inet_aton(ip))
if sport == 5353:
    # One socket on port 5353 for both directions; its own packets are not
    # looped back to it.
    sock = rx
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
else:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    sock.bind((ip, sport))
sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(ip))
sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)


def send_all(to=("224.0.0.251", 5353), qid=b"\0\0"):
    for p in packets:
        sock.sendto(qid + p[2:], to)


send_all()
print("ready %d packets" % len(packets), flush=True)
last = next_periodic = time.monotonic()
next_periodic += period
while True:
    r, _, _ = select.select([rx], [], [], max(0.0, next_periodic - time.monotonic()))
    now = time.monotonic()
    if r:
        data, src = rx.recvfrom(9000)
        # A query (QR bit clear) that mentions _rlx._tcp.
        is_query = len(data) > 12 and not data[2] & 0x80
        if is_query and b"\x04_rlx\x04_tcp" in data and now - last >= 0.1:
            if sport == 5353 and src[1] != 5353:
                send_all(src, data[:2])
            else:
                send_all()
            last = now
    if now >= next_periodic:
        send_all()
        last = now
        next_periodic = now + period
