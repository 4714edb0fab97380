"""The timeline: one self-contained HTML page of a history, usable on a million events.

`write_timeline(history_path, out_path)` reads the history once and writes one HTML file
(no external resource) in which every client process is a column and every op a box from
its invoke to its completion (rows are history events, as in Jepsen's timeline), coloured
by outcome: ok, fail, info (indeterminate), and never completed. Fault windows from the
nemesis are bands across the page, nemesis events boxes in their own column. Hovering a
box shows the op (process, f, outcome, indices, times, latency, a summary of its value).

The page shows one *page* of events at a time (1,000 by default; 200 to 10,000), with
first / previous / next / last, jump to an event index, and keyboard arrows: the DOM
holds only the boxes of one page, whatever the history's size. Columns are the processes
present on the page. The op data is embedded compactly (columnar arrays, delta-encoded,
gzip + base64, inflated in the browser with DecompressionStream).

`timeline_data(events)` is the pure part: events to that columnar dict.

The timeline is one element (`fragment.html`: a `div.wrack-timeline` with its scoped style,
its data and its script, no ids, no globals) that works on its own page (`render_html`,
what `write_timeline` writes) and inside another page (`render_fragment`): the run report
embeds it directly, not in an iframe. An embedded timeline keeps its keyboard paging to
itself and leaves the page's URL alone. `fragment_from_page(page)` rebuilds the embeddable
element from a written page, taking nothing from it but the base64 data and the title.
"""

from __future__ import annotations

import base64
import gzip
import html
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from checkers.queue.reader import EventFile
from contracts.errors import InputError
from contracts.history import FAULT_COLORS, fault_windows
from contracts.pairing import NEMESIS, Pairing

TEMPLATE = Path(__file__).with_name("timeline.html")  # the page around the fragment
FRAGMENT = Path(__file__).with_name("fragment.html")
_PLACEHOLDER = re.compile(r"\{\{(TITLE|DATA|STANDALONE|FRAGMENT)\}\}")
_DATA_IN_PAGE = re.compile(r'<script type="application/octet-stream" (?:class="tl-data"|id="data")>'
                           r"([A-Za-z0-9+/=\s]*)</script>")
_TITLE_IN_PAGE = re.compile(r"<title>([^<]*)</title>")
DESC_MAX = 72
TYPES = {"ok": 0, "info": 1, "fail": 2}  # 3: never completed


def write_timeline(history_path: str | os.PathLike[str], out_path: str | os.PathLike[str], *,
                   title: str | None = None, colors: Mapping[str, str] | None = None, **_ignored: Any) -> Path:
    """Write the timeline of one history file to `out_path` (see the module docstring).
    `colors` (fault kind -> colour) override `contracts.history.FAULT_COLORS` for the bands."""
    p = os.fspath(history_path)
    ef = EventFile(p)
    data = timeline_data(ef, path=p, line_of=ef.line_of, colors=colors)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    page = render_html(data, title or f"Timeline: {os.path.basename(p)}")
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, out)
    return out


def timeline_data(events: Iterable[dict[str, Any]], path: str | None = None,
                  line_of: Callable[[int], int] | None = None,
                  colors: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Columnar op data for the page.

    Ops in invoke order: `p` process, `f` code into `fs`, `y` outcome (0 ok, 1 info,
    2 fail, 3 never completed), `i` invoke row (delta from the previous op's), `d` rows to
    the completion (-1: never), `v` value summary. `t` is every event's time in
    microseconds (delta-encoded), `x` every event's `index` when it differs from its row
    (else empty). Nemesis: `n` = [[row, f, summary], ...], `w` = fault windows [[kind,
    start row, stop row or -1], ...], `c` = {kind: colour} of those windows' kinds
    (`contracts.history.FAULT_COLORS`, overridden by `colors`; kinds without one get a spare colour).
    """
    fs: list[str] = []
    fcode: dict[str, int] = {}
    P: list[int] = []
    F: list[int] = []
    Y: list[int] = []
    I0: list[int] = []
    D: list[int] = []
    V: list[str] = []
    T: list[int] = []
    X: list[int] = []
    nem: list[list[Any]] = []
    nem_rows: dict[int, int] = {}
    nem_events: list[dict[str, Any]] = []
    pairing = Pairing(path, line_of)
    op_at_row: dict[int, int] = {}  # invoke row of each open op -> the op's number
    t_prev = 0
    index_differs = False
    row = -1
    for row, ev in enumerate(events):
        try:
            t = int(ev.get("time", row) // 1000)
            p = ev["process"]
            typ = ev["type"]
            f = ev["f"]
        except (KeyError, TypeError, ValueError):
            raise InputError("malformed event (needs process, type, f)", path,
                             line_of(row) if line_of else row + 1) from None
        T.append(t - t_prev)
        t_prev = t
        idx = ev.get("index", row)
        X.append(idx)
        if idx != row:
            index_differs = True
        if p == NEMESIS:
            if typ != "invoke":
                nem.append([row, f, _short(ev.get("value"))])
                nem_rows[id(ev)] = row
                nem_events.append(ev)
            continue
        if typ == "invoke":
            pairing.invoke(ev, row)
            c = fcode.get(f)
            if c is None:
                c = fcode[f] = len(fs)
                fs.append(f)
            op_at_row[row] = len(P)
            P.append(p)
            F.append(c)
            Y.append(3)
            I0.append(row)
            D.append(-1)
            V.append(_describe(f, ev.get("value"), None))
            continue
        k = op_at_row.pop(pairing.complete(ev, row)[1])
        Y[k] = TYPES[typ]
        D[k] = row - I0[k]
        if typ == "ok" or ev.get("value") is not None:
            V[k] = _describe(f, ev.get("value"), ev.get("error"))
    deltas = [i0 - prev for prev, i0 in zip([0, *I0], I0, strict=False)]
    windows, band_colors = _windows(nem_events, nem_rows, colors)
    return {"fs": fs, "p": P, "f": F, "y": Y, "i": deltas, "d": D, "v": V, "t": T,
            "x": X if index_differs else [], "n": nem, "w": windows, "c": band_colors, "rows": row + 1}


def _windows(nem_events: list[dict[str, Any]], nem_rows: dict[int, int],
             colors: Mapping[str, str] | None) -> tuple[list[list[Any]], dict[str, str]]:
    """The fault windows of the nemesis events ([kind, start row, stop row or -1]) and the
    colour of each kind that has one."""
    windows = []
    for w in fault_windows(nem_events):
        windows.append([w.kind, nem_rows.get(id(w.start_event), 0),
                        nem_rows.get(id(w.stop_event), -1) if w.stop_event is not None else -1])
    palette = {**FAULT_COLORS, **(colors or {})}
    return windows, {w[0]: palette[w[0]] for w in windows if w[0] in palette}


def _fill(template: Path, values: dict[str, str]) -> str:
    """The template with its placeholders replaced in one pass (a value is never rescanned)."""
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template.read_text(encoding="utf-8"))


def _blob(data: dict[str, Any]) -> str:
    return base64.b64encode(gzip.compress(orjson.dumps(data), compresslevel=6, mtime=0)).decode("ascii")


def _fragment(blob: str, title_html: str, standalone: bool) -> str:
    return _fill(FRAGMENT, {"TITLE": title_html, "DATA": blob, "STANDALONE": "1" if standalone else "0"})


def render_fragment(data: dict[str, Any], title: str) -> str:
    """The embeddable timeline element for `timeline_data`'s dict (pure). Its height is the
    CSS variable `--timeline-height` (default 640px)."""
    return _fragment(_blob(data), html.escape(title), standalone=False)


def render_html(data: dict[str, Any], title: str) -> str:
    """The timeline's own page for `timeline_data`'s dict (pure)."""
    t = html.escape(title)
    return _fill(TEMPLATE, {"TITLE": t, "FRAGMENT": _fragment(_blob(data), t, standalone=True)})


def fragment_from_page(page: str) -> str | None:
    """The embeddable element for a page `render_html` wrote (also an older single-page
    timeline), or None if the page holds no timeline data. Only the base64 data and the
    title (re-escaped) are taken from the page: the markup and script are this module's."""
    m = _DATA_IN_PAGE.search(page)
    if m is None:
        return None
    t = _TITLE_IN_PAGE.search(page)
    title = html.escape(html.unescape(t.group(1))) if t else "Timeline"
    return _fragment("".join(m.group(1).split()), title, standalone=False)


def _short(v: Any) -> str:
    if v is None:
        return ""
    s = v if isinstance(v, str) else orjson.dumps(v).decode("utf-8", "replace")
    return s if len(s) <= DESC_MAX else s[:DESC_MAX - 1] + "\u2026"


def _describe(f: str, value: Any, error: Any) -> str:
    """A short summary of an op's value: sends as k=v@offset, polls as k:first-last."""
    try:
        if isinstance(value, list) and value and all(isinstance(m, list) and m for m in value) \
                and value[0][0] in ("send", "poll"):
            parts: list[str] = []
            for m in value:
                if m[0] == "send" and len(m) == 3:
                    x = m[2]
                    parts.append(f"{m[1]}={x[1]}@{x[0]}" if isinstance(x, list) and len(x) == 2
                                 else f"{m[1]}={x}")
                elif m[0] == "poll":
                    r = m[1] if len(m) > 1 else None
                    if not r:
                        parts.append("\u2205" if r is not None else "(no result)")
                        continue
                    for k, recs in r.items():
                        if not recs:
                            parts.append(f"{k}:\u2205")
                        elif len(recs) == 1:
                            parts.append(f"{k}:{recs[0][0]}")
                        else:
                            parts.append(f"{k}:{recs[0][0]}-{recs[-1][0]}")
                if sum(len(x) + 1 for x in parts) > DESC_MAX:
                    break
            s = " ".join(parts)
        else:
            s = _short(value)
    except (TypeError, IndexError, KeyError, AttributeError):
        s = _short(value)
    if error is not None:
        s = f"{s} ! {_short(error)}"
    return s if len(s) <= DESC_MAX else s[:DESC_MAX - 1] + "\u2026"
