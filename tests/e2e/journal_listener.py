#!/usr/bin/env python3
"""A stand-in for systemd-journald's native socket, for the --log journal tests.

Usage: journal_listener.py SOCKET OUT. Binds an AF_UNIX datagram socket at SOCKET and appends
each entry it receives to OUT as one JSON object per line (field name -> value). Accepts both
forms of https://systemd.io/JOURNAL_NATIVE_PROTOCOL/: NAME=value lines and the binary form
(NAME, newline, 64-bit little-endian length, value, newline), in the datagram itself or in a
memfd passed with SCM_RIGHTS. A malformed entry is written as {"_MALFORMED": "..."}, so a test
sees it. Runs until SIGTERM.
"""
import array
import json
import os
import signal
import socket
import struct
import sys


def parse(data):
    fields = {}
    i = 0
    while i < len(data):
        nl = data.index(b"\n", i)
        line = data[i:nl]
        if b"=" in line:
            name, value = line.split(b"=", 1)
            i = nl + 1
        else:
            name = line
            (size,) = struct.unpack_from("<Q", data, nl + 1)
            start = nl + 1 + 8
            value = data[start:start + size]
            if data[start + size:start + size + 1] != b"\n":
                raise ValueError("binary field %r not followed by a newline" % name)
            i = start + size + 1
        fields[name.decode()] = value.decode("utf-8", "replace")
    return fields


def main():
    path, out = sys.argv[1], sys.argv[2]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    with open(out, "a", buffering=1) as sink:
        while True:
            data, ancdata, _, _ = sock.recvmsg(1 << 20, socket.CMSG_SPACE(4 * 4))
            fds = array.array("i")
            for level, kind, payload in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
            try:
                if fds:
                    if data:
                        raise ValueError("a datagram with both a payload and a descriptor")
                    os.lseek(fds[0], 0, os.SEEK_SET)
                    with os.fdopen(fds[0], "rb") as f:
                        data = f.read()
                    fields = parse(data)
                    fields["_VIA_MEMFD"] = "1"
                else:
                    fields = parse(data)
            except (ValueError, struct.error) as e:
                fields = {"_MALFORMED": str(e)}
            sink.write(json.dumps(fields) + "\n")


if __name__ == "__main__":
    main()
