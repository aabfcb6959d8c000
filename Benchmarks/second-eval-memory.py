#!/usr/bin/env python3
"""What a second `fanout eval` of the same snapshot adds to memory.

Issue 39's target: with the snapshot in the index cache, a second eval
running beside the first adds at most 30% of the first's resident memory
(the compiled index is mapped, so its pages are shared).

Usage: second-eval-memory.py FANOUT SNAPSHOT TRAFFIC [ROUNDS]

Fills the cache (a private one, in a temporary folder), then per round runs
one eval alone, sampling its resident memory (Rss) every 20 ms, and two
together, sampling the sum of their proportional set sizes (Pss: a shared
page counts once in all). Prints each round's peaks and the share the
second adds: (peak of the summed Pss - peak Rss alone) / peak Rss alone.
Linux only (/proc/PID/smaps_rollup).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time


def field_kib(pid, name):
    """A field of /proc/PID/smaps_rollup in KiB, or 0 once the process is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith(name + ":"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0


def run(fanout, snapshot, traffic, cache, outs, field):
    """Runs one eval per folder in `outs` together; the peak of the sum of `field`."""
    processes = [
        subprocess.Popen(
            [fanout, "eval", "--snapshot", snapshot, "--messages", traffic, "--out", out,
             "--index-cache", cache, "--threads", "2", "--overwrite"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for out in outs
    ]
    peak = 0
    while any(p.poll() is None for p in processes):
        peak = max(peak, sum(field_kib(p.pid, field) for p in processes))
        time.sleep(0.02)
    for p in processes:
        if p.returncode != 0:
            sys.exit(f"fanout eval failed ({p.returncode}): {p.stderr.read().decode()}")
    return peak


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    fanout, snapshot, traffic = sys.argv[1:4]
    rounds = int(sys.argv[4]) if len(sys.argv) == 5 else 3
    work = tempfile.mkdtemp(prefix="fanout-second-eval-")
    try:
        cache = os.path.join(work, "cache")
        outs = [os.path.join(work, "a"), os.path.join(work, "b")]
        run(fanout, snapshot, traffic, cache, outs[:1], "Rss")  # fills the cache
        for r in range(rounds):
            alone = run(fanout, snapshot, traffic, cache, outs[:1], "Rss")
            together = run(fanout, snapshot, traffic, cache, outs, "Pss")
            added = (together - alone) / alone
            print(f"round {r + 1}: one alone {alone / 1024:.0f} MiB Rss, two together "
                  f"{together / 1024:.0f} MiB Pss: the second adds {added:.0%}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
