"""sdcpp_drive.py: one txt2img generation through stable-diffusion.cpp's Python binding
(stable-diffusion-cpp-python, tests/peers/requirements-sdcpp.txt), printing what the library
logs the way sd-cli does, for tests/peers/sdcpp_run.sh:

    sdcpp_drive.py -m MODEL -p PROMPT [-W 64] [-H 64] [--steps 4] [-s 42] [-t 2]
                   [--sampling-method euler] [--lora-model-dir DIR] -o OUT.png

The library hands every log line ("file.cpp:123  - message\\n") to a callback with its level.
The binding's own callback prints the bare line to stderr; this one prints it as sd-cli's
log_print (examples/common/log.cpp) does: "[%-5s] " and the line unchanged, ERROR to stderr and
the rest to stdout, DEBUG left out. The progress bar is the library's own (no progress callback
is set, so src/util.cpp prints it to stdout). The driver's own lines (the saved image, a
failure) are in the same format, as sd-cli's are. Exits 1 when the model cannot be loaded or
the generation fails, as sd-cli does.
"""
import argparse
import ctypes
import inspect
import os
import sys

import stable_diffusion_cpp as sdcpp

LEVELS = {0: "DEBUG", 1: "INFO", 2: "WARN", 3: "ERROR"}


def emit(level, text):
    if level == 0:
        return
    out = sys.stderr if level == 3 else sys.stdout
    out.write(f"[{LEVELS.get(level, '?????'):<5}] {text}")
    out.flush()


@sdcpp.sd_log_callback
def on_log(level, text, data):
    emit(level, text.decode("utf-8", errors="replace"))


def log(level, message):
    line = inspect.currentframe().f_back.f_lineno
    emit(level, f"sdcpp_drive.py:{line:<4d} - {message}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-p", "--prompt", required=True)
    ap.add_argument("-W", "--width", type=int, default=64)
    ap.add_argument("-H", "--height", type=int, default=64)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("-s", "--seed", type=int, default=42)
    ap.add_argument("-t", "--threads", type=int, default=-1)
    ap.add_argument("--sampling-method", default="euler")
    ap.add_argument("--lora-model-dir", default="")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    # after the binding's import, which set its own callback
    sdcpp.sd_set_log_callback(on_log, ctypes.c_void_p(0))
    try:
        sd = sdcpp.StableDiffusion(model_path=a.model, lora_model_dir=a.lora_model_dir,
                                   n_threads=a.threads, verbose=True)
        failed = not sd._model.model  # noqa: SLF001 (see below)
    except ValueError as e:
        log(1, f"new_sd_ctx_t failed ({e})")
        return 1
    if failed:
        # The binding (0.4.7) checks new_sd_ctx's result with `is None`, which a NULL ctypes
        # pointer is not, and its clean-up would free that NULL context: say what sd-cli says
        # and leave at once, with sd-cli's status.
        log(1, "new_sd_ctx_t failed")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    images = sd.generate_image(prompt=a.prompt, width=a.width, height=a.height, sample_steps=a.steps,
                               seed=a.seed, sample_method=a.sampling_method)
    if not images:
        log(3, "generate failed")
        return 1
    try:
        images[0].save(a.output)
        ok = True
    except OSError:
        ok = False
    log(1, f"save result image 0 to '{a.output}' ({'success' if ok else 'failure'})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
