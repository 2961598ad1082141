#!/usr/bin/python3
"""Browse a DNS-SD service type with python-zeroconf (a third-party mDNS
stack) and print one JSON object per line for every event, so that the
announce tests can check what a real browser sees.

Run inside a test network namespace only (it sends multicast):

    ip netns exec NS /usr/bin/python3 zc_browse.py [_rlx._tcp.local.]

Lines: {"event": "ready"} once browsing; {"event": "added"|"updated",
"name", "resolved", "port", "server", "addrs", "txt"} per resolution, with
"txt" the TXT strings in wire order; {"event": "removed", "name"}. Every line
carries "t", CLOCK_MONOTONIC seconds (the clock Rust's Instant uses), so the
test can time events without polling error.
"""
import json
import sys
import threading
import time

from zeroconf import ServiceBrowser, ServiceStateChange, Zeroconf

SERVICE_TYPE = sys.argv[1] if len(sys.argv) > 1 else "_rlx._tcp.local."
RESOLVE_TIMEOUT_MS = 3000

_out = threading.Lock()


def emit(**fields):
    fields["t"] = time.monotonic()
    with _out:
        print(json.dumps(fields), flush=True)


def txt_strings(raw):
    """The TXT record's strings in wire order (each is length-prefixed)."""
    out, i = [], 0
    while raw and i < len(raw):
        n = raw[i]
        out.append(raw[i + 1 : i + 1 + n].decode("utf-8", "replace"))
        i += 1 + n
    return out


def resolve(zc, service_type, name, event):
    info = zc.get_service_info(service_type, name, timeout=RESOLVE_TIMEOUT_MS)
    if info is None:
        emit(event=event, name=name, resolved=False)
        return
    emit(
        event=event,
        name=name,
        resolved=True,
        port=info.port,
        server=info.server,
        addrs=info.parsed_addresses(),
        txt=txt_strings(info.text),
    )


def on_change(zeroconf, service_type, name, state_change):
    if state_change is ServiceStateChange.Removed:
        emit(event="removed", name=name)
    else:
        # Resolving blocks; do it aside so that a removal is never delayed.
        event = state_change.name.lower()
        threading.Thread(
            target=resolve, args=(zeroconf, service_type, name, event), daemon=True
        ).start()


def main():
    zc = Zeroconf()
    ServiceBrowser(zc, SERVICE_TYPE, handlers=[on_change])
    emit(event="ready")
    try:
        while True:
            time.sleep(3600)
    finally:
        zc.close()


if __name__ == "__main__":
    main()
