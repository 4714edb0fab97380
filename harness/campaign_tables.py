"""A campaign's runs into the pipeline's Parquet tables, each as it finishes.

`RunTables(DIR)` opens (or makes) a pipeline directory (docs/pipeline.md); `add(run_dir)`
ingests one finished run folder the way `wrack pipeline ingest` does, without Spark
(`pipeline.ingest.ingest_run` in this process: the run's `ops` file, then its `faults`,
`anomalies` and, last, its `runs` row: the commit), so `wrack pipeline check`/`report` and
`wrack serve`'s campaign page see it at once. A run already in `runs` is skipped. Thread-safe
(the Spark driver's threads call it as their runs come back). A run that cannot be ingested
is reported, not raised: the campaign goes on.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any


class RunTables:
    """The pipeline directory a campaign's runs are ingested into (module docstring)."""

    def __init__(self, out: str | os.PathLike[str]):
        self.out = os.path.abspath(out)
        self.done: set[str] | None = None  # run ids in `runs`, read at the first add
        self.errors: list[str] = []
        self._lock = threading.Lock()

    def check(self) -> None:
        """InputError now if the directory exists and is not a pipeline directory."""
        # lazy: pyarrow and the pipeline's extraction are needed only when a campaign writes tables
        from pipeline import store

        if os.path.exists(self.out) and not (os.path.isdir(self.out) and not os.listdir(self.out)):
            store.prepare(self.out, create=False)

    def add(self, run_dir: str | os.PathLike[str]) -> str | None:
        """Ingest one run folder; returns its run id (None when skipped or on error)."""
        # lazy: see check()
        from pipeline import store
        from pipeline.ingest import ingest_run
        from pipeline.runfolders import run_id_of

        path = os.path.abspath(run_dir)
        rid = run_id_of(path)
        with self._lock:
            if self.done is None:
                store.prepare(self.out, create=True)
                self.done = store.ingested_run_ids(self.out)
            done = self.done
            if rid in done:
                return None
            done.add(rid)
        try:
            r: dict[str, Any] = ingest_run(rid, path, store.ops_file(self.out, rid))
            store.write_table(self.out, "faults", r["faults"])
            store.write_table(self.out, "anomalies", r["anomalies"])
            store.write_table(self.out, "runs", [r["run"]])
        except Exception as e:  # noqa: BLE001 - recorded; the campaign's own results stand
            with self._lock:
                done.discard(rid)
                self.errors.append(f"{rid}: {type(e).__name__}: {e}")
            return None
        return rid


def default_dir(campaign_root: str | os.PathLike[str]) -> Path:
    """Where a campaign's tables go by default: `_pipeline/` beside the campaigns' folders, so
    every campaign run under one root adds to the same tables (history across revisions)."""
    return Path(campaign_root) / "_pipeline"
