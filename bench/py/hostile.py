#!/usr/bin/python3
"""Strangers on the worker port, for the trust figures: each MODE answers the
rlx handshake (docs/protocol.md) wrongly in one way, or, for `right`, as a
real agent holding the key would.

usage: hostile.py MODE IP PORT CAPS_JSON [KEY_FILE]

Impostors (must never be admitted when the coordinator has a key):
  plain     accept, then close without a word
  noproof   valid caps, no proof (an agent without the key)
  wrongkey  valid caps, proof under another key
  replay    a reply captured for another nonce, played back verbatim
  replayfix the captured reply with its nonce rewritten to ours
Malformed input (must never crash the coordinator):
  silent    accept and say nothing until the client gives up
  garbage   a line of random bytes
  oversized 10 MB with no line end
  badjson   a truncated JSON line
  absurd    caps claiming 1,000,000 cores and 10^18 bytes of RAM
  nan       caps with NaN GFLOP/s
  wrongver  a reply in handshake version 99
  slowloris the reply one byte every 300 ms
Control:
  right     a correct reply, proved with the key (must be admitted)
Runs only inside a lab namespace.
"""
import hashlib
import hmac
import json
import os
import socket
import struct
import sys
import threading
import time

mode, ip, port, caps_path = sys.argv[1:5]
key = None
if len(sys.argv) > 5:
    with open(sys.argv[5]) as f:
        key = next(bytes.fromhex(l.split("#")[0].strip()) for l in f if l.split("#")[0].strip())
with open(caps_path) as f:
    caps_obj = json.load(f)
caps = json.dumps(caps_obj, separators=(",", ":"))
node_id = caps_obj.get("id", "")


def proof(k, nonce, caps_bytes):
    i = node_id.encode()
    msg = (b"rlx-handshake-v1" + nonce + struct.pack(">I", len(i)) + i
           + struct.pack(">I", len(caps_bytes)) + caps_bytes)
    return hmac.new(k, msg, hashlib.sha256).hexdigest()


def lp(b):
    return struct.pack(">I", len(b)) + b


def proof_v2(k, nonce, caps_bytes, local, peer):
    """The version 2 proof, bound to the connection (docs/protocol.md)."""
    msg = (b"rlx-handshake-v2" + nonce + lp(node_id.encode()) + lp(caps_bytes)
           + lp(local.encode()) + lp(peer.encode()) + struct.pack(">I", 0))
    return hmac.new(k, msg, hashlib.sha256).hexdigest()


def endpoint(sockname):
    host, port = sockname[0], sockname[1]
    host = host.removeprefix("::ffff:")
    return ("[%s]:%d" if ":" in host else "%s:%d") % (host, port)


def right_reply(conn, nonce):
    local, peer = endpoint(conn.getsockname()), endpoint(conn.getpeername())
    r = '{"rlx":"caps","v":2,"nonce":"%s","caps":%s,"local":"%s","peer":"%s"' % (
        nonce.hex(), caps, local, peer)
    if key:
        r += ',"proof":"%s"' % proof_v2(key, nonce, caps.encode(), local, peer)
    return (r + "}\n").encode()


def reply(nonce_hex, caps_text, prf=None, v=1):
    r = '{"rlx":"caps","v":%d,"nonce":"%s","caps":%s' % (v, nonce_hex, caps_text)
    if prf:
        r += ',"proof":"%s"' % prf
    return (r + "}\n").encode()


CAPTURED_NONCE = bytes(range(32))


def answer(conn):
    with conn:
        conn.settimeout(5)
        if mode == "plain":
            return
        try:
            line = conn.makefile("rb").readline(1024)
            nonce = bytes.fromhex(json.loads(line)["nonce"])
        except Exception:
            return
        if mode == "silent":
            time.sleep(5)
            return
        out = b""
        if mode == "right":
            out = right_reply(conn, nonce)
        elif mode == "noproof":
            out = reply(nonce.hex(), caps)
        elif mode == "wrongkey":
            out = reply(nonce.hex(), caps, proof(os.urandom(32), nonce, caps.encode()))
        elif mode == "replay":
            out = reply(CAPTURED_NONCE.hex(), caps, proof(key, CAPTURED_NONCE, caps.encode()))
        elif mode == "replayfix":
            out = reply(nonce.hex(), caps, proof(key, CAPTURED_NONCE, caps.encode()))
        elif mode == "garbage":
            out = os.urandom(512).replace(b"\n", b"x") + b"\n"
        elif mode == "oversized":
            try:
                conn.sendall(b"A" * (10 << 20))
            except OSError:
                pass
            return
        elif mode == "badjson":
            out = b'{"rlx":"caps","v":1,"nonce":"' + nonce.hex().encode() + b'","caps":{"cores":\n'
        elif mode == "absurd":
            bad = dict(caps_obj, cores=1000000, ram_total=10**18, ram_avail=10**18)
            out = reply(nonce.hex(), json.dumps(bad, separators=(",", ":")))
        elif mode == "nan":
            out = reply(nonce.hex(), caps.replace('"gflops":0.0', '"gflops":NaN', 1))
        elif mode == "wrongver":
            out = reply(nonce.hex(), caps, v=99)
        elif mode == "slowloris":
            for b in reply(nonce.hex(), caps):
                try:
                    conn.sendall(bytes([b]))
                except OSError:
                    return
                time.sleep(0.3)
            return
        try:
            conn.sendall(out)
        except OSError:
            pass


srv = socket.create_server((ip, int(port)), backlog=256)
print("ready", flush=True)
while True:
    c, _ = srv.accept()
    threading.Thread(target=answer, args=(c,), daemon=True).start()
