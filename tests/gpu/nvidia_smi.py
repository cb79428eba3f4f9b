"""nvidia-smi's query output, read strictly: the independent side of the NVML checks.

`nvidia-smi --query-gpu=F1,F2,... --format=csv` prints a header naming each field with its
unit in brackets, then one line per GPU, values joined by ", ":

    index, uuid, name, memory.total [MiB], power.draw [W], clocks.current.sm [MHz]
    0, GPU-5ee1c5b4-..., NVIDIA H100 80GB HBM3, 81559 MiB, 69.53 W, 345 MHz

A value the driver cannot give reads `[N/A]`, `[Not Supported]`, `[Unknown Error]`, ...
(None here, with the bracketed text kept as the reason). `--query-compute-apps=...` has the
same layout with one line per process holding a CUDA context, and only the header (or
nothing, or "No running processes found") when there is none; its `used_memory` column is
headed `used_gpu_memory [MiB]`. Values are checked against the header's unit, never
stripped blindly: a unit that is not the expected one is an error, not a number.

Every malformed input raises NvidiaSmiError with a stable `.name`:
`EmptyOutput`, `HeaderMismatch`, `FieldCount`, `BadValue`, `BadUnit`, `UnknownField`,
`NvidiaSmiFailed` (the command failed), `InvalidField` (nvidia-smi refused a field name).
"""

import re
import subprocess

# Query field -> (header name, unit in the header or None, value type). Long names only:
# nvidia-smi heads an alias (clocks.sm) with the long name (clocks.current.sm).
GPU_FIELDS = {
    "index": ("index", None, "int"),
    "uuid": ("uuid", None, "str"),
    "name": ("name", None, "str"),
    "driver_version": ("driver_version", None, "str"),
    "pci.bus_id": ("pci.bus_id", None, "str"),
    "memory.total": ("memory.total", "MiB", "int"),
    "memory.reserved": ("memory.reserved", "MiB", "int"),
    "memory.used": ("memory.used", "MiB", "int"),
    "memory.free": ("memory.free", "MiB", "int"),
    "utilization.gpu": ("utilization.gpu", "%", "int"),
    "utilization.memory": ("utilization.memory", "%", "int"),
    "temperature.gpu": ("temperature.gpu", None, "int"),
    "power.draw": ("power.draw", "W", "float"),
    "clocks.current.sm": ("clocks.current.sm", "MHz", "int"),
    "clocks.current.memory": ("clocks.current.memory", "MHz", "int"),
}
APP_FIELDS = {
    "pid": ("pid", None, "int"),
    "gpu_uuid": ("gpu_uuid", None, "str"),
    "used_memory": ("used_gpu_memory", "MiB", "int"),
}

_UNAVAILABLE = re.compile(r"^\[([^\]]+)\]$")  # [N/A], [Not Supported], [Unknown Error], ...
_NO_PROCESSES = "no running processes found"
_INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')


class NvidiaSmiError(Exception):
    """Malformed or failed nvidia-smi output; `.name` is stable, the text says where."""

    def __init__(self, name, message):
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


class Value:
    """One field of one line: `.value` (int, float, str, or None when unavailable) and
    `.reason` (the bracketed text nvidia-smi printed instead, e.g. "N/A")."""

    __slots__ = ("value", "reason")

    def __init__(self, value, reason=None):
        self.value = value
        self.reason = reason

    def __repr__(self):
        return f"Value({self.value!r})" if self.reason is None else f"Value(None, {self.reason!r})"

    def __eq__(self, other):
        return isinstance(other, Value) and (self.value, self.reason) == (other.value, other.reason)


def _split(line):
    # Values never contain ", " in the fields we query (GPU names, UUIDs and versions have
    # no comma; process_name, which may, is not queried).
    return [part.strip() for part in line.split(",")]


def _parse_header_cell(cell):
    m = re.fullmatch(r"(\S+)(?: \[([^\]]+)\])?", cell)
    if not m:
        raise NvidiaSmiError("HeaderMismatch", f"header cell {cell!r} is not 'name [unit]'")
    return m.group(1), m.group(2)


def _parse_value(text, field, unit, kind, where):
    m = _UNAVAILABLE.match(text)
    if m:
        return Value(None, m.group(1))
    if kind == "str":
        if not text:
            raise NvidiaSmiError("BadValue", f"{where}: empty {field}")
        return Value(text)
    number = text
    if unit is not None:
        # "81559 MiB", "0 %", "69.53 W": the unit after one space. With --format=...,nounits
        # the unit is absent: accepted too, the header still names it.
        m = re.fullmatch(r"(\S+)(?: (\S+))?", text)
        if not m:
            raise NvidiaSmiError("BadValue", f"{where}: {field} {text!r}")
        number, got = m.groups()
        if got is not None and got != unit:
            raise NvidiaSmiError("BadUnit", f"{where}: {field} {text!r}: expected unit {unit}")
    try:
        value = int(number) if kind == "int" else float(number)
    except ValueError:
        raise NvidiaSmiError("BadValue", f"{where}: {field} {text!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")) or value < 0:
        raise NvidiaSmiError("BadValue", f"{where}: {field} {text!r} out of range")
    return Value(value)


def parse_query(text, fields, catalogue, allow_empty=False):
    """Parses `--format=csv` output (with its header) of a query of `fields`, in that order.

    Returns one dict per line: field -> Value. Raises NvidiaSmiError.
    """
    for field in fields:
        if field not in catalogue:
            raise NvidiaSmiError("UnknownField", f"{field} is not a field this parser knows")
    lines = [line.rstrip("\r") for line in text.split("\n")]
    lines = [line for line in lines if line.strip()]
    if not lines:
        if allow_empty:
            return []
        raise NvidiaSmiError("EmptyOutput", "no header line")
    if allow_empty and len(lines) == 1 and lines[0].strip().lower() == _NO_PROCESSES:
        return []
    header = _split(lines[0])
    if len(header) != len(fields):
        raise NvidiaSmiError("FieldCount", f"header has {len(header)} columns, asked for "
                                           f"{len(fields)}: {lines[0]!r}")
    for field, cell in zip(fields, header):
        name, unit = _parse_header_cell(cell)
        want_name, want_unit, _ = catalogue[field]
        if name != want_name or unit != want_unit:
            raise NvidiaSmiError("HeaderMismatch", f"column {cell!r} for {field}: expected "
                                 f"{want_name}{' [' + want_unit + ']' if want_unit else ''}")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        cells = _split(line)
        if len(cells) != len(fields):
            raise NvidiaSmiError("FieldCount", f"line {number} has {len(cells)} values, "
                                               f"expected {len(fields)}: {line!r}")
        row = {}
        for field, cell in zip(fields, cells):
            _, unit, kind = catalogue[field]
            row[field] = _parse_value(cell, field, unit, kind, f"line {number}")
        rows.append(row)
    if not rows and not allow_empty:
        raise NvidiaSmiError("EmptyOutput", "a header but no GPU line")
    return rows


def parse_gpus(text, fields):
    """`nvidia-smi --query-gpu=<fields> --format=csv` output -> one dict per GPU."""
    return parse_query(text, fields, GPU_FIELDS)


def parse_apps(text, fields):
    """`nvidia-smi --query-compute-apps=<fields> --format=csv` output -> one dict per process
    (an empty list when none holds a CUDA context)."""
    return parse_query(text, fields, APP_FIELDS, allow_empty=True)


def run_query(nvidia_smi, kind, fields, timeout=30):
    """Runs one query (kind "gpu" or "compute-apps") and parses it.

    A field this nvidia-smi does not know (an older driver) is dropped and the query
    repeated: returns (rows, dropped_fields).
    """
    fields = list(fields)
    dropped = []
    while True:
        try:
            done = subprocess.run([nvidia_smi, f"--query-{kind}={','.join(fields)}",
                                   "--format=csv"], capture_output=True, text=True,
                                  timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise NvidiaSmiError("NvidiaSmiFailed", f"{nvidia_smi}: {e}") from None
        output = done.stdout + done.stderr
        m = _INVALID_FIELD.search(output)
        if done.returncode != 0 and m and m.group(1) in fields and len(fields) > 1:
            fields.remove(m.group(1))
            dropped.append(m.group(1))
            continue
        if done.returncode != 0:
            raise NvidiaSmiError("NvidiaSmiFailed",
                                 f"{nvidia_smi} exit {done.returncode}: {output.strip()[:300]}")
        parse = parse_gpus if kind == "gpu" else parse_apps
        return parse(done.stdout, fields), dropped
