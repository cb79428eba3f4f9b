#!/usr/bin/python3
"""Mutation fuzzing of the nvidia-smi parser (tests/gpu/nvidia_smi.py), the Python
counterpart of the libFuzzer targets in tests/fuzz/: each input is a recorded output from
tests/fixtures/nvidia_smi/ with random byte-level and token-level mutations; the parser must
return rows or raise NvidiaSmiError, nothing else.

    tests/gpu/nvidia_smi_fuzz.py [SECONDS]        (scripts/fuzz runs it as "nvidia_smi")

test_nvidia_smi.py runs a fixed-seed slice of it in the fast suite.
"""

import os
import random
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import nvidia_smi  # noqa: E402
from context import APPS_QUERY, GPU_QUERY  # noqa: E402

TOKENS = ["[N/A]", "[Not Supported]", " MiB", " %", " W", " MHz", ", ", ",", "\n", "\r",
          "-1", "nan", "inf", "1e309", "0x10", "[", "]", " [MiB]", "No running processes found",
          "\x00", "\u00a0", "9" * 40, "", " "]


def seeds(fixtures):
    out = []
    for base, _, files in os.walk(fixtures):
        for name in sorted(files):
            with open(os.path.join(base, name), encoding="utf-8", errors="replace") as f:
                out.append(f.read())
    return out


def mutate(text, rng):
    for _ in range(rng.randint(1, 4)):
        choice = rng.random()
        at = rng.randint(0, len(text))
        if choice < 0.3 and text:
            end = min(len(text), at + rng.randint(1, 8))
            text = text[:at] + text[end:]
        elif choice < 0.6:
            text = text[:at] + rng.choice(TOKENS) + text[at:]
        elif choice < 0.8 and text:
            text = text[:at] + chr(rng.randint(0, 0x2FF)) + text[at + 1:]
        else:
            lines = text.split("\n")
            rng.shuffle(lines)
            text = "\n".join(lines)
    return text


def fuzz(fixtures, iterations=None, seconds=None, seed=0):
    """Runs mutations; returns {"parsed": n, "errors": n, "other": [(input, traceback)]}."""
    rng = random.Random(seed)
    corpus = seeds(fixtures)
    result = {"parsed": 0, "errors": 0, "other": []}
    deadline = time.monotonic() + seconds if seconds else None
    done = 0
    while (iterations is None or done < iterations) and (deadline is None or
                                                        time.monotonic() < deadline):
        text = mutate(rng.choice(corpus), rng)
        parse = rng.choice([lambda t: nvidia_smi.parse_gpus(t, GPU_QUERY),
                            lambda t: nvidia_smi.parse_apps(t, APPS_QUERY)])
        try:
            parse(text)
            result["parsed"] += 1
        except nvidia_smi.NvidiaSmiError:
            result["errors"] += 1
        except Exception:
            result["other"].append((text, traceback.format_exc()))
        done += 1
    return result


def main(argv):
    seconds = float(argv[0]) if argv else 60.0
    fixtures = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "fixtures",
                            "nvidia_smi")
    result = fuzz(fixtures, seconds=seconds, seed=int(time.time()))
    total = result["parsed"] + result["errors"] + len(result["other"])
    print(f"nvidia_smi: {total} inputs in {seconds:g} s: {result['parsed']} parsed, "
          f"{result['errors']} named errors, {len(result['other'])} other exceptions")
    for text, tb in result["other"][:5]:
        print(f"--- input {text!r}\n{tb}")
    return 1 if result["other"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
