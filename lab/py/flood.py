"""A third-party announcer gone wild, written with python-zeroconf's
message classes: answers every query for _rlx._tcp (at most every 100 ms;
legacy one-shot queries by unicast with their id, as a real responder does),
and re-sends everything every 0.5 s unasked, with N bogus instances (PTR,
SRV, TXT, A) in packets of 8. The addresses it claims are on the lab subnet,
where nobody lives. Bounded: exits after DURATION s. For the flood tests of
trust and watch; run inside a lab host only (it sends multicast).

usage: flood.py IP N DURATION_S PREFIX (e.g. 10.7)
"""
import select, socket, sys, time
from zeroconf import DNSAddress, DNSOutgoing, DNSPointer, DNSService, DNSText, const
ip, n, duration, prefix = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
T = "_rlx._tcp.local."
def txt(i):
    pairs = [b"txtvers=1", b"id=%016x" % (0xF100D00000000000 + i), b"cores=64",
             b"ram=1099511627776", b"dev0=cuda,85899345920,0,1,0,Bogus H100"]
    return b"".join(bytes([len(p)]) + p for p in pairs)
packets = []
for start in range(0, n, 8):
    out = DNSOutgoing(const._FLAGS_QR_RESPONSE | const._FLAGS_AA)
    for i in range(start, min(n, start + 8)):
        name, host = "bogus-%d.%s" % (i, T), "bogus-%d.local." % i
        addr = "%s.%d.%d" % (prefix, 200 + (i // 250) % 50, 1 + i % 250)
        out.add_answer_at_time(DNSPointer(T, const._TYPE_PTR, const._CLASS_IN, 4500, name), 0)
        out.add_answer_at_time(DNSService(name, const._TYPE_SRV, const._CLASS_IN | const._CLASS_UNIQUE, 120, 0, 0, 9100, host), 0)
        out.add_answer_at_time(DNSText(name, const._TYPE_TXT, const._CLASS_IN | const._CLASS_UNIQUE, 4500, txt(i)), 0)
        out.add_answer_at_time(DNSAddress(host, const._TYPE_A, const._CLASS_IN | const._CLASS_UNIQUE, 120, socket.inet_aton(addr)), 0)
    packets.extend(out.packets())
# One socket on port 5353 for both directions: receivers ignore mDNS
# responses from any other source port (RFC 6762 section 11).
rx = tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
tx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
tx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(ip))
tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
tx.bind(("0.0.0.0", 5353))
tx.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton("224.0.0.251") + socket.inet_aton(ip))
sent = 0
def send_all(to=("224.0.0.251", 5353), qid=b"\0\0"):
    global sent
    for p in packets:
        tx.sendto(qid + p[2:], to)
        sent += 1
send_all()
print("flooding %d instances in %d packets" % (n, len(packets)), flush=True)
end = time.monotonic() + duration
last, nextp, rounds = 0.0, time.monotonic() + 0.5, 0
while time.monotonic() < end:
    r, _, _ = select.select([rx], [], [], max(0.0, min(nextp, end) - time.monotonic()))
    now = time.monotonic()
    if r:
        data, src = rx.recvfrom(9000)
        if len(data) > 12 and not data[2] & 0x80 and b"\x04_rlx\x04_tcp" in data and now - last >= 0.1:
            if src[1] != 5353:
                # A legacy one-shot query (RFC 6762 6.7): unicast, echoing its id.
                send_all(src, data[:2])
            else:
                send_all()
            last = now
    if now >= nextp:
        send_all()
        last, nextp, rounds = now, now + 0.5, rounds + 1
        print("round", rounds, flush=True)
print("sent %d packets" % sent, flush=True)
