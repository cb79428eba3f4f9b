"""One row of the GPU check table, and the rules that decide its verdict.

Every row compares genscope's figure with an independent one (nvidia-smi, torch.cuda, a
second run) under a named rule; the rules and their tolerances are documented, with the
reason for each, in docs/gpu.md ("Checks and tolerances"):

    equal      the same value (names, UUIDs, exact allocator figures)
    within     |genscope - independent| <= tolerance
    bracket    the independent side was read just before and just after genscope's read:
               min(before, after) - tolerance <= genscope <= max(before, after) + tolerance
    mib        genscope's bytes against nvidia-smi's whole MiB, bracketed: nvidia-smi prints
               memory in MiB, so genscope's bytes / 2^20 must lie within 1 MiB of the bracket
    at_least   genscope >= independent (e.g. a plateau at least as long as it was held)

A value that is unavailable on both sides (nvidia-smi `[N/A]`, genscope null) agrees; one
side unavailable and the other not is a failure. Verdicts: PASS, FAIL, SKIP (the check did
not run, with the reason), INFO (a measurement, no verdict).
"""

import math

PASS, FAIL, SKIP, INFO = "PASS", "FAIL", "SKIP", "INFO"
MIB = 1 << 20


class Row:
    """check | figure | genscope | independent | rule | verdict | note"""

    __slots__ = ("check", "figure", "genscope", "independent", "rule", "verdict", "note")

    def __init__(self, check, figure, genscope, independent, rule, verdict, note=""):
        self.check = check
        self.figure = figure
        self.genscope = genscope
        self.independent = independent
        self.rule = rule
        self.verdict = verdict
        self.note = note

    def as_dict(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self):
        return f"Row({self.as_dict()!r})"


def render(value, unit=""):
    """A figure as the table prints it: None -> "n/a", floats without noise."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float):
        text = f"{value:.6g}" if abs(value) < 1e6 else f"{value:.0f}"
    else:
        text = str(value)
    return f"{text} {unit}".rstrip()


def _missing(value):
    return value is None or (isinstance(value, float) and math.isnan(value))


def _unavailable(check, figure, g, independent_text, rule, unit):
    """The verdict when a side is unavailable, or None when both are available."""
    g_missing = _missing(g)
    i_missing = independent_text is None
    if g_missing and i_missing:
        return Row(check, figure, "n/a", "n/a", rule, PASS, "unavailable on both sides")
    if g_missing or i_missing:
        return Row(check, figure, render(g, unit), independent_text or "n/a", rule, FAIL,
                   "unavailable on one side only")
    return None


def equal(check, figure, g, i, unit="", note=""):
    rule = "equal"
    row = _unavailable(check, figure, g, None if _missing(i) else render(i, unit), rule, unit)
    if row:
        return row
    return Row(check, figure, render(g, unit), render(i, unit), rule,
               PASS if g == i else FAIL, note)


def within(check, figure, g, i, tolerance, unit="", note=""):
    rule = f"within {render(tolerance, unit)}"
    row = _unavailable(check, figure, g, None if _missing(i) else render(i, unit), rule, unit)
    if row:
        return row
    ok = abs(g - i) <= tolerance
    return Row(check, figure, render(g, unit), render(i, unit), rule, PASS if ok else FAIL, note)


def bracket(check, figure, g, readings, tolerance, unit="", note=""):
    """`readings`: the independent values read around genscope's read (None = unavailable)."""
    rule = f"bracket ±{render(tolerance, unit)}"
    values = [r for r in readings if not _missing(r)]
    if values and len(values) != len(readings):
        return Row(check, figure, render(g, unit), "/".join(render(r, unit) for r in readings),
                   rule, FAIL, "independent side unavailable in one of its reads")
    lo, hi = (min(values), max(values)) if values else (None, None)
    independent = None if not values else (render(lo, unit) if lo == hi
                                           else f"{render(lo)}..{render(hi, unit)}")
    row = _unavailable(check, figure, g, independent, rule, unit)
    if row:
        return row
    ok = lo - tolerance <= g <= hi + tolerance
    return Row(check, figure, render(g, unit), independent, rule, PASS if ok else FAIL, note)


def mib(check, figure, g_bytes, readings_mib, note=""):
    """genscope bytes against nvidia-smi MiB readings (bracketed), within 1 MiB."""
    g = None if _missing(g_bytes) else g_bytes / MIB
    row = bracket(check, figure, g, readings_mib, 1, "MiB", note)
    if g is not None and row.genscope != "n/a":
        row.genscope = f"{g:.2f} MiB"
    row.rule = "MiB bracket ±1 MiB"
    return row


def at_least(check, figure, g, floor, unit="", note=""):
    rule = f">= {render(floor, unit)}"
    row = _unavailable(check, figure, g, None if _missing(floor) else render(floor, unit), rule,
                       unit)
    if row:
        return row
    return Row(check, figure, render(g, unit), render(floor, unit), rule,
               PASS if g >= floor else FAIL, note)


def holds(check, figure, condition, genscope_text, independent_text, rule, note=""):
    """A yes/no property (a step failed with the message, a run document was written)."""
    return Row(check, figure, genscope_text, independent_text, rule, PASS if condition else FAIL,
               note)


def skipped(check, reason):
    return Row(check, "-", "-", "-", "-", SKIP, reason)


def failed(check, figure, reason):
    return Row(check, figure, "-", "-", "-", FAIL, reason)


def info(check, figure, value, peer="", note=""):
    return Row(check, figure, value, peer, "measured", INFO, note)
