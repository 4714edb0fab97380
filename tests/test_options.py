"""The test options are declared once, in groups (contracts/options.py; each system's in its
folder, composed by harness/options.py): the CLI, campaign keys, the workload's options and
docs/harness.md's table all come from that one spec, and a system refuses another's options."""

from __future__ import annotations

import argparse
import re
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts.errors import InputError
from harness import options
from harness.cmd_test import add_test_options, options_from_args
from workloads.base import WorkloadOptions

ROOT = Path(__file__).resolve().parent.parent


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_test_options(p)
    return p


def test_docs_table_is_the_spec():
    text = (ROOT / "docs" / "harness.md").read_text()
    m = re.search(r"<!-- options:begin -->\n(.*?)\n<!-- options:end -->", text, re.S)
    assert m, "docs/harness.md has no options table"
    assert m.group(1) == options.SPEC.markdown_table(), "regenerate it: python -m harness.options"


def test_no_flags_give_the_defaults():
    assert options_from_args(parser().parse_args([])) == options.TestOptions()


def test_every_option_has_a_flag_and_help():
    flags = {a.dest: a for a in parser()._actions}
    for f in options.SPEC:
        assert f.name in flags, f.name
        assert f.metadata["help"], f.name


def test_flags_are_read_as_the_spec_says():
    o = options_from_args(parser().parse_args([
        "--nodes", "3", "--nemesis", "kill,partition", "--acks", "-1", "--safeguard-off", "elr",
        "--safeguard-off", "leso-check,broker-epoch-check", "--no-data", "--unclean-election",
        "--broker-command", "python -m broker.main", "--checker-time-limit", "2.5"]))
    assert o.nodes == 3 and o.nemesis == ["kill", "partition"] and o.acks == "all"
    assert o.safeguards_off == ["elr", "leso-check", "broker-epoch-check"]
    assert o.collect_data is False and o.unclean_election is True
    assert o.broker_command == ["python", "-m", "broker.main"] and o.checker_time_limit == 2.5


def test_nemesis_none_is_no_faults():
    assert options_from_args(parser().parse_args(["--nemesis", "none"])).nemesis == []


def test_campaign_keys_by_field_or_flag_name():
    got = options.SPEC.from_mapping({"time-limit": 20, "safeguard-off": "elr", "acks": 1, "min_isr": "1",
                                "unclean_election": "true", "nemesis": ["kill"]}, "f.yaml")
    assert got == {"time_limit": 20.0, "safeguards_off": ["elr"], "acks": "1", "min_isr": 1,
                   "unclean_election": True, "nemesis": ["kill"]}


@pytest.mark.parametrize("bad, says", [({"nodez": 3}, "unknown option 'nodez'"),
                                       ({"nodes": "many"}, "option 'nodes'"),
                                       ({"unclean_election": "maybe"}, "option 'unclean_election'"),
                                       ({"lulls": "5:9:1"}, "needs 0 < SECONDS < EVERY")])
def test_campaign_bad_keys_name_what_and_where(bad, says):
    with pytest.raises(InputError) as e:
        options.SPEC.from_mapping(bad, "c.yaml: cells[0]")
    assert "c.yaml: cells[0]" in str(e.value) and says in str(e.value)


def test_lulls_are_read_checked_and_named_in_the_error(capsys):
    assert options_from_args(parser().parse_args(["--lulls", "20:5:4.0"])).lulls == "20:5:4"
    assert options_from_args(parser().parse_args([])).lulls == "none"
    with pytest.raises(SystemExit):
        parser().parse_args(["--lulls", "20:5"])
    assert "argument --lulls: lulls '20:5': expected EVERY:SECONDS:RATE" in capsys.readouterr().err


def test_choices_are_checked():
    with pytest.raises(InputError, match="--client: 'java'"):
        options.SPEC.check_choices(options.TestOptions(client="java"))


def test_workload_options_share_names_and_defaults():
    shared = {f.name for f in fields(WorkloadOptions)} & {f.name for f in options.SPEC}
    assert shared >= {"acks", "client", "topics", "partitions", "request_timeout", "final_time_limit",
                      "recovery_time_limit", "in_flight"}
    wo = WorkloadOptions()
    for name in shared:
        assert getattr(wo, name) == getattr(options.DEFAULTS, name), name


@given(nodes=st.integers(1, 9), rate=st.floats(1, 1e5, allow_nan=False), acks=st.sampled_from(["all", "1", "mixed"]),
       nemesis=st.lists(st.sampled_from(["kill", "partition", "pause", "lrs"]), max_size=3, unique=True),
       in_flight=st.integers(0, 200))
def test_options_round_trip_through_test_json(nodes, rate, acks, nemesis, in_flight):
    """test.json's `options` read back as a campaign mapping give the same options, and the
    workload sees the values of the options it shares."""
    o = options.TestOptions(nodes=nodes, rate=rate, acks=acks, nemesis=nemesis, in_flight=in_flight)
    again = options.TestOptions(**options.SPEC.from_mapping(o.to_dict(), "test.json"))
    assert again == o
    wo = WorkloadOptions.from_test(o.to_dict())
    assert (wo.acks, wo.in_flight) == (acks, in_flight)


def test_every_option_belongs_to_one_group_and_a_system_takes_only_its_own():
    from contracts.options import GeneralOptions
    from suites.etcd.options import EtcdOptions
    from suites.wrack.options import WrackOptions
    from workloads.options import KafkaClientOptions

    assert options.SPEC.group_of("nodes") is GeneralOptions and options.SPEC.group_of("min_isr") is WrackOptions
    assert options.SPEC.group_of("acks") is KafkaClientOptions and options.SPEC.group_of("etcd_reads") is EtcdOptions
    assert [f.name for f in options.foreign(options.TestOptions(db="etcd", min_isr=1))] == ["min_isr"]
    assert options.foreign(options.TestOptions(db="etcd", etcd_reads="serializable")) == []
    assert [f.name for f in options.foreign(options.TestOptions(etcd_reads="serializable"))] == ["etcd_reads"]
