#!/usr/bin/env python3
"""The other user of fault_sqlite_symlink_race.sh: until DEADLINE (epoch seconds), swaps each
NAME in DIR (a sticky world-writable directory) between a plain file of its own and a symlink to
TARGET_DIR/<target of that name>, with rename(2) so that the name is never missing. A name that
root's dblock created is root's: the rename onto it fails (sticky bit) and the name is left.

usage: symlink_racer.py DIR TARGET_DIR DEADLINE NAME=TARGET...
"""
import os
import random
import signal
import sys
import time


def main():
    directory, target_dir, deadline = sys.argv[1], sys.argv[2], float(sys.argv[3])
    pairs = [arg.split("=", 1) for arg in sys.argv[4:]]
    swaps = 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(print(swaps)))
    while time.time() < deadline:
        for name, target in pairs:
            path = os.path.join(directory, name)
            plain = path + ".plain"
            link = path + ".link"
            for make in (lambda: os.close(os.open(plain, os.O_CREAT | os.O_WRONLY, 0o666)),
                         lambda: os.symlink(os.path.join(target_dir, target), link)):
                try:
                    make()
                except OSError:
                    pass
            for swap in (plain, link):
                try:
                    os.rename(swap, path)
                    swaps += 1
                except OSError:
                    pass
                # Each state lasts a random while (up to 0.4 ms): some check of dblock's sees
                # the plain file, and the open that follows it the link.
                until = time.perf_counter() + random.random() * 0.0004
                while time.perf_counter() < until:
                    pass
    print(swaps)


if __name__ == "__main__":
    main()
