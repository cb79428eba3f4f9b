"""genscope's own CPU during a generation, bottom-up: the shared part of python/bench/instrument.py
and bench/peers_overhead.py.

- TimedInstrumentation: instrument() whose every wrapper (text encoders, denoisers, scheduler,
  other models, VAE: whatever Instrumentation._install wraps) is timed with the calling
  thread's CPU clock, minus the wrapped original.
- instrumented(monitor, pipe, generate): start_run + instrument + the generation + finish,
  returning the generation's result and genscope's CPU on the calling thread (run start and
  finish, instrument enter/exit, every hook's work).
- ThreadCpu: the CPU of the threads a block adds to the process (genscope's sampler, the
  finished run's writer, the tensor-analysis pool), as the process CPU minus the CPU of the
  threads present before (the caller's, torch's pool): the caller's from its CPU clock, the
  others' from /proc/self/task/<tid>/schedstat (nanoseconds), so torch's own threads are not
  counted and threads that exit inside the block (the analysis pool) are.
"""

import os
import threading
import time

import genscope.torch as gt


class TimedInstrumentation(gt.Instrumentation):
    """instrument() whose wrappers are timed: each wrapper's work on the calling thread's CPU
    clock, minus the original it wraps (also timed), summed in ``spent_ns``. Wrapping the
    ``around`` callables that Instrumentation._wrap / _wrap_forward install covers every hook,
    whatever its arguments; nested hooked calls (a VAE's encode inside decode) are counted once.
    The timing itself (four clock reads per hooked call, ~0.1 us each) is counted too."""

    spent_ns = 0

    def _wrap(self, obj, attr, around):
        super()._wrap(obj, attr, self._timed(around))

    def _wrap_forward(self, module, around):
        super()._wrap_forward(module, self._timed(around))

    @staticmethod
    def _timed(around):
        def untimed(original):
            def call(*a, **k):
                t0 = time.thread_time_ns()
                try:
                    return original(*a, **k)
                finally:
                    TimedInstrumentation.spent_ns -= time.thread_time_ns() - t0
            return call

        def timed(original, *a, **k):
            t0 = time.thread_time_ns()
            try:
                return around(untimed(original), *a, **k)
            finally:
                TimedInstrumentation.spent_ns += time.thread_time_ns() - t0
        return timed


def instrumented(monitor, pipe, generate, **run_labels):
    """generate() under a run started on monitor and TimedInstrumentation(pipe, run):
    (generate's result, genscope's CPU on this thread in ns)."""
    TimedInstrumentation.spent_ns = 0
    t0 = time.thread_time_ns()
    run = monitor.start_run(**run_labels)
    inst = TimedInstrumentation(pipe, run)
    inst.__enter__()
    t1 = time.thread_time_ns()
    try:
        result = generate()
    finally:
        t2 = time.thread_time_ns()
        inst.__exit__(None, None, None)
        run.finish()
        t3 = time.thread_time_ns()
    if inst.hook_errors:
        raise RuntimeError(f"genscope hooks failed {inst.hook_errors} times")
    return result, (t1 - t0) + (t3 - t2) + TimedInstrumentation.spent_ns


def _task_cpu_ns(tid):
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            return int(f.read().split()[0])
    except OSError:  # exited
        return None


class ThreadCpu:
    """CPU (ns) of the threads started after construction, over each measured block:

        threads = ThreadCpu()            # after the threads to exclude exist (warm-up)
        threads.begin(); ...; added_ns = threads.end()

    A thread present at construction that exits later makes end() raise (its CPU could not be
    told apart)."""

    def __init__(self):
        self.caller = threading.get_native_id()
        self.known = sorted(int(t) for t in os.listdir("/proc/self/task")
                            if int(t) != self.caller)

    def _known_ns(self):
        # The caller's own schedstat lags its clock until the next scheduler tick (up to
        # milliseconds); its CPU clock does not.
        total = time.thread_time_ns()
        for tid in self.known:
            ns = _task_cpu_ns(tid)
            if ns is None:
                raise RuntimeError(f"thread {tid} present at the start exited")
            total += ns
        return total

    def begin(self):
        assert threading.get_native_id() == self.caller, "ThreadCpu used from another thread"
        self._known0 = self._known_ns()
        self._process0 = time.process_time_ns()

    def end(self):
        process = time.process_time_ns() - self._process0
        return process - (self._known_ns() - self._known0)
