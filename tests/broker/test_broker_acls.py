"""ACLs: Kafka's filter rules (hypothesis and Kafka's own examples), the checks on new
bindings, the controller's records and their replay into the metadata image, and the
inter-node codec of the ACL messages."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode as E

from broker.core import acls as a
from broker.core.acls import AclBinding, AclFilter
from broker.core.controller import Controller, ControllerConfig
from broker.core.messages import (
    AclDeleteResult,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    MetadataFetchResponse,
)
from broker.core.metadata import (
    AccessControlEntryRecord,
    MetadataImage,
    RemoveAccessControlEntryRecord,
    encode_record,
    metadata_log_from_lines,
)
from broker.wire import internal

NAMES = st.sampled_from(["*", "", "t", "to", "top", "topic", "other", "kafka-cluster"])
bindings = st.builds(
    AclBinding, st.integers(a.RT_TOPIC, a.RT_USER), NAMES, st.sampled_from([a.PT_LITERAL, a.PT_PREFIXED]),
    st.sampled_from(["User:alice", "User:bob", "User:*"]), st.sampled_from(["*", "10.0.0.1"]),
    st.integers(a.OP_ALL, a.OP_DESCRIBE_TOKENS), st.sampled_from([a.PERM_DENY, a.PERM_ALLOW]),
)
filters = st.builds(
    AclFilter, st.integers(a.RT_ANY, a.RT_USER), st.none() | NAMES, st.integers(a.PT_ANY, a.PT_PREFIXED),
    st.none() | st.sampled_from(["User:alice", "User:bob", "User:*"]), st.none() | st.sampled_from(["*", "10.0.0.1"]),
    st.integers(a.OP_ANY, a.OP_DESCRIBE_TOKENS), st.integers(a.PERM_ANY, a.PERM_ALLOW),
)
ANY = AclFilter(a.RT_ANY, None, a.PT_ANY, None, None, a.OP_ANY, a.PERM_ANY)


def exact(b: AclBinding) -> AclFilter:
    return AclFilter(b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation, b.permission_type)


@given(bindings, bindings)
def test_an_exact_filter_matches_its_binding_only(b, other):
    assert a.matches(exact(b), other) == (other == b)


@given(bindings)
def test_the_any_filter_matches_everything(b):
    assert a.matches(ANY, b)


@given(filters, bindings)
def test_pattern_rules_as_kafka_states_them(f, b):
    """ResourcePatternFilter.matches, restated: ANY types match any type; a LITERAL or
    PREFIXED filter needs that pattern type and the same name; MATCH takes a literal
    binding of the name or of `*`, and a prefixed binding that prefixes the name."""
    if f.resource_type not in (a.RT_ANY, b.resource_type):
        want = False
    elif f.resource_name is None:
        want = f.pattern_type in (a.PT_ANY, a.PT_MATCH, b.pattern_type)
    elif f.pattern_type in (a.PT_ANY, b.pattern_type):
        want = f.resource_name == b.resource_name
    elif f.pattern_type == a.PT_MATCH:
        want = (b.resource_name in (f.resource_name, "*") if b.pattern_type == a.PT_LITERAL
                else f.resource_name.startswith(b.resource_name))
    else:
        want = False
    assert a.pattern_matches(f, b) == want


@given(filters, bindings)
def test_entry_rules(f, b):
    want = ((f.principal is None or f.principal == b.principal) and (f.host is None or f.host == b.host)
            and f.operation in (a.OP_ANY, b.operation) and f.permission_type in (a.PERM_ANY, b.permission_type))
    assert a.entry_matches(f, b) == want


def topic(name: str, pt: int) -> AclBinding:
    return AclBinding(a.RT_TOPIC, name, pt, "User:alice", "*", a.OP_READ, a.PERM_ALLOW)


def pfilter(name: str | None, pt: int, rt: int = a.RT_TOPIC) -> AclFilter:
    return AclFilter(rt, name, pt, None, None, a.OP_ANY, a.PERM_ANY)


@pytest.mark.parametrize(("f", "b", "want"), [  # Kafka's ResourcePatternFilterTest
    (pfilter("Name", a.PT_PREFIXED), topic("Name", a.PT_PREFIXED), True),
    (pfilter("Name", a.PT_PREFIXED), topic("Name", a.PT_LITERAL), False),
    (pfilter("Name", a.PT_LITERAL), topic("Name", a.PT_PREFIXED), False),
    (pfilter("Name", a.PT_MATCH), topic("Na", a.PT_PREFIXED), True),
    (pfilter("Name", a.PT_MATCH), topic("Names", a.PT_PREFIXED), False),
    (pfilter("Name", a.PT_MATCH), topic("*", a.PT_LITERAL), True),
    (pfilter("Name", a.PT_LITERAL), topic("*", a.PT_LITERAL), False),
    (pfilter("Name", a.PT_ANY), topic("Na", a.PT_PREFIXED), False),
    (pfilter("Name", a.PT_ANY), topic("Name", a.PT_PREFIXED), True),
    (pfilter(None, a.PT_LITERAL), topic("x", a.PT_PREFIXED), False),
    (pfilter("Name", a.PT_MATCH, a.RT_GROUP), topic("Name", a.PT_LITERAL), False),
])
def test_kafka_examples(f, b, want):
    assert a.matches(f, b) is want


@pytest.mark.parametrize(("b", "why"), [
    (AclBinding(a.RT_ANY, "t", a.PT_LITERAL, "User:a", "*", a.OP_READ, a.PERM_ALLOW), "resourceType"),
    (AclBinding(a.RT_TOPIC, "t", a.PT_MATCH, "User:a", "*", a.OP_READ, a.PERM_ALLOW), "patternType"),
    (AclBinding(a.RT_TOPIC, "t", a.PT_LITERAL, "User:a", "*", a.OP_ANY, a.PERM_ALLOW), "operation"),
    (AclBinding(a.RT_TOPIC, "t", a.PT_LITERAL, "User:a", "*", a.OP_READ, a.PERM_ANY), "permissionType"),
    (AclBinding(a.RT_TOPIC, "", a.PT_LITERAL, "User:a", "*", a.OP_READ, a.PERM_ALLOW), "empty"),
    (AclBinding(a.RT_CLUSTER, "c", a.PT_LITERAL, "User:a", "*", a.OP_ALTER, a.PERM_ALLOW), "kafka-cluster"),
    (AclBinding(a.RT_TOPIC, "t", a.PT_LITERAL, "alice", "*", a.OP_READ, a.PERM_ALLOW), "principal"),
])
def test_bindings_kafka_refuses(b, why):
    assert why in (a.binding_error(b) or "")


def test_authorized_operation_bitsets():
    assert a.all_operations(a.RT_TOPIC) == 3576  # READ..ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
    assert a.all_operations(a.RT_CLUSTER) == 8096
    assert a.all_operations(a.RT_GROUP) == (1 << a.OP_READ) | (1 << a.OP_DELETE) | (1 << a.OP_DESCRIBE)


# ---------------------------------------------------------------- controller and image
def create(c: Controller, *bs: AclBinding) -> CreateAclsResponse:
    return c.handle(0, CreateAclsRequest(1, bs), 0).sends[-1].message


def delete(c: Controller, *fs: AclFilter) -> DeleteAclsResponse:
    return c.handle(0, DeleteAclsRequest(2, fs), 0).sends[-1].message


def replayed(c: Controller) -> MetadataImage:
    """A fresh image from the controller's log as its file holds it."""
    lines = [encode_record(off, rec) for off, rec in enumerate(c.quorum.read_from(0, 1 << 30))]
    image = MetadataImage()
    for off, rec in enumerate(metadata_log_from_lines(lines).records):
        image.apply(off, rec)
    return image


def test_the_controller_stores_acls_once_and_removes_what_filters_match():
    c = Controller(ControllerConfig())
    lit, pre = topic("topic", a.PT_LITERAL), topic("to", a.PT_PREFIXED)
    bad = AclBinding(a.RT_TOPIC, "t", a.PT_LITERAL, "nocolon", "*", a.OP_READ, a.PERM_ALLOW)
    r = create(c, lit, pre, bad, lit)
    assert [x.error for x in r.results] == [E.none, E.none, E.invalid_request, E.none]
    assert sorted(c.image.acls.values(), key=str) == sorted([lit, pre], key=str)
    assert create(c, lit).results[0].error is E.none and len(c.image.acls) == 2  # already there: no record
    assert replayed(c).acls == c.image.acls
    # two filters matching the prefixed ACL: both list it, it is removed once
    match = pfilter("topic-x", a.PT_MATCH)
    bad_filter = AclFilter(a.RT_UNKNOWN, None, a.PT_ANY, None, None, a.OP_ANY, a.PERM_ANY)
    d = delete(c, match, pfilter("to", a.PT_PREFIXED), bad_filter)
    assert d.results[0] == AclDeleteResult(E.none, "", (pre,)) and d.results[1].matching == (pre,)
    assert d.results[2].error is E.invalid_request
    removes = [r for r in c.quorum.read_from(0, 100) if isinstance(r, RemoveAccessControlEntryRecord)]
    assert len(removes) == 1
    assert list(c.image.acls.values()) == [lit] and replayed(c).acls == c.image.acls
    # a controller rebuilt from the log (failover) knows the same ACLs
    assert Controller(ControllerConfig(), c.quorum).image.acls == c.image.acls


def test_acl_messages_and_records_cross_the_wire():
    lit = topic("topic", a.PT_LITERAL)
    rec = AccessControlEntryRecord("id-1", *(getattr(lit, f) for f in lit.__slots__))
    msgs = [CreateAclsRequest(5, (lit,)), DeleteAclsRequest(6, (ANY, pfilter("x", a.PT_MATCH))),
            DeleteAclsResponse(6, (AclDeleteResult(E.none, "", (lit,)), AclDeleteResult(E.invalid_request, "bad"))),
            MetadataFetchResponse(7, (rec, RemoveAccessControlEntryRecord("id-1")), 9)]
    for m in msgs:
        assert internal.decode_frame(internal.encode_message(m)[4:]) == (internal.KIND_MESSAGE, m)
    assert rec.binding() == lit


@settings(max_examples=50, deadline=None)
@given(st.lists(bindings, max_size=6), st.lists(filters, max_size=3))
def test_image_replay_equals_the_controller_image(bs, fs):
    c = Controller(ControllerConfig())
    create(c, *bs)
    delete(c, *fs)
    assert replayed(c).acls == c.image.acls
    assert all(not a.matches(f, b) for f in fs if a.filter_error(f) is None for b in c.image.acls.values())
