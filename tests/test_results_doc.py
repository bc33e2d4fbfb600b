"""benchmarks/RESULTS.md's summary numbers agree with its tables.

A table of learning results is marked by a line ``<!-- results: NAME -->`` right above
it (header ``| method | budget B | ...``, cells ``mean ± sd (n=N)``). A summary line that
quotes such a number carries ``<!-- check: NAME METHOD BUDGET VALUE; ... -->``: every
VALUE must be the table's mean for that method and budget, and must appear in the
visible text of the same list item, so neither the summary nor the table can drift alone."""

import re
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "RESULTS.md"


def tables(text: str) -> dict:
    """(name, method, budget) -> mean, from every marked table."""
    out = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.fullmatch(r"<!-- results: (\S+) -->", line.strip())
        if not m:
            continue
        header = [c.strip() for c in lines[i + 1].strip().strip("|").split("|")]
        budgets = [int(h.split()[-1]) for h in header[1:]]
        for row in lines[i + 3:]:
            if not row.startswith("|"):
                break
            cells = [c.strip() for c in row.strip().strip("|").split("|")]
            for budget, cell in zip(budgets, cells[1:]):
                value = re.match(r"\**(\d\.\d{3})", cell)
                if value:
                    out[m.group(1), cells[0].strip("*"), budget] = value.group(1)
    return out


def checks(text: str) -> list:
    """(line number, visible text, [(name, method, budget, value)]) of every check; the
    visible text is the list item (or paragraph) the check ends, comments removed."""
    lines = text.splitlines()
    out = []
    for n, line in enumerate(lines, 1):
        for comment in re.findall(r"<!-- check: (.*?) -->", line):
            items = [tuple(item.split()) for item in comment.split(";") if item.strip()]
            start = n - 1
            while start > 0 and lines[start - 1].strip() and not lines[start].startswith("- "):
                start -= 1
            visible = " ".join(re.sub(r"<!--.*?-->", "", x) for x in lines[start:n])
            out.append((n, visible, items))
    return out


def test_every_summary_number_is_its_tables():
    text = RESULTS.read_text()
    table = tables(text)
    found = checks(text)
    assert table and found, "no marked table or no checked summary line"
    for n, visible, items in found:
        for name, method, budget, value in items:
            key = (name, method, int(budget))
            assert key in table, f"RESULTS.md line {n}: no table {name} row {method} budget {budget}"
            assert table[key] == value, (
                f"RESULTS.md line {n}: {name} {method} {budget} is {table[key]} in its "
                f"table, {value} in the summary")
            assert value in visible, f"RESULTS.md line {n}: {value} checked but not shown"


def test_a_drifted_summary_fails():
    """The check itself: a summary number that differs from the table is caught."""
    text = ("<!-- results: t -->\n| method | budget 50 |\n|---|---|\n| cmix | 0.912 ± 0.01 (n=10) |\n\n"
            "cmix 0.913 <!-- check: t cmix 50 0.913 -->\n")
    table = tables(text)
    (_, visible, items), = checks(text)
    assert table[("t", "cmix", 50)] == "0.912" != items[0][3]
    with pytest.raises(AssertionError):
        assert table[items[0][:2] + (int(items[0][2]),)] == items[0][3]
