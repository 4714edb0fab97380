"""`wrack-broker`'s configuration (Kafka property names, properties files, --override)
and its process lifecycle: bad input exits 254 with one line, SIGTERM writes the
clean-shutdown marker with the broker epoch, SIGKILL leaves none, logs carry timestamps."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from broker_procs import BROKER, BrokerFleet, free_port

from broker.config import ConfigError, load_settings, parse_properties, settings_from


def test_properties_file_syntax_and_override_precedence(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text(
        "# a comment\n! another\nnode.id = 3\nlisteners: PLAINTEXT://127.0.0.1:9092\n"
        "log.dirs=/data/a,\\\n  /data/b\nmin.insync.replicas 2\nsome.unknown=1\n"
    )
    s = load_settings(str(f), ["min.insync.replicas=3", "listeners=PLAINTEXT://127.0.0.1:9999"])
    assert s.node_id == 3 and s.log_dirs == ("/data/a", "/data/b") and s.min_insync_replicas == 3
    assert s.listeners[0].port == 9999 and s.unknown == ("some.unknown",)
    assert s.process_roles == frozenset({"broker", "controller"})  # no voters: its own controller


def test_kraft_roles_voters_and_listeners():
    s = settings_from([(k, v, "--override") for k, v in {
        "node.id": "1", "process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.2:9092",
        "controller.quorum.voters": "0@127.0.0.1:9093", "log.dirs": "/x"}.items()])
    assert s.is_broker and not s.is_controller and s.voter(0) is not None and s.voter(0).port == 9093
    s = settings_from([(k, v, "--override") for k, v in {
        "node.id": "0", "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "controller.quorum.voters": "0@127.0.0.1:9093", "log.flush.interval.messages": "1"}.items()])
    assert s.is_broker and s.is_controller and s.storage == {"log.flush.interval.messages": "1"}
    assert [li.name for li in s.advertised_listeners] == ["PLAINTEXT"]
    s = settings_from([(k, v, "--override") for k, v in {
        "node.id": "2", "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "controller.quorum.voters": "1@127.0.0.1:9193,2@127.0.0.1:9093,3@127.0.0.1:9293"}.items()])
    assert s.is_controller and [v.node_id for v in s.controller_quorum_voters] == [1, 2, 3]


@pytest.mark.parametrize(("props", "msg"), [
    ({"node.id": "x"}, "node.id: expected an integer"),
    ({}, "node.id is required"),
    ({"node.id": "1", "listeners": "PLAINTEXT//h:1"}, "listeners: 'PLAINTEXT//h:1' is not NAME://host:port"),
    ({"node.id": "1", "process.roles": "broker"}, "needs controller.quorum.voters"),
    ({"node.id": "1", "process.roles": "queen"}, "process.roles: expected broker, controller or both"),
    ({"node.id": "1", "controller.quorum.voters": "0@h:1,0@h:2"}, "voter ids must be unique"),
    ({"node.id": "1", "process.roles": "controller", "controller.quorum.voters": "0@h:1"}, "not a voter"),
    ({"node.id": "1", "min.insync.replicas": "0"}, "min.insync.replicas: must be at least 1"),
    ({"node.id": "1", "log.flush.interval.messages": "often"}, "log.flush.interval.messages: expected an integer"),
    ({"node.id": "1", "wrack.safeguards.off": "nope"}, "nope"),
    ({"node.id": "1", "listener.security.protocol.map": "PLAINTEXT:SSL"}, "only PLAINTEXT is supported"),
    ({"node.id": "0", "process.roles": "controller", "listeners": "PLAINTEXT://h:1"}, "controller-only node needs a controller listener"),
])
def test_bad_properties_name_the_property_and_where(props, msg):
    with pytest.raises(ConfigError, match=re.escape(msg)):
        settings_from([(k, v, "f.properties:7") for k, v in props.items()])


def test_parse_properties_reports_the_line():
    assert parse_properties("a=1\n\n  b : 2 \n", "f") == [("a", "1", "f:1"), ("b", "2", "f:3")]


def run(args: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([BROKER, *args], capture_output=True, text=True, timeout=timeout)


def test_cli_help_and_bad_input_exit_codes(tmp_path):
    r = run(["--help"])
    assert r.returncode == 0 and "--config" in r.stdout and "--override" in r.stdout
    r = run(["--override", "node.id=zero"])
    assert r.returncode == 254 and r.stderr.strip().count("\n") == 0 and "node.id" in r.stderr
    r = run(["--config", str(tmp_path / "missing.properties")])
    assert r.returncode == 254 and "missing.properties" in r.stderr and "Traceback" not in r.stderr
    r = run(["--override", "oops"])
    assert r.returncode == 254 and "expected key=value" in r.stderr


def test_a_taken_port_is_bad_input(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    try:
        r = run(["--override", "node.id=0", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                 "--override", f"log.dirs={tmp_path}"])
    finally:
        s.close()
    assert r.returncode == 254 and f"127.0.0.1:{port}" in r.stderr and "Traceback" not in r.stderr


def test_a_corrupt_metadata_log_is_bad_input(tmp_path):
    (tmp_path / "wrack-metadata.log").write_text('{"offset": 0, "type": "Nope"}\n{"offset": 1}\n')
    r = run(["--override", "node.id=0", "--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
             "--override", f"log.dirs={tmp_path}"])
    assert r.returncode == 254 and "wrack-metadata.log:1" in r.stderr


def test_sigterm_writes_the_marker_sigkill_leaves_none_and_logs_have_timestamps():
    with BrokerFleet() as fleet:
        b = fleet.single().start()
        marker = Path(b.data_dir) / ".kafka_cleanshutdown"
        assert not marker.exists()
        assert b.terminate() == 0
        assert json.loads(marker.read_text())["BrokerEpoch"] >= 0
        b.start()
        assert not marker.exists()  # read and deleted at startup
        b.signal(signal.SIGKILL)
        b.proc.wait(10)
        assert not marker.exists()
        b.start()
        assert "storage: unclean shutdown" in b.log_text().split("---- start 3")[1]
        assert b.terminate() == 0
        file_log = (Path(b.data_dir) / "wrack-broker.log").read_text()
        assert re.search(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} INFO \[node 0\]", file_log, re.M)
        assert "SIGTERM: shutting down" in file_log


def test_the_broker_process_builds_no_hypothesis_strategies(tmp_path):
    """Regression (start-up took ~7 s per broker on a fresh node): importing kio made
    hypothesis build its Unicode tables, cached in `.hypothesis/` in the working
    directory (4-7 s of CPU in a fresh one). The console entry point hides hypothesis."""
    code = ("import sys; from broker.main import hide_hypothesis; hide_hypothesis(); "
            "import broker.server.node, broker.server.handlers; print(sys.modules.get('hypothesis'))")
    out = subprocess.run([BROKER.replace("wrack-broker", "python"), "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "None", out.stderr
    with BrokerFleet() as fleet:
        b = fleet.single()
        b.props["wrack.log.file"] = ""
        p = subprocess.Popen([BROKER, *[f"--override={k}={v}" for k, v in b.props.items()]], cwd=tmp_path,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            from broker_procs import wait_port

            wait_port(b.host, b.port, 30, p)
        finally:
            p.kill()
            p.wait(10)
    assert not (tmp_path / ".hypothesis").exists()
