"""One self-contained HTML file showing a linearizability analysis (no network, no script).

Per partition (failing ones first): an SVG timeline with one row per process and one bar
per op from its invocation to its completion (indeterminate ops run to the right edge,
dashed), the linearization drawn as numbered points joined by a line, and the op that
cannot follow it in red; then a table of the linearization with the model state after
each op. A valid partition shows its linearization; an invalid one only its counterexample
window (`window.py`): the ops of the window, its first states, a summary of the ops carried
into it from before, and the longest partial linearization of the window found. Times are compressed to
their rank, as Porcupine does, so bursts stay readable.
Every value is HTML-escaped; hovering a bar shows the op's details.
"""

from __future__ import annotations

import html
import os
from typing import Any

from checkers.linearizable.check import Analysis, Partition, replay
from checkers.linearizable.report import rule6_text

MAX_PARTITIONS = 30
MAX_OPS = 2500
_KINDS = 12  # kinds of ops carried into a window listed
_ROW = 30
_BAR = 20
_STEP = 14
_LEFT = 90

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em;margin:0 0 .3em} .meta{color:#555;margin-bottom:1em}
.v-true{color:#1a7f37} .v-false{color:#c62828} .v-unknown{color:#b26a00}
details{border:1px solid #ddd;border-radius:6px;margin:.8em 0;padding:.4em .8em}
summary{cursor:pointer;font-weight:600} .scroll{overflow-x:auto;border:1px solid #eee;margin:.5em 0}
svg text{font:11px monospace;pointer-events:none} svg .lab{fill:#333}
rect.op{stroke:#555;stroke-width:1} rect.op:hover{stroke:#000;stroke-width:2}
rect.lin{fill:#b7e4b7} rect.rest{fill:#e6e6e6} rect.indet{fill:#fff4c2;stroke-dasharray:4 3}
rect.bad{fill:#f4a3a3;stroke:#c62828;stroke-width:2}
polyline.path{fill:none;stroke:#1565c0;stroke-width:1.5} circle.pt{fill:#1565c0}
table{border-collapse:collapse;font:12px monospace} td,th{border:1px solid #ddd;padding:2px 6px;text-align:left}
tr.bad td{background:#fde0e0} .legend span{display:inline-block;padding:0 .5em;margin-right:.5em;border:1px solid #999}
"""


def _e(s: Any) -> str:
    return html.escape(str(s), quote=True)


def _label(a: Analysis, lo: Any) -> str:
    """How an op reads in the picture: the model's description, with its key when the
    partition mixes keys (partitioning switched off)."""
    d = a.model.describe_call(lo.call)
    return f"{lo.key}: {d}" if a.whole and lo.key is not None else d


def render_html(a: Analysis, title: str = "history") -> str:
    """The whole HTML document for analysis `a`."""
    m = a.model
    for p in a.partitions:
        if p.valid is True and p.order and not p.linearization:
            p.linearization, _ = replay(m, p, p.order)
    verdict = {True: "linearizable", False: "NOT linearizable"}.get(a.valid, "unknown")  # type: ignore[call-overload]
    vclass = {True: "v-true", False: "v-false"}.get(a.valid, "v-unknown")  # type: ignore[call-overload]
    parts = sorted(a.partitions, key=lambda p: {False: 0, True: 2}.get(p.valid, 1))  # type: ignore[call-overload]
    out = [f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{_e(title)}: {_e(verdict)}</title>",
           f"<style>{_CSS}</style></head><body>",
           f"<h1>{_e(title)}: <span class=\"{vclass}\">{_e(verdict)}</span></h1>",
           f"<div class=\"meta\">model <b>{_e(m.name)}</b> ({_e(m.doc)}); {a.ops} ops in "
           f"{len(a.partitions)} partition(s){' (partitioning off)' if a.whole else ''}; "
           f"checked in {a.seconds:.3f} s"
           + (f"; {_e(a.reason)}" if a.reason else "") + "</div>",
           "<div class=\"legend\"><span style=\"background:#b7e4b7\">linearized</span>"
           "<span style=\"background:#e6e6e6\">not linearized</span>"
           "<span style=\"background:#fff4c2\">indeterminate</span>"
           "<span style=\"background:#f4a3a3\">cannot follow</span>"
           "<span style=\"color:#1565c0\">&#9679; linearization order</span></div>"]
    for i, p in enumerate(parts[:MAX_PARTITIONS]):
        out.append(_partition(a, p, open_=(i == 0)))
    if len(parts) > MAX_PARTITIONS:
        out.append(f"<p>{len(parts) - MAX_PARTITIONS} more partitions not shown.</p>")
    out.append("</body></html>")
    return "\n".join(out)


def write_html(a: Analysis, path: str, title: str = "history") -> None:
    """Write `render_html(a)` to `path` (atomically: a temp file, then rename)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(render_html(a, title))
    os.replace(tmp, path)


def _partition(a: Analysis, p: Partition, open_: bool) -> str:
    status = {True: "linearizable", False: "not linearizable"}.get(p.valid, "undecided")  # type: ignore[call-overload]
    key = "" if p.key is None else f"key {p.key!r}: "
    head = (f"<details{' open' if open_ else ''}><summary>{_e(key)}{len(p.ops)} ops, "
            f"<span class=\"v-{str(p.valid).lower()}\">{status}</span></summary>")
    if p.window is not None:
        shown = p.window.ops[:MAX_OPS]
        return head + _window_note(a, p) + _timeline(a, p, shown) + _table(a, p) + "</details>"
    shown = list(range(min(len(p.ops), MAX_OPS)))
    note = f"<p>Only the first {MAX_OPS} ops are drawn.</p>" if len(p.ops) > MAX_OPS else ""
    return head + note + _timeline(a, p, shown) + _table(a, p) + "</details>"


def _window_note(a: Analysis, p: Partition) -> str:
    """What the counterexample window is: where, its first states, the ops carried into it."""
    w = p.window
    assert w is not None
    m = a.model
    lines = [p.ops[i].op.line for i in w.ops]
    where = "from the start of the history" if w.start is None else \
        f"from line {min(lines)}" if lines else "from its start"
    ends = [p.ops[i].op.ret_line for i in w.ops if p.ops[i].end == w.end]
    to = f" to line {ends[0]}" if ends else ""
    states = ", ".join(m.describe_state(st) for st in w.states)
    out = [f"<p><b>Counterexample window</b> {where}{to}: {len(w.ops)} op{'' if len(w.ops) == 1 else 's'} that no order can linearize "
           f"(found by {_e(w.reason)}), starting in any of the states {_e(states)} "
           f"(the initial one, or one an earlier op can have made).</p>"]
    why = rule6_text(m, p)
    if why:
        out.append(f"<p>Rule 6: {_e(why)}.</p>")
    if len(w.ops) > MAX_OPS:
        out.append(f"<p>Only its first {MAX_OPS} ops are drawn.</p>")
    if w.carried:
        kinds: dict[str, int] = {}
        for i in w.carried:
            d = m.describe_call(p.ops[i].call).removesuffix(" (indeterminate)")
            kinds[d] = kinds.get(d, 0) + 1
        top = sorted(kinds.items(), key=lambda kv: -kv[1])
        listed = ", ".join(f"{_e(d)} &times;{c}" for d, c in top[:_KINDS])
        more = f" and {len(top) - _KINDS} other kinds" if len(top) > _KINDS else ""
        out.append(f"<p>{len(w.carried)} ops invoked before the window may still take effect in it, or not "
                   f"(not drawn): {listed}{more}.</p>")
    return "".join(out)


def _timeline(a: Analysis, p: Partition, shown: list[int]) -> str:
    ops = [p.ops[i] for i in shown]
    times = sorted({lo.start for lo in ops} | {lo.end for lo in ops if lo.end is not None})
    rank = {t: i for i, t in enumerate(times)}
    step = min(120.0, max(float(_STEP), 1100.0 / max(1, len(times))))
    xmax = _LEFT + (len(times) + 2) * step
    procs = sorted({lo.op.process for lo in ops}, key=lambda x: (str(type(x)), x))
    row = {pr: i for i, pr in enumerate(procs)}
    order = {pos: k for k, (pos, _) in enumerate(p.linearization)}
    height = len(procs) * _ROW + 20
    width = int(xmax + 20)
    svg = [f"<div class=\"scroll\"><svg width=\"{width}\" height=\"{height}\" role=\"img\">"]
    for pr, r in row.items():
        svg.append(f"<text class=\"lab\" x=\"4\" y=\"{r * _ROW + 24}\">process {_e(pr)}</text>")

    def x_of(lo: Any) -> tuple[float, float]:
        x0 = _LEFT + rank[lo.start] * step
        x1 = _LEFT + rank[lo.end] * step if lo.end is not None and lo.end in rank else xmax
        return x0, max(x1, x0 + 4)

    for pos, lo in zip(shown, ops, strict=True):
        x0, x1 = x_of(lo)
        y = row[lo.op.process] * _ROW + 8
        cls = "bad" if pos == p.cannot_follow else "lin" if pos in order else "indet" if lo.end is None else "rest"
        label = _label(a, lo)
        tip = (f"process {lo.op.process}: {lo.op.f} {lo.op.type}; invoke value {lo.op.invoke.get('value')!r}"
               + (f"; result {lo.op.complete.get('value')!r}" if lo.op.complete is not None else "")
               + f"; line {lo.op.line}" + (f"; linearized #{order[pos] + 1}" if pos in order else "")
               + ("; cannot follow the linearization" if pos == p.cannot_follow else ""))
        svg.append(f"<rect class=\"op {cls}\" x=\"{x0:.1f}\" y=\"{y}\" width=\"{x1 - x0:.1f}\" "
                   f"height=\"{_BAR}\" rx=\"3\"><title>{_e(tip)}</title></rect>")
        room = int((x1 - x0 - 6) / 6.6)
        if room >= 3:
            text = label if len(label) <= room else label[:room - 1] + "\u2026"
            svg.append(f"<text x=\"{x0 + 3:.1f}\" y=\"{y + 14}\">{_e(text)}</text>")
    # the linearization: points in order, each inside its op's interval
    pts = []
    last = 0.0
    at = {pos: lo for pos, lo in zip(shown, ops, strict=True)}
    for k, (pos, _) in enumerate(p.linearization):
        lo = at.get(pos)
        if lo is None:
            continue  # not drawn (beyond the first ops, or carried into the window)
        x0, x1 = x_of(lo)
        x = min(max(last + 2, x0 + 3), x1 - 2)
        last = x
        y = row[lo.op.process] * _ROW + 8 + _BAR / 2
        pts.append((x, y, k))
    if pts:
        svg.append("<polyline class=\"path\" points=\"" + " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in pts) + "\"/>")
        for x, y, k in pts:
            svg.append(f"<circle class=\"pt\" cx=\"{x:.1f}\" cy=\"{y:.1f}\" r=\"3\"><title>#{k + 1}</title></circle>")
    svg.append("</svg></div>")
    return "".join(svg)


def _table(a: Analysis, p: Partition) -> str:
    m = a.model
    if not p.linearization and p.cannot_follow is None:
        return ""
    what = "Linearization" if p.valid is True else \
        "Longest partial linearization of the window" if p.window is not None else "Longest partial linearization"
    rows = [f"<p>{what} ({len(p.linearization)} ops"
            + ("; indeterminate ops not listed did not take effect" if p.valid is True else "") + ")</p>",
            "<table><tr><th>#</th><th>process</th><th>op</th><th>line</th><th>state after</th></tr>"]
    for k, (pos, state) in enumerate(p.linearization):
        lo = p.ops[pos]
        rows.append(f"<tr><td>{k + 1}</td><td>{_e(lo.op.process)}</td><td>{_e(_label(a, lo))}</td>"
                    f"<td>{lo.op.line}</td><td>{_e(m.describe_state(state))}</td></tr>")
    if p.cannot_follow is not None:
        lo = p.ops[p.cannot_follow]
        w = p.window
        st = "any state the window starts in" if w is not None and not p.linearization and len(w.states) > 1 \
            else m.describe_state(p.failed_in)
        rows.append(f"<tr class=\"bad\"><td>&#10007;</td><td>{_e(lo.op.process)}</td>"
                    f"<td>{_e(_label(a, lo))}</td><td>{lo.op.line}</td>"
                    f"<td>cannot follow: illegal in {_e(st)}</td></tr>")
    rows.append("</table>")
    return "".join(rows)
