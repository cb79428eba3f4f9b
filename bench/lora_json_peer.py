#!/usr/bin/python3
"""Peer for bench/lora_bench.cpp: Python's json.loads of the safetensors headers of the
same LoRA and base files (the least any Python inspector must do). Prints the best time
per iteration in seconds.

usage: lora_json_peer.py LORA BASE [ITERATIONS]
"""
import json
import struct
import sys
import time


def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return f.read(n)


def main():
    lora, base = header(sys.argv[1]), header(sys.argv[2])
    iterations = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    best = float("inf")
    for _ in range(iterations):
        t0 = time.perf_counter()
        a = json.loads(lora)
        b = json.loads(base)
        best = min(best, time.perf_counter() - t0)
        assert a and b
    print(f"{best:.9f}")


if __name__ == "__main__":
    main()
