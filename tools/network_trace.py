"""What a process tried to reach, read from an ``strace -f`` log.

``traced(argv, log)`` is ``argv`` prefixed with the strace invocation that records every
``connect``, ``sendto`` and ``sendmsg`` (and ``openat``, for the telemetry store) of the
process and its children. ``stray(log_text)`` lists the lines that leave loopback or prepare
to: an IPv4 or IPv6 destination outside 127.0.0.0/8 and ::1, anything sent to port 53 (a
DNS query, even to a loopback resolver stub), a connection to the name-service cache daemon
(a host lookup), and onnxruntime's telemetry event store being opened (events queued there
are uploaded to a Microsoft host). Native code (onnxruntime's HTTP client) bypasses Python's
``socket`` module, which is why this reads system calls rather than patching ``socket``.
"""

from __future__ import annotations

import ipaddress
import re
import shutil
from pathlib import Path

STRACE = shutil.which("strace")
_CALL = re.compile(r"\b(connect|sendto|sendmsg)\(")
_INET4 = re.compile(r'inet_addr\("([^"]+)"\)')
_INET6 = re.compile(r'inet_pton\(AF_INET6, "([^"]+)"')
_PORT = re.compile(r"sin6?_port=htons\((\d+)\)")
TELEMETRY_STORE = "DeveloperTools/.onnxruntime"


def traced(argv: list[str], log: Path) -> list[str]:
    if STRACE is None:
        raise RuntimeError("strace is not installed")
    return [STRACE, "-f", "-qq", "-e", "trace=connect,sendto,sendmsg,openat", "-o", str(log), *argv]


def _loopback(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def stray(log_text: str) -> list[str]:
    """The lines of an strace log that reach (or prepare to reach) beyond loopback."""
    found = []
    for line in log_text.splitlines():
        if TELEMETRY_STORE in line:
            found.append(line)
            continue
        if not _CALL.search(line):
            continue
        if "nscd" in line:
            found.append(line)
            continue
        port = _PORT.search(line)
        if port and port.group(1) == "53":
            found.append(line)
            continue
        addresses = _INET4.findall(line) + _INET6.findall(line)
        if any(not _loopback(a) for a in addresses):
            found.append(line)
    return found
