"""The VM's own stalls, beside a benchmark (`bench_live`): on one CPU, nap 1 ms at a time until
SIGTERM, then print the longest oversleep in ms.

A process that only sleeps wakes on time unless its CPU was taken from the whole VM (the host
runs other VMs on these cores): a stall that long can happen to anything on that CPU in the same
minutes. Standard library only, so starting one costs the benchmark nothing it measures.
"""

from __future__ import annotations

import os
import signal
import sys
import time


def nap_until_stopped(cpu: int) -> float:
    os.sched_setaffinity(0, {cpu})
    stopped: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stopped.append(1))
    longest = 0.0
    while not stopped:
        started = time.perf_counter()
        time.sleep(0.001)
        longest = max(longest, (time.perf_counter() - started - 0.001) * 1000)
    return longest


if __name__ == "__main__":
    print(round(nap_until_stopped(int(sys.argv[1])), 2), flush=True)
