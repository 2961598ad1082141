"""Raw mDNS on the wire, for tests/conformance/wire.rs: hand-built queries
and a parser, with `struct` only, so that what the agent's responder puts in
its packets (the QU bit, unicast or multicast, TTLs, which addresses, when)
is seen exactly, with no library in between.

Run inside a lab host (never outside a lab namespace). Modes, each printing
JSON on stdout:

  listen --family 4|6 --iface IF --seconds S [--until probe|goodbye|aaaa:N]
      joins the mDNS group on IF and prints one line per packet received
      ({"t", "src", "msg"}), until S seconds have passed or the condition is
      met (a probe: a query with an Authority section; a goodbye: a record
      with TTL 0; aaaa:N: N responses carrying AAAA records).
  qu --src IP [--iface IF] --count N --gap-ms G
      sends N QU questions for _rlx._tcp.local. PTR to the group
      (224.0.0.251, or ff02::fb on IF when IP is IPv6) from IP:5353, G ms apart, on a socket bound to IP (so multicast packets do
      not reach it) and prints {"sent": [...], "replies": [...]}: the
      unicast replies.
  delay --src IP --agent IP --count N --gap-ms G
      sends N QM questions for _rlx._tcp.local. PTR and prints, for each,
      the time in ms until the agent's multicast answer: {"delays_ms": [...]}.
  tc --src IP --agent IP --instance NAME [--known]
      sends a truncated PTR question, then its known-answer packet (the PTR
      of NAME with --known, else empty), and prints when the agent's PTR
      answers came: {"answers_ms": [...]}.
  ask --src IP --name NAME [--qtype PTR|ANY|SRV|TXT|A|AAAA] [--id N] [--qu] [--legacy] [--seconds S]
      one question for NAME, from IP:5353 to the group (with --legacy from
      an ephemeral port, so the answers come by unicast), with query id N;
      prints {"replies": [{"ms", "src", "ttl", "unicast", "msg"}]}: every
      response read in S seconds, with its IP TTL and whether it came by
      unicast.
  goodbye --src IP --instance NAME [--to IP] [--sport P] --count N --gap-ms G
      a stranger's forged goodbye: N responses carrying only the PTR
      _rlx._tcp.local. -> NAME._rlx._tcp.local. with TTL 0 (RFC 6762 §10.1),
      G ms apart, from IP:5353 (or port P; 0: an ephemeral one), to the group
      (or by unicast to --to IP:5353 only, so that no other host hears it),
      and prints {"sent": N}.
  questions --src IP[,IP...] [--to IP] --count N --gap-ms G
      a stranger's QM questions for _rlx._tcp.local. PTR, N of them G ms
      apart, from each IP:5353 in turn to the group (or by unicast to --to
      IP:5353 only, so that no other host hears them); prints {"sent": N}.
      Several sources spread the questions over the sockets a receiver
      shares port 5353 between (the kernel picks one per source address).
  answer --src IP --instance NAME [--to IP] [--sport P] --count N --gap-ms G
      a stranger's copy of an agent's shared answer: N responses carrying
      the PTR _rlx._tcp.local. -> NAME._rlx._tcp.local. at its full 4500 s
      TTL, G ms apart, from IP:5353 (or port P; 0: an ephemeral one), to
      the group (or by unicast to --to IP:5353); prints {"sent": N}.
  records --src IP --instance NAME --copy OTHER [--phantoms K] [--at-family 4|6] [--to IP] --count N --gap-ms G
      a stranger's forged records: asks OTHER's agent (a legacy query from
      an ephemeral port, answered by unicast) for OTHER's SRV, TXT and
      address, then sends N responses, G ms apart, from IP:5353 to the
      group (or by unicast to --to IP:5353), announcing NAME (and, with K,
      the phantom instances NAME-p0 .. NAME-p(K-1) besides) with OTHER's
      TXT, an SRV to a host name of its own at OTHER's port, and an A
      record of that host at OTHER's address: the records `watch` reads
      as NAME living on OTHER's machine. Prints {"sent": N, "copied": {...}}.
"""

import argparse
import json
import socket
import struct
import sys
import time

GROUP4 = "224.0.0.251"
GROUP6 = "ff02::fb"
PORT = 5353
SERVICE = "_rlx._tcp.local."
TYPES = {1: "A", 12: "PTR", 16: "TXT", 28: "AAAA", 33: "SRV", 47: "NSEC", 255: "ANY"}


def encode_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        raw = label.encode()
        out += bytes([len(raw)]) + raw
    return out + b"\0"


def query(name, qtype, qu, ident=0):
    """A query with one question; qu sets the unicast-response bit."""
    header = struct.pack("!HHHHHH", ident, 0, 1, 0, 0, 0)
    qclass = 1 | (0x8000 if qu else 0)
    return header + encode_name(name) + struct.pack("!HH", qtype, qclass)


def known_answers_packet(instance):
    """A query with no question and one known answer (RFC 6762 §7.2): the
    PTR for instance, at its full 4500 s TTL, so it suppresses the answer."""
    rdata = encode_name(instance)
    header = struct.pack("!HHHHHH", 0, 0, 0, 1, 0, 0)
    rr = encode_name(SERVICE) + struct.pack("!HHIH", 12, 1, 4500, len(rdata)) + rdata
    return header + rr


def read_name(data, off):
    labels, jumped, end = [], False, off
    for _ in range(128):
        n = data[off]
        if n == 0:
            off += 1
            break
        if n & 0xC0 == 0xC0:
            ptr = struct.unpack("!H", data[off:off + 2])[0] & 0x3FFF
            if not jumped:
                end = off + 2
            jumped, off = True, ptr
            continue
        labels.append(data[off + 1:off + 1 + n].decode(errors="replace"))
        off += 1 + n
    return ".".join(labels) + ".", (end if jumped else off)


def read_rr(data, off):
    name, off = read_name(data, off)
    rtype, rclass, ttl, rdlen = struct.unpack("!HHIH", data[off:off + 10])
    off += 10
    rdata = data[off:off + rdlen]
    rr = {
        "name": name,
        "type": TYPES.get(rtype, str(rtype)),
        "flush": bool(rclass & 0x8000),
        "ttl": ttl,
    }
    if rtype == 1 and rdlen == 4:
        rr["addr"] = socket.inet_ntop(socket.AF_INET, rdata)
    elif rtype == 28 and rdlen == 16:
        rr["addr"] = socket.inet_ntop(socket.AF_INET6, rdata)
    elif rtype in (12, 33):
        rr["target"] = read_name(data, off + (6 if rtype == 33 else 0))[0]
        if rtype == 33:
            rr["port"] = struct.unpack("!H", rdata[4:6])[0]
    elif rtype == 16:
        rr["raw"] = rdata.hex()
    return rr, off + rdlen


def parse(data):
    ident, flags, qd, an, ns, ar = struct.unpack("!HHHHHH", data[:12])
    off, questions = 12, []
    for _ in range(qd):
        name, off = read_name(data, off)
        qtype, qclass = struct.unpack("!HH", data[off:off + 4])
        off += 4
        questions.append(
            {"name": name, "type": TYPES.get(qtype, str(qtype)), "qu": bool(qclass & 0x8000)}
        )
    sections = {}
    for key, count in (("an", an), ("ns", ns), ("ar", ar)):
        sections[key] = []
        for _ in range(count):
            rr, off = read_rr(data, off)
            sections[key].append(rr)
    return {
        "id": ident,
        "response": bool(flags & 0x8000),
        "tc": bool(flags & 0x0200),
        "qd": questions,
        **sections,
    }


def group_socket(family, iface, src=None):
    """A socket on port 5353 that receives the group's packets on iface."""
    if family == 4:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    else:
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, iface.encode())
    if family == 4:
        s.bind(("", PORT))
        local = src or "0.0.0.0"
        mreq = socket.inet_aton(GROUP4) + socket.inet_aton(local)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
        if src:
            s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(src))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
    else:
        s.bind(("::", PORT))
        index = socket.if_nametoindex(iface)
        mreq = socket.inet_pton(socket.AF_INET6, GROUP6) + struct.pack("@I", index)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP, mreq)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_LOOP, 0)
    return s


def done(until, msg, state):
    if until == "probe":
        return not msg["response"] and len(msg["ns"]) > 0
    if until == "goodbye":
        return msg["response"] and any(r["ttl"] == 0 for r in msg["an"])
    if until and until.startswith("aaaa:"):
        if msg["response"] and any(r["type"] == "AAAA" for r in msg["an"] + msg["ar"]):
            state["aaaa"] = state.get("aaaa", 0) + 1
        return state.get("aaaa", 0) >= int(until[5:])
    return False


def listen(args):
    s = group_socket(args.family, args.iface)
    end, state = time.monotonic() + args.seconds, {}
    print(json.dumps({"listening": args.iface}), flush=True)
    while time.monotonic() < end:
        s.settimeout(max(0.01, end - time.monotonic()))
        try:
            data, src = s.recvfrom(9000)
        except socket.timeout:
            break
        try:
            msg = parse(data)
        except Exception as e:  # a packet we cannot parse is reported, not hidden
            print(json.dumps({"t": time.monotonic(), "src": src[0], "error": str(e)}), flush=True)
            continue
        print(json.dumps({"t": time.monotonic(), "src": src[0], "msg": msg}), flush=True)
        if done(args.until, msg, state):
            break


def qu(args):
    if ":" in args.src:
        index = socket.if_nametoindex(args.iface)
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((args.src, PORT, 0, index))
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, index)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_LOOP, 0)
        group = (GROUP6, PORT, 0, index)
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((args.src, PORT))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(args.src))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
        group = (GROUP4, PORT)
    sent, replies = [], []
    packet = query(SERVICE, 12, qu=True)
    for i in range(args.count):
        sent.append(time.monotonic())
        s.sendto(packet, group)
        end = time.monotonic() + (args.gap_ms / 1000 if i + 1 < args.count else 1.0)
        while True:
            left = end - time.monotonic()
            if left <= 0:
                break
            s.settimeout(left)
            try:
                data, src = s.recvfrom(9000)
            except socket.timeout:
                break
            replies.append({"t": time.monotonic(), "query": i, "src": src[0], "msg": parse(data)})
    print(json.dumps({"sent": sent, "replies": replies}))


def delay(args):
    s = group_socket(4, args.iface, src=args.src)
    delays = []
    packet = query(SERVICE, 12, qu=False)
    for _ in range(args.count):
        t0 = time.monotonic()
        s.sendto(packet, (GROUP4, PORT))
        end, got = t0 + args.gap_ms / 1000, None
        while got is None and time.monotonic() < end:
            s.settimeout(max(0.01, end - time.monotonic()))
            try:
                data, src = s.recvfrom(9000)
            except socket.timeout:
                break
            if src[0] != args.agent:
                continue
            msg = parse(data)
            if msg["response"] and any(r["type"] == "PTR" and r["name"] == SERVICE for r in msg["an"]):
                got = (time.monotonic() - t0) * 1000
        delays.append(got)
        # Past the 1 s per-record multicast rate limit (RFC 6762 §6).
        time.sleep(max(0.0, t0 + args.gap_ms / 1000 - time.monotonic()))
    print(json.dumps({"delays_ms": delays}))


def tc(args):
    """A truncated query (TC bit) for the PTR, then 100 ms later its second
    packet: the known answer for --instance when --known, else an empty one.
    Prints {"answers_ms": [...]}: when the agent's PTR answers came, in ms
    after the first packet, within 2 s."""
    s = group_socket(4, args.iface, src=args.src)
    first = bytearray(query(SERVICE, 12, qu=False))
    first[2] |= 0x02  # TC
    second = known_answers_packet(args.instance) if args.known else struct.pack("!HHHHHH", 0, 0, 0, 0, 0, 0)
    t0 = time.monotonic()
    s.sendto(bytes(first), (GROUP4, PORT))
    time.sleep(0.1)
    s.sendto(second, (GROUP4, PORT))
    answers, end = [], t0 + 2.0
    while time.monotonic() < end:
        s.settimeout(max(0.01, end - time.monotonic()))
        try:
            data, src = s.recvfrom(9000)
        except socket.timeout:
            break
        if src[0] != args.agent:
            continue
        msg = parse(data)
        if msg["response"] and any(r["type"] == "PTR" and r["name"] == SERVICE for r in msg["an"]):
            answers.append((time.monotonic() - t0) * 1000)
    print(json.dumps({"answers_ms": answers}))


def goodbye_packet(instance):
    """A response (QR, AA) with one answer: the PTR for instance, TTL 0."""
    return answer_packet(instance, 0)


def send_forged(src, sport, to, packet, count, gap_ms):
    """Sends packet count times, gap_ms apart, from src:sport (0: an
    ephemeral port; src may be a comma-separated list, used in turn) to the
    IPv4 mDNS group, or by unicast to to:5353."""
    socks = []
    for a in src.split(","):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind((a, sport))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(a))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
        socks.append(s)
    dest = (to or GROUP4, PORT)
    # Paced by the schedule, not by one sleep per packet: a sleep overshoots
    # by tens of microseconds at least, so 1 ms gaps would give well under
    # 1,000 packets a second; behind schedule, packets go back to back.
    t0 = time.monotonic()
    for i in range(count):
        socks[i % len(socks)].sendto(packet, dest)
        if i + 1 < count:
            wait = t0 + (i + 1) * gap_ms / 1000 - time.monotonic()
            if wait > 0:
                time.sleep(wait)


def answer_packet(instance, ttl):
    """A response (QR, AA) with one answer: the PTR for instance."""
    rdata = encode_name(instance + "." + SERVICE)
    header = struct.pack("!HHHHHH", 0, 0x8400, 0, 1, 0, 0)
    return header + encode_name(SERVICE) + struct.pack("!HHIH", 12, 1, ttl, len(rdata)) + rdata


def questions(args):
    send_forged(args.src, PORT, args.to, query(SERVICE, 12, qu=False), args.count, args.gap_ms)
    print(json.dumps({"sent": args.count}), flush=True)


def answer(args):
    packet = answer_packet(args.instance, 4500)
    send_forged(args.src, args.sport, args.to, packet, args.count, args.gap_ms)
    print(json.dumps({"sent": args.count}), flush=True)


def goodbye(args):
    packet = goodbye_packet(args.instance)
    send_forged(args.src, args.sport, args.to, packet, args.count, args.gap_ms)
    print(json.dumps({"sent": args.count}), flush=True)


# Linux's socket options for the IP TTL and destination of what is read.
IP_TTL, IP_PKTINFO, IP_RECVTTL = 2, 8, 12


def ask(args):
    """One question, as a multicast querier (from port 5353, listening to
    the group) or a legacy one (--legacy: from an ephemeral port), with the
    query id --id; every reply with its IP TTL and whether it came by
    unicast."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    if args.legacy:
        s.bind((args.src, 0))
    else:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, args.iface.encode())
        s.bind(("", PORT))
        mreq = socket.inet_aton(GROUP4) + socket.inet_aton(args.src)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(args.src))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
    s.setsockopt(socket.IPPROTO_IP, IP_RECVTTL, 1)
    s.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
    qtype = {v: k for k, v in TYPES.items()}[args.qtype]
    s.sendto(query(args.name, qtype, args.qu, args.id), (GROUP4, PORT))
    sent = time.monotonic()
    end, replies = sent + args.seconds, []
    while time.monotonic() < end:
        s.settimeout(max(0.01, end - time.monotonic()))
        try:
            data, anc, _, src = s.recvmsg(9000, 256)
        except socket.timeout:
            break
        ttl, dst = None, None
        for level, kind, value in anc:
            if level == socket.IPPROTO_IP and kind == IP_TTL:
                ttl = struct.unpack("@i", value[:4])[0]
            if level == socket.IPPROTO_IP and kind == IP_PKTINFO:
                dst = socket.inet_ntoa(value[8:12])
        msg = parse(data)
        if not msg["response"]:
            continue
        replies.append({"ms": (time.monotonic() - sent) * 1000, "src": src[0], "ttl": ttl,
                        "unicast": dst != GROUP4, "msg": msg})
    print(json.dumps({"replies": replies}), flush=True)


def legacy_ask(src, name, qtype, seconds=2.0):
    """Asks the group for name/qtype from an ephemeral port (a legacy
    query, RFC 6762 §6.7): responders answer by unicast, to this socket.
    Returns every record of the replies."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src, 0))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(src))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
    s.settimeout(0.2)
    deadline = time.monotonic() + seconds
    records, asked = [], 0
    while time.monotonic() < deadline:
        if not records and asked < 5:
            s.sendto(query(name, qtype, False), (GROUP4, PORT))
            asked += 1
        try:
            data, _ = s.recvfrom(9000)
        except socket.timeout:
            if records:
                break
            continue
        msg = parse(data)
        records += msg["an"] + msg["ar"]
    return records


def rr_bytes(name, rtype, ttl, rdata, flush=True):
    rclass = 1 | (0x8000 if flush else 0)
    return encode_name(name) + struct.pack("!HHIH", rtype, rclass, ttl, len(rdata)) + rdata


def records(args):
    other = args.copy + "." + SERVICE
    got = legacy_ask(args.src, other, 255)
    srv = next((r for r in got if r["type"] == "SRV" and r["name"].lower() == other.lower()), None)
    txt = next((r for r in got if r["type"] == "TXT" and r["name"].lower() == other.lower()), None)
    if srv is None or txt is None:
        print(json.dumps({"error": f"no SRV/TXT for {other}", "got": got}), flush=True)
        return 1
    want = "AAAA" if args.at_family == 6 else "A"
    addr = next(
        (
            r["addr"]
            for r in got
            if r["type"] == want
            and r["name"].lower() == srv["target"].lower()
            and not r["addr"].lower().startswith("fe80")
        ),
        None,
    )
    if addr is None:
        got_a = legacy_ask(args.src, srv["target"], 28 if want == "AAAA" else 1)
        addr = next(
            (r["addr"] for r in got_a if r["type"] == want and not r["addr"].lower().startswith("fe80")),
            None,
        )
    if addr is None:
        print(json.dumps({"error": f"no address for {srv['target']}"}), flush=True)
        return 1
    names = [args.instance] + [f"{args.instance}-p{i}" for i in range(args.phantoms)]
    answers = []
    for n in names:
        full = n + "." + SERVICE
        host = "forged-" + n.replace(" ", "-") + ".local."
        answers.append(rr_bytes(SERVICE, 12, 4500, encode_name(full), flush=False))
        srv_rdata = struct.pack("!HHH", 0, 0, srv["port"]) + encode_name(host)
        answers.append(rr_bytes(full, 33, 120, srv_rdata))
        answers.append(rr_bytes(full, 16, 4500, bytes.fromhex(txt["raw"])))
        if want == "AAAA":
            answers.append(rr_bytes(host, 28, 120, socket.inet_pton(socket.AF_INET6, addr)))
        else:
            answers.append(rr_bytes(host, 1, 120, socket.inet_aton(addr)))
    packet = struct.pack("!HHHHHH", 0, 0x8400, 0, len(answers), 0, 0) + b"".join(answers)
    send_forged(args.src, PORT, args.to, packet, args.count, args.gap_ms)
    copied = {"addr": addr, "port": srv["port"], "names": names}
    print(json.dumps({"sent": args.count, "copied": copied}), flush=True)
    return 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="mode", required=True)
    a = sub.add_parser("listen")
    a.add_argument("--family", type=int, default=4)
    a.add_argument("--iface", required=True)
    a.add_argument("--seconds", type=float, required=True)
    a.add_argument("--until")
    a = sub.add_parser("qu")
    a.add_argument("--src", required=True)
    a.add_argument("--iface", default="eth0")
    a.add_argument("--count", type=int, default=1)
    a.add_argument("--gap-ms", type=int, default=200)
    a = sub.add_parser("delay")
    a.add_argument("--src", required=True)
    a.add_argument("--iface", default="eth0")
    a.add_argument("--agent", required=True)
    a.add_argument("--count", type=int, default=12)
    a.add_argument("--gap-ms", type=int, default=1100)
    a = sub.add_parser("tc")
    a.add_argument("--src", required=True)
    a.add_argument("--iface", default="eth0")
    a.add_argument("--agent", required=True)
    a.add_argument("--instance", required=True)
    a.add_argument("--known", action="store_true")
    a = sub.add_parser("ask")
    a.add_argument("--src", required=True)
    a.add_argument("--iface", default="eth0")
    a.add_argument("--name", required=True)
    a.add_argument("--qtype", default="PTR")
    a.add_argument("--id", type=int, default=0)
    a.add_argument("--qu", action="store_true")
    a.add_argument("--legacy", action="store_true")
    a.add_argument("--seconds", type=float, default=1.5)
    a = sub.add_parser("goodbye")
    a.add_argument("--src", required=True)
    a.add_argument("--instance", required=True)
    a.add_argument("--to")
    a.add_argument("--sport", type=int, default=PORT)
    a.add_argument("--count", type=int, default=2)
    a.add_argument("--gap-ms", type=int, default=250)
    a = sub.add_parser("questions")
    a.add_argument("--src", required=True)
    a.add_argument("--to")
    a.add_argument("--count", type=int, default=2)
    a.add_argument("--gap-ms", type=int, default=10)
    a = sub.add_parser("answer")
    a.add_argument("--src", required=True)
    a.add_argument("--instance", required=True)
    a.add_argument("--to")
    a.add_argument("--sport", type=int, default=PORT)
    a.add_argument("--count", type=int, default=2)
    a.add_argument("--gap-ms", type=int, default=5)
    a = sub.add_parser("records")
    a.add_argument("--src", required=True)
    a.add_argument("--instance", required=True)
    a.add_argument("--copy", required=True)
    a.add_argument("--phantoms", type=int, default=0)
    a.add_argument("--at-family", type=int, default=4, choices=[4, 6])
    a.add_argument("--to")
    a.add_argument("--count", type=int, default=2)
    a.add_argument("--gap-ms", type=int, default=250)
    args = p.parse_args()
    modes = {"listen": listen, "qu": qu, "ask": ask, "delay": delay, "tc": tc, "goodbye": goodbye, "records": records,
             "questions": questions, "answer": answer}
    return modes[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
