"""The legs of requests through a gateway, read from a packet capture of the loopback interface.

    tcpdump -i lo -s 400 -w legs.pcap "tcp port <gateway port> or tcp port <upstream port>" &
    python bench/gateway_support/loadgen.py --url http://127.0.0.1:<gateway port>/v1/chat/completions \\
        --model bench --rate 100 --duration 10 --stream
    python bench/gateway_support/legs.py legs.pcap --gateway <port> --upstream <port>

(tcpdump needs root or CAP_NET_RAW.) For each request, four moments on the wire: the client's
request reaches the gateway, the gateway's request leaves for the upstream, the upstream's
answer begins, the gateway's answer begins. At a rate where requests do not overlap inside
the gateway (100 RPS against a 20 ms upstream), the k-th of each belong to the same request.
Prints the p50 / p90 / p99 of each leg in ms: ``in`` (the gateway's work before the upstream
sees the request), ``upstream``, ``out`` (from the upstream's first bytes to the gateway's
first bytes: for a stream that holds nothing, its first event) and the total.
"""

from __future__ import annotations

import argparse
import struct
from pathlib import Path

_LINKTYPE_ETHERNET = 1
_LINKTYPE_LINUX_SLL = 113


def _packets(raw: bytes) -> list[tuple[float, int, int, bytes]]:
    """(time, source port, destination port, TCP payload) of every IPv4 TCP packet."""
    magic = struct.unpack("<I", raw[:4])[0]
    scale = 1e-9 if magic == 0xA1B23C4D else 1e-6  # nanosecond or microsecond timestamps
    link = struct.unpack("<I", raw[20:24])[0]
    skip = {_LINKTYPE_ETHERNET: 14, _LINKTYPE_LINUX_SLL: 16}.get(link, 4)
    out = []
    at = 24
    while at + 16 <= len(raw):
        sec, frac, size, _ = struct.unpack("<IIII", raw[at : at + 16])
        packet = raw[at + 16 : at + 16 + size]
        at += 16 + size
        ip = packet[skip:]
        if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
            continue
        tcp = ip[(ip[0] & 15) * 4 :]
        sport, dport = struct.unpack(">HH", tcp[:4])
        out.append((sec + frac * scale, sport, dport, tcp[(tcp[12] >> 4) * 4 :]))
    return out


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pcap", type=Path)
    ap.add_argument("--gateway", type=int, required=True, help="the gateway's port")
    ap.add_argument("--upstream", type=int, required=True, help="the upstream's port")
    a = ap.parse_args()
    asked, sent, answered, relayed = [], [], [], []
    for t, sport, dport, payload in _packets(a.pcap.read_bytes()):
        if dport == a.gateway and payload.startswith(b"POST"):
            asked.append(t)
        elif dport == a.upstream and payload.startswith(b"POST"):
            sent.append(t)
        elif sport == a.upstream and payload.startswith(b"HTTP/1.1"):
            answered.append(t)
        elif sport == a.gateway and payload.startswith(b"HTTP/1.1"):
            relayed.append(t)
    n = min(len(asked), len(sent), len(answered), len(relayed))
    print(f"requests: {len(asked)} in, {len(sent)} to the upstream, {len(answered)} answered, {len(relayed)} out")
    legs = {
        "in": [sent[i] - asked[i] for i in range(n)],
        "upstream": [answered[i] - sent[i] for i in range(n)],
        "out": [relayed[i] - answered[i] for i in range(n)],
        "total": [relayed[i] - asked[i] for i in range(n)],
    }
    for name, xs in legs.items():
        ms = [x * 1e3 for x in xs]
        print(f"{name:9s} p50 {_pct(ms, 0.5):7.3f}  p90 {_pct(ms, 0.9):7.3f}  p99 {_pct(ms, 0.99):7.3f} ms")


if __name__ == "__main__":
    main()
