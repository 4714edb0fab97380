"""A run's anomaly fingerprint: which anomalies it showed and their shape, not their offsets.

Two runs of one bug lose different offsets of different keys at different times; what they
share is the kind of anomaly and its shape. `fingerprint(results)` reads results.json and
gives, for the verdict's anomalies (those no loss rule allowed: `bad_anomaly_types`, else
`anomaly_types` less `allowed`):

    {"verdict": "invalid", "anomalies": [{"type": "lost-write", "keys": "one"}, ...]}

`keys` is the shape: whether the anomaly struck one key or several (`anomaly_keys`), and
"unknown" when the checker does not say. A run with no such anomaly has `anomalies` [].
`same(a, b)`: the same fingerprint (what `wrack rerun` counts); `shows_bug(found, original)`:
a run shows at least one anomaly type of the original's (what `wrack shrink` keeps: fewer
keys and nodes may change the shape but not the bug).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _verdict(valid: Any) -> str:
    return "valid" if valid is True else "invalid" if valid is False else "unknown"


def bad_types(results: Mapping[str, Any]) -> list[str]:
    """The anomaly types that count against the verdict."""
    if isinstance(results.get("bad_anomaly_types"), list):
        return sorted(str(t) for t in results["bad_anomaly_types"])
    allowed = set(results.get("allowed") or [])
    return sorted(str(t) for t in results.get("anomaly_types") or [] if t not in allowed)


def _keys_shape(results: Mapping[str, Any], kind: str) -> str:
    keys = (results.get("anomaly_keys") or {}).get(kind)
    if not isinstance(keys, (Mapping, list)):
        return "unknown"
    return "one" if len(keys) == 1 else "several" if keys else "unknown"


def fingerprint(results: Mapping[str, Any] | None) -> dict[str, Any]:
    """The fingerprint of one run's results.json (module docstring); a run never checked is
    `{"verdict": "crashed", "anomalies": []}`."""
    if results is None:
        return {"verdict": "crashed", "anomalies": []}
    return {"verdict": _verdict(results.get("valid")),
            "anomalies": [{"type": t, "keys": _keys_shape(results, t)} for t in bad_types(results)]}


def same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two fingerprints are the same (verdict, anomaly types and shapes)."""
    return a.get("verdict") == b.get("verdict") and a.get("anomalies") == b.get("anomalies")


def shows_bug(found: Mapping[str, Any], original: Mapping[str, Any]) -> bool:
    """Whether a run with fingerprint `found` is invalid with an anomaly type of `original`'s."""
    types = {a["type"] for a in original.get("anomalies") or []}
    return found.get("verdict") == "invalid" and any(a["type"] in types for a in found.get("anomalies") or [])


def describe(fp: Mapping[str, Any]) -> str:
    """One line: `invalid: lost-write (one key), unseen (several keys)`."""
    kinds = ", ".join(f"{a['type']} ({a['keys']} key{'s' if a['keys'] == 'several' else ''})"
                      for a in fp.get("anomalies") or [])
    return f"{fp.get('verdict')}{': ' + kinds if kinds else ''}"
