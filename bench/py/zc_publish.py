#!/usr/bin/python3
"""Stand-in rlx agent: publish one _rlx._tcp service with python-zeroconf and
answer the rlx handshake (docs/protocol.md) with fixed caps.

usage: zc_publish.py NAME IP PORT CAPS_JSON TXT_JSON

TXT_JSON is a list of [key, value] pairs in wire order (txtvers first), as
rlx_proto::txt::encode produced them. Prints "ready" once the service is
registered (probing and announcing done). Runs only inside a lab namespace.
"""
import json
import signal
import socket
import sys
import threading

from zeroconf import IPVersion, ServiceInfo, Zeroconf

name, ip, port, caps_path, txt_path = sys.argv[1:6]
port = int(port)
with open(caps_path) as f:
    caps = json.dumps(json.load(f), separators=(",", ":"))
with open(txt_path) as f:
    props = {k.encode(): v.encode() for k, v in json.load(f)}

srv = socket.create_server((ip, port), backlog=256)


def answer(conn):
    with conn:
        conn.settimeout(2)
        try:
            line = conn.makefile("rb").readline(1024)
            nonce = bytes.fromhex(json.loads(line)["nonce"])
        except Exception:
            return
        reply = '{"rlx":"caps","v":1,"nonce":"%s","caps":%s}\n' % (nonce.hex(), caps)
        try:
            conn.sendall(reply.encode())
        except OSError:
            pass


def serve():
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=answer, args=(conn,), daemon=True).start()


threading.Thread(target=serve, daemon=True).start()
zc = Zeroconf(interfaces=[ip], ip_version=IPVersion.V4Only)
info = ServiceInfo(
    "_rlx._tcp.local.",
    f"{name}._rlx._tcp.local.",
    addresses=[socket.inet_aton(ip)],
    port=port,
    properties=props,
    server=f"{name}.local.",
)
zc.register_service(info)
print("ready", flush=True)
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
signal.signal(signal.SIGINT, lambda *_: stop.set())
while not stop.wait(1):
    pass
zc.unregister_service(info)
zc.close()
