"""The timeline page (data, self-containment, rendering in headless Chromium) and run stats."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import orjson
import pytest
from queue_testlib import H, simulate

from checkers.files import run_stats
from checkers.timeline import fragment_from_page, render_fragment, render_html, timeline_data, write_timeline


def write(path: Path, events: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    return path


def embedded(page: str) -> dict:
    blob = re.search(r'<script type="application/octet-stream" class="tl-data">([^<]*)</script>', page).group(1)
    return json.loads(gzip.decompress(base64.b64decode(blob)))


def test_timeline_data_columns():
    h = (H().nemesis("start-partition", "halves").send(0, "x", 1, 0).assign(1, ["x"])
         .poll(1, {"x": [[0, 1]]}).nemesis("stop-partition").send(2, "x", 2, None, "fail"))
    h.ev(3, "invoke", "poll", [["poll"]])
    d = timeline_data(h.events)
    assert d["fs"] == ["send", "assign", "poll"]
    assert d["p"] == [0, 1, 1, 2, 3] and d["y"] == [0, 0, 0, 2, 3]
    assert d["d"] == [1, 1, 1, 1, -1]
    assert d["v"][0] == "x=1@0" and d["v"][2] == "x:0"
    assert d["w"] == [["partition", 0, 7]] and [n[1] for n in d["n"]] == ["start-partition", "stop-partition"]
    assert d["rows"] == len(h.events) and sum(d["t"]) == h.events[-1]["time"] // 1000
    assert d["c"] == {"partition": "#E9DCA0"}  # the plots' colours for the bands
    assert timeline_data(h.events, colors={"partition": "#123456"})["c"] == {"partition": "#123456"}


def test_timeline_is_self_contained_and_escapes_values(tmp_path):
    h = H().send(0, "x", "</script><img src=x onerror=alert(1)>", 0)
    p = write(tmp_path / "h.jsonl", h.events)
    out = write_timeline(p, tmp_path / "t.html", title="<b>run</b>")
    page = out.read_text()
    assert "<b>run</b>" not in page and "&lt;b&gt;run&lt;/b&gt;" in page
    assert not re.search(r'(src|href)="(https?:)?//', page)  # no external resource
    d = embedded(page)
    assert d["v"][0].startswith("x=</script>")  # data stays data: only inside the gzip blob


def test_the_embeddable_element_is_rebuilt_from_the_page_and_nothing_else(tmp_path):
    h = H().send(0, "x", 1, 0).poll(1, {"x": [[0, 1]]})
    page = render_html(timeline_data(h.events), 'T <b>"x"</b>')
    frag = fragment_from_page(page)
    assert frag.startswith('<div class="wrack-timeline"') and 'data-standalone="0"' in frag
    assert "<html" not in frag and " id=" not in frag  # embeddable: no page structure, no ids
    assert embedded(frag) == embedded(page) and "T &lt;b&gt;&quot;x&quot;&lt;/b&gt;" in frag
    assert 'data-standalone="1"' in page
    # a tampered page gives its data at most: markup and script are always the module's own
    evil = page.replace("<script>", "<script>alert(1);", 1).replace("<title>", "<title><img src=x>", 1)
    frag2 = fragment_from_page(evil)
    assert "alert(1)" not in frag2 and "<img" not in frag2
    assert fragment_from_page(page.replace('class="tl-data">', 'class="tl-data">"</script><b>', 1)) is None
    assert fragment_from_page("<html>no timeline</html>") is None
    old_page = '<title>old</title><script type="application/octet-stream" id="data">QUJD</script>'
    assert 'class="tl-data">QUJD<' in fragment_from_page(old_page)  # pages written before the element
    assert render_fragment(timeline_data(h.events), "t").count("<script") == 2  # its data and its code


def test_run_stats_availability_per_window(tmp_path):
    h = H().send(0, "x", 1, 0).nemesis("start-partition", "halves").send(0, "x", 2, None, "fail")
    h.send(0, "x", 3, None, "info").nemesis("stop-partition").poll(1, {"x": [[0, 1]]}).crash(1)
    s = run_stats(write(tmp_path / "h.jsonl", h.events))
    assert s["by_f"]["send"] == {"count": 3, "ok": 1, "fail": 1, "info": 1}
    assert s["availability"] == {"ops": 4, "ok": 2, "availability": 0.5}  # crash ops not counted
    (w,) = s["fault_windows"]
    assert (w["kind"], w["ops"], w["ok"], w["availability"]) == ("partition", 2, 0, 0.0)
    assert s["outside_faults"] == {"ops": 2, "ok": 2, "availability": 1.0}


def test_run_stats_of_a_non_queue_history(tmp_path):
    evs = [{"process": 0, "type": "invoke", "f": "read", "value": None},
           {"process": 0, "type": "ok", "f": "read", "value": 3},
           {"process": 1, "type": "invoke", "f": "write", "value": 4}]
    s = run_stats(write(tmp_path / "r.jsonl", evs))
    assert s["by_f"]["read"]["ok"] == 1 and s["by_f"]["write"]["info"] == 1


# ------------------------------------------------------------------------ Chromium


def big_history(n_ops: int) -> list[dict]:
    """n_ops concurrent sends and polls of 20 processes (fast to generate)."""
    evs: list[dict] = []
    t = 0
    offset = 0
    for i in range(n_ops):
        p = i % 20
        t += 1000
        if i % 2:
            evs.append({"process": p, "type": "invoke", "f": "send", "value": [["send", "k", i]], "time": t})
            evs.append({"process": p, "type": "ok", "f": "send", "value": [["send", "k", [offset, i]]], "time": t + 500})
            offset += 1
        else:
            evs.append({"process": p, "type": "invoke", "f": "poll", "value": [["poll"]], "time": t})
            evs.append({"process": p, "type": "ok", "f": "poll", "value": [["poll", {}]], "time": t + 500})
    return evs


@pytest.mark.chromium
def test_timeline_renders_in_headless_chromium(tmp_path, headless_chromium):
    import matplotlib.image as mpimg
    import numpy as np

    sim = simulate(21, n_ops=600, n_keys=3, n_proc=6)
    evs = sim.h.events
    evs.insert(40, {"process": "nemesis", "type": "info", "f": "start-partition", "value": "halves"})
    evs.insert(300, {"process": "nemesis", "type": "info", "f": "stop-partition", "value": None})
    for i, e in enumerate(evs):
        e["index"] = i
        e["time"] = i * 250_000
    out = write_timeline(write(tmp_path / "h.jsonl", evs), tmp_path / "timeline.html")
    shot = tmp_path / "shot.png"
    r = headless_chromium(f"--screenshot={shot}", "--window-size=1400,900", "--virtual-time-budget=10000",
                          out.as_uri(), netns=True)
    assert shot.is_file(), r.stderr[-2000:]
    img = mpimg.imread(str(shot))[:, :, :3]
    px = (img * 255).round().astype(np.int32).reshape(-1, 3)
    assert len({tuple(c) for c in px[::7]}) > 20, "screenshot looks blank"
    non_white = (px.sum(axis=1) < 740).mean()
    assert non_white > 0.05, non_white
    ok_blue = np.all(np.abs(px - np.array([0x6D, 0xB6, 0xFE])) <= 3, axis=1).mean()
    assert ok_blue > 0.01, "no ok boxes drawn"
    band = np.all(np.abs(px - np.array([0xF6, 0xF1, 0xE2])) <= 12, axis=1).mean()
    assert band > 0.001, "no fault band drawn"


@pytest.mark.chromium
def test_timeline_pages_keep_the_dom_small_on_100k_ops(tmp_path, headless_chromium):
    p = write(tmp_path / "big.jsonl", big_history(100_000))
    out = write_timeline(p, tmp_path / "big.html")
    assert out.stat().st_size < 8 * 2**20
    r = headless_chromium("--dump-dom", "--virtual-time-budget=20000", out.as_uri(), netns=True)
    dom = r.stdout
    assert "of 200000" in dom, r.stderr[-2000:]
    boxes = dom.count('class="op ')
    assert 300 < boxes < 1500, boxes
