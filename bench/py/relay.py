#!/usr/bin/python3
"""The stranger of the relay case (the lab case of tests/trust/relay.rs):
learns a real agent's TXT over mDNS, relays its own agent port (6184, the
one the copied TXT names) to the agent's byte for byte, and announces
INSTANCE with that TXT at its own address. It holds no key. Prints "relaying" once announced.
Runs until killed, only inside a lab namespace.

usage: relay.py MY_IP AGENT_INSTANCE AGENT_IP INSTANCE

python-zeroconf 0.47 (Debian 12) writes the NSEC records it adds to its
answers with a 2-byte window number and length (RFC 4034 section 4.1.2 has
one byte each), which a strict DNS parser refuses along with the whole
reply; the script writes them correctly (as tests/trust/admission.rs does).
"""
import socket
import sys
import threading
import time

import zeroconf._dns
from zeroconf import IPVersion, ServiceInfo, Zeroconf


def nsec_write(self, out):
    bitmap, octets = bytearray(32), 0
    for t in self.rdtypes:
        if t <= 255:
            bitmap[t // 8] |= 0x80 >> (t % 8)
            octets = max(octets, t // 8 + 1)
    out.write_name(self.next_name)
    out._write_byte(0)
    out._write_byte(octets)
    out.write_string(bytes(bitmap[:octets]))


zeroconf._dns.DNSNsec.write = nsec_write
my_ip, agent_instance, agent_ip, instance = sys.argv[1:5]
AGENT_PORT = 6184  # the agents' own port: the handshake the relay passes on
zc = Zeroconf(interfaces=[my_ip], ip_version=IPVersion.V4Only)
deadline = time.monotonic() + 20
info = None
while time.monotonic() < deadline and not (info and info.text):
    info = zc.get_service_info("_rlx._tcp.local.", agent_instance + "._rlx._tcp.local.", timeout=3000)
assert info is not None and info.text, "no TXT for " + agent_instance


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def relay(client):
    try:
        upstream = socket.create_connection((agent_ip, AGENT_PORT), timeout=5)
    except OSError:
        client.close()
        return
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join(10)
    client.close()
    upstream.close()


srv = socket.create_server((my_ip, AGENT_PORT), backlog=64)


def accept():
    while True:
        c, _ = srv.accept()
        threading.Thread(target=relay, args=(c,), daemon=True).start()


threading.Thread(target=accept, daemon=True).start()
zc.register_service(ServiceInfo("_rlx._tcp.local.", instance + "._rlx._tcp.local.", port=9100,
                                addresses=[socket.inet_aton(my_ip)], server=instance + ".local.",
                                properties=info.text))
print("relaying", len(info.text), "bytes of TXT", flush=True)
threading.Event().wait()
