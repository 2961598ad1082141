#!/usr/bin/python3
"""Raw mDNS packets for the responder conformance tests (RFC 6762 §8, §9),
built and parsed with python-zeroconf's wire codec, so that the tests see and
send exactly what is on the link.

Run inside a test network namespace only (it sends multicast):

    mdns_raw.py listen IFACE_ADDR
        Joins 224.0.0.251 on the interface of IFACE_ADDR and prints one JSON
        line per mDNS packet: {"t", "src", "kind": "probe"|"query"|"response",
        "questions": [[name, type]], "answers": [[name, type, ttl, rdata]]}.
        Prints {"ready": true} first.
    mdns_raw.py claim IFACE_ADDR HOST ADDR
        Another host that owns HOST: announces "HOST A ADDR" (cache-flush)
        twice, one second apart, then defends it, answering every question
        for HOST until killed. Prints {"claimed": HOST} after the first.
    mdns_raw.py ask IFACE_ADDR NAME SECONDS INTERVAL_MS
        A one-shot (legacy, RFC 6762 §6.7) querier: asks for NAME's SRV and
        TXT every INTERVAL_MS for SECONDS and prints {"started": true}, one
        JSON line per reply {"t", "srv": target, "txt": [...]}, then
        {"done": N} with N queries.
    mdns_raw.py resolve IFACE_ADDR TYPE NAME
        python-zeroconf's own resolver (ServiceInfo.request: direct SRV, TXT
        and address questions) and prints {"server", "addrs"}.

"t" is CLOCK_MONOTONIC seconds, the clock of Rust's Instant.
"""
import json
import select
import socket
import struct
import sys
import time

from zeroconf import (
    DNSAddress,
    DNSIncoming,
    DNSOutgoing,
    DNSQuestion,
    DNSService,
    DNSText,
    const,
)

GROUP = "224.0.0.251"
PORT = 5353
TYPE_NAMES = {
    const._TYPE_A: "A",
    const._TYPE_AAAA: "AAAA",
    const._TYPE_PTR: "PTR",
    const._TYPE_SRV: "SRV",
    const._TYPE_TXT: "TXT",
    const._TYPE_ANY: "ANY",
    const._TYPE_NSEC: "NSEC",
}


def emit(**fields):
    fields.setdefault("t", time.monotonic())
    print(json.dumps(fields), flush=True)


def group_socket(iface_addr):
    """A socket on port 5353 that hears the group on IFACE_ADDR's link."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("", PORT))
    mreq = socket.inet_aton(GROUP) + socket.inet_aton(iface_addr)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(iface_addr))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
    return s


def rdata(record):
    if isinstance(record, DNSAddress):
        return socket.inet_ntop(
            socket.AF_INET if len(record.address) == 4 else socket.AF_INET6, record.address
        )
    if isinstance(record, DNSService):
        return "%s:%d" % (record.server, record.port)
    if isinstance(record, DNSText):
        return txt_strings(record.text)
    return getattr(record, "alias", None)


def answers(msg):
    """The records of `msg` (a method in later python-zeroconf releases)."""
    return msg.answers() if callable(msg.answers) else msg.answers


def txt_strings(raw):
    out, i = [], 0
    while raw and i < len(raw):
        n = raw[i]
        out.append(raw[i + 1 : i + 1 + n].decode("utf-8", "replace"))
        i += 1 + n
    return out


def listen(iface_addr):
    s = group_socket(iface_addr)
    emit(ready=True)
    while True:
        data, (src, _port) = s.recvfrom(9000)
        msg = DNSIncoming(data)
        if not msg.valid:
            continue
        if msg.is_query():
            kind = "probe" if msg.num_authorities > 0 else "query"
        else:
            kind = "response"
        emit(
            src=src,
            kind=kind,
            questions=[[q.name, TYPE_NAMES.get(q.type, q.type)] for q in msg.questions],
            answers=[
                [r.name, TYPE_NAMES.get(r.type, r.type), r.ttl, rdata(r)] for r in answers(msg)
            ],
        )


def claim(iface_addr, host, addr):
    s = group_socket(iface_addr)
    record = DNSAddress(
        host, const._TYPE_A, const._CLASS_IN | const._CLASS_UNIQUE, 120, socket.inet_aton(addr)
    )

    def send():
        out = DNSOutgoing(const._FLAGS_QR_RESPONSE | const._FLAGS_AA)
        out.add_answer_at_time(record, 0)
        for packet in out.packets():
            s.sendto(packet, (GROUP, PORT))

    send()
    emit(claimed=host)
    second = time.monotonic() + 1.0
    while True:
        timeout = max(0.0, second - time.monotonic()) if second else None
        ready, _, _ = select.select([s], [], [], timeout)
        if not ready:
            send()
            second = None
            continue
        data, _ = s.recvfrom(9000)
        msg = DNSIncoming(data)
        if msg.valid and msg.is_query() and any(
            q.name.lower() == host.lower() for q in msg.questions
        ):
            send()


def ask(iface_addr, name, seconds, interval_ms):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    s.bind((iface_addr, 0))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(iface_addr))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
    end = time.monotonic() + float(seconds)
    interval = int(interval_ms) / 1000.0
    sent = 0
    next_send = time.monotonic()
    emit(started=True)
    while time.monotonic() < end:
        now = time.monotonic()
        if now >= next_send:
            out = DNSOutgoing(const._FLAGS_QR_QUERY, multicast=False, id_=sent + 1)
            out.add_question(DNSQuestion(name, const._TYPE_SRV, const._CLASS_IN))
            out.add_question(DNSQuestion(name, const._TYPE_TXT, const._CLASS_IN))
            for packet in out.packets():
                s.sendto(packet, (GROUP, PORT))
            sent += 1
            next_send = now + interval
        ready, _, _ = select.select([s], [], [], max(0.0, next_send - time.monotonic()))
        if not ready:
            continue
        data, _ = s.recvfrom(9000)
        msg = DNSIncoming(data)
        if not msg.valid or not msg.is_response():
            continue
        srv = [r for r in answers(msg) if isinstance(r, DNSService) and r.name.lower() == name.lower()]
        txt = [r for r in answers(msg) if isinstance(r, DNSText) and r.name.lower() == name.lower()]
        if srv:
            emit(srv=srv[0].server, txt=txt_strings(txt[0].text) if txt else None)
    emit(done=sent)


def resolve(iface_addr, type_, name):
    from zeroconf import IPVersion, ServiceInfo, Zeroconf

    zc = Zeroconf(interfaces=[iface_addr], ip_version=IPVersion.V4Only)
    try:
        info = ServiceInfo(type_, name)
        found = info.request(zc, 3000)
        emit(found=found, server=info.server, addrs=info.parsed_addresses())
    finally:
        zc.close()


if __name__ == "__main__":
    verb, args = sys.argv[1], sys.argv[2:]
    {"listen": listen, "claim": claim, "ask": ask, "resolve": resolve}[verb](*args)
