"""The GPU check table: one line per Row, columns sized to their content, plain ASCII.

    check          figure        genscope     independent   rule                verdict  note
    -------------  ------------  -----------  ------------  ------------------  -------  ----
    nvml gpu0      name          NVIDIA H100  NVIDIA H100   equal               PASS

Cells longer than `max_cell` characters are cut with "..." (the JSON written next to the
table keeps them whole). The summary line counts the verdicts.
"""

from verdicts import FAIL, INFO, PASS, SKIP

COLUMNS = ("check", "figure", "genscope", "independent", "rule", "verdict", "note")


def _cut(text, width):
    text = " ".join(str(text).split())  # one line per row, whatever the cell held
    return text if len(text) <= width else text[: max(width - 3, 0)] + "..."


def render_table(rows, max_cell=48, max_note=100):
    """The table as a string (ending with a newline); an empty list gives the header only."""
    cells = [[_cut(getattr(row, c), max_note if c == "note" else max_cell) for c in COLUMNS]
             for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(COLUMNS)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    for r in cells:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return "\n".join(lines) + "\n"


def summary(rows):
    """"N rows: P passed, F failed, S skipped, I measured"."""
    count = {v: sum(1 for r in rows if r.verdict == v) for v in (PASS, FAIL, SKIP, INFO)}
    return (f"{len(rows)} rows: {count[PASS]} passed, {count[FAIL]} failed, "
            f"{count[SKIP]} skipped, {count[INFO]} measured")
