"""Converters of Porcupine's etcd logs and kv EDN files to docs/ARCHITECTURE.md events."""

from __future__ import annotations

import pytest

from contracts.errors import InputError
from contracts.formats import detect_format, read_etcd_log, read_history, read_kv_edn

ETCD = (
    "INFO  jepsen.util - 0\t:invoke\t:read\tnil\n"
    "INFO  jepsen.util - 1\t:invoke\t:cas\t[1 4]\n"
    "INFO  jepsen.util - 0\t:ok\t:read\tnil\n"
    "\n"
    "INFO  jepsen.util - 1\t:fail\t:cas\t[1 4]\n"
    "INFO  jepsen.util - 2   :invoke  :write  3\n"
    "INFO  jepsen.util - 2   :info    :write  :timed-out\n"
    "INFO  jepsen.util - 0   :invoke  :read   nil\n"
    "INFO  jepsen.util - 0   :fail    :read   :timed-out\n"
)


def test_etcd_log(tmp_path):
    p = tmp_path / "etcd.log"
    p.write_text(ETCD)
    assert detect_format(p) == "etcd-log"
    evs = list(read_etcd_log(p))
    assert [ln for ln, _ in evs] == [1, 2, 3, 5, 6, 7, 8, 9]
    assert [e["index"] for _, e in evs] == list(range(8))
    assert [e["time"] for _, e in evs] == [1, 2, 3, 5, 6, 7, 8, 9]
    assert evs[1][1] == {"index": 1, "time": 2, "process": 1, "type": "invoke", "f": "cas", "value": [1, 4]}
    assert evs[2][1]["value"] is None and evs[3][1]["type"] == "fail" and evs[3][1]["value"] == [1, 4]
    assert evs[5][1] == {"index": 5, "time": 7, "process": 2, "type": "info", "f": "write", "value": None,
                         "error": "timed-out"}
    assert list(read_history(p)) == evs


def test_kv_edn(tmp_path):
    p = tmp_path / "kv.txt"
    p.write_text('{:process 3, :type :invoke, :f :append, :key "7", :value "x 3 0 y"}\n'
                 '{:process 3, :type :ok, :f :append, :key "7", :value "x 3 0 y"}\n'
                 '{:process 4, :type :invoke, :f :get, :key "7", :value nil}\n'
                 '{:value "x \\"q\\" y", :key "7", :f :get, :type :ok, :process 4}\n')
    assert detect_format(p) == "kv-edn"
    evs = [e for _, e in read_kv_edn(p)]
    assert evs[0] == {"index": 0, "time": 1, "process": 3, "type": "invoke", "f": "append",
                      "value": ["7", "x 3 0 y"]}
    assert evs[2]["value"] == ["7", None]
    assert evs[3]["value"] == ["7", 'x "q" y'] and evs[3]["process"] == 4


@pytest.mark.parametrize("reader, text, line", [
    (read_etcd_log, "INFO  jepsen.util - 0\t:invoke\t:read\tnil\nINFO jepsen.util - x :ok :read 1\n", 2),
    (read_etcd_log, "INFO  jepsen.util - 0\t:invoke\t:read\t[1 2 3]\n", 1),
    (read_kv_edn, '{:process 0, :type :invoke, :f :get, :key "0", :value nil}\n{:process 0 :type}\n', 2),
    (read_kv_edn, '{:process "a", :type :invoke, :f :get, :key "0", :value nil}\n', 1),
    (read_kv_edn, '{:process 0, :type :invoke, :f :get, :value nil}\n', 1),
    (read_kv_edn, 'process 0\n', 1),
])
def test_bad_lines_name_file_and_line(tmp_path, reader, text, line):
    p = tmp_path / "h"
    p.write_text(text)
    with pytest.raises(InputError) as e:
        list(reader(p))
    assert e.value.path == str(p) and e.value.line == line


def test_detect_format(tmp_path):
    p = tmp_path / "h.jsonl"
    p.write_text('\n{"process": 0, "type": "invoke", "f": "read", "value": null}\n')
    assert detect_format(p) == "jsonl"
    (tmp_path / "empty").write_text("")
    assert detect_format(tmp_path / "empty") == "jsonl"
    with pytest.raises(InputError):
        detect_format(tmp_path / "absent")
    p.write_bytes(b"INFO  jepsen.util - 0\t:invoke\t:read\t\xff\n")
    with pytest.raises(InputError, match="UTF-8"):
        list(read_etcd_log(p))
