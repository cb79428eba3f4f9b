"""Reading genscope run documents (docs/run-schema.md) in the GPU checks."""

from context import CheckFailed


def step_named(doc, name):
    for step in doc.get("steps", []):
        if step.get("name") == name:
            return step
    raise CheckFailed(f"no step {name!r} in the run (steps: "
                      f"{[s.get('name') for s in doc.get('steps', [])]})")


def steps_of_kind(doc, kind):
    return [s for s in doc.get("steps", []) if s.get("kind") == kind]


def metric(step, name):
    """The step's metric entry (before/after/peak/peak_source/...), or None."""
    for m in step.get("metrics", []):
        if m.get("name") == name:
            return m
    return None


def need_metric(step, name):
    m = metric(step, name)
    if m is None:
        raise CheckFailed(f"step {step.get('name')!r} has no metric {name} (has: "
                          f"{sorted(x.get('name') for x in step.get('metrics', []))})")
    return m


def series_column(doc, name):
    """(offsets_ns, values) of one sampled series; CheckFailed when it was not sampled."""
    series = doc.get("series", {})
    names = [m.get("name") for m in series.get("metrics", [])]
    if name not in names:
        raise CheckFailed(f"series has no column {name} (columns: {names})")
    column = names.index(name)
    return list(series.get("offset_ns", [])), [row for row in series.get("values", [])[column]]


def errors_from(doc, source):
    return [e for e in doc.get("monitoring_errors", []) if e.get("source") == source]
