#!/usr/bin/python3
"""Flood the segment with bogus _rlx._tcp announcements: K instances, each
with SRV, a schema-v1 TXT and an A record pointing at an address where
nothing listens, sent to the mDNS group (224.0.0.251:5353) in packets of a
few instances: every PERIOD_S seconds, and at once (at most every 100 ms)
whenever someone on the segment asks for _rlx._tcp. Runs until killed.

usage: flood.py IP K PERIOD_S BOGUS_PREFIX

BOGUS_PREFIX is the first two octets of the addresses claimed (e.g. 10.7),
spread over BOGUS_PREFIX.200.0 - BOGUS_PREFIX.239.255. Prints "ready" after
the first full round. Runs only inside a lab namespace.
"""
import select
import socket
import sys
import time

from zeroconf import DNSAddress, DNSOutgoing, DNSPointer, DNSService, DNSText, const

ip, k, period, prefix = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
TYPE = "_rlx._tcp.local."
PER_PACKET = 8

sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(ip))
sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
sock.bind((ip, 0))


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


def send_all():
    for p in packets:
        sock.sendto(p, ("224.0.0.251", 5353))


send_all()
print("ready %d packets" % len(packets), flush=True)
last = next_periodic = time.monotonic()
next_periodic += period
while True:
    r, _, _ = select.select([rx], [], [], max(0.0, next_periodic - time.monotonic()))
    now = time.monotonic()
    if r:
        data, _ = rx.recvfrom(9000)
        # A query (QR bit clear) that mentions _rlx._tcp.
        is_query = len(data) > 12 and not data[2] & 0x80
        if is_query and b"\x04_rlx\x04_tcp" in data and now - last >= 0.1:
            send_all()
            last = now
    if now >= next_periodic:
        send_all()
        last = now
        next_periodic = now + period
