"""ACLs as Kafka stores them (KIP-140 bindings, KIP-290 prefixed patterns): the binding,
the filter, Kafka's matching rules and the checks a new binding must pass. Pure.

The broker stores and lists ACLs (CreateAcls, DescribeAcls, DeleteAcls, through the
controller as metadata records); it authorizes nothing (it has no authentication).

Codes are Kafka's (org.apache.kafka.common.resource / acl):
resource types UNKNOWN 0, ANY 1, TOPIC 2, GROUP 3, CLUSTER 4, TRANSACTIONAL_ID 5,
DELEGATION_TOKEN 6, USER 7; pattern types UNKNOWN 0, ANY 1, MATCH 2, LITERAL 3,
PREFIXED 4; operations UNKNOWN 0, ANY 1, ALL 2, READ 3 ... DESCRIBE_TOKENS 14;
permissions UNKNOWN 0, ANY 1, DENY 2, ALLOW 3.
"""

from __future__ import annotations

from dataclasses import dataclass

# resource types
RT_UNKNOWN, RT_ANY, RT_TOPIC, RT_GROUP, RT_CLUSTER, RT_TRANSACTIONAL_ID, RT_DELEGATION_TOKEN, RT_USER = range(8)
# pattern types
PT_UNKNOWN, PT_ANY, PT_MATCH, PT_LITERAL, PT_PREFIXED = range(5)
# operations
(OP_UNKNOWN, OP_ANY, OP_ALL, OP_READ, OP_WRITE, OP_CREATE, OP_DELETE, OP_ALTER, OP_DESCRIBE, OP_CLUSTER_ACTION,
 OP_DESCRIBE_CONFIGS, OP_ALTER_CONFIGS, OP_IDEMPOTENT_WRITE, OP_CREATE_TOKENS, OP_DESCRIBE_TOKENS) = range(15)
# permission types
PERM_UNKNOWN, PERM_ANY, PERM_DENY, PERM_ALLOW = range(4)

WILDCARD = "*"
CLUSTER_NAME = "kafka-cluster"
INT_MIN = -2147483648  # "authorized operations not asked for"

# Kafka's AclEntry.supportedOperations: what an authorized-operations bitset may hold
SUPPORTED_OPERATIONS: dict[int, frozenset[int]] = {
    RT_TOPIC: frozenset({OP_READ, OP_WRITE, OP_CREATE, OP_DESCRIBE, OP_DELETE, OP_ALTER, OP_DESCRIBE_CONFIGS,
                         OP_ALTER_CONFIGS}),
    RT_GROUP: frozenset({OP_READ, OP_DESCRIBE, OP_DELETE}),
    RT_CLUSTER: frozenset({OP_CREATE, OP_CLUSTER_ACTION, OP_DESCRIBE_CONFIGS, OP_ALTER_CONFIGS, OP_IDEMPOTENT_WRITE,
                           OP_ALTER, OP_DESCRIBE}),
    RT_TRANSACTIONAL_ID: frozenset({OP_DESCRIBE, OP_WRITE}),
    RT_DELEGATION_TOKEN: frozenset({OP_DESCRIBE}),
    RT_USER: frozenset({OP_CREATE_TOKENS, OP_DESCRIBE_TOKENS}),
}


def all_operations(resource_type: int) -> int:
    """The bitset of every operation on `resource_type` (bit i = operation code i): what
    Kafka answers for authorized operations when nothing is denied."""
    return sum(1 << op for op in SUPPORTED_OPERATIONS.get(resource_type, ()))


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a resource pattern and an access-control entry."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls/DeleteAcls filter; None names match any value."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int


def _known(code: int, top: int) -> bool:
    return 0 < code <= top


def filter_error(f: AclFilter) -> str | None:
    """Why a filter cannot be used (an UNKNOWN or out-of-range element), or None."""
    if not _known(f.resource_type, RT_USER):
        return f"unknown resource type {f.resource_type}"
    if not _known(f.pattern_type, PT_PREFIXED):
        return f"unknown pattern type {f.pattern_type}"
    if not _known(f.operation, OP_DESCRIBE_TOKENS):
        return f"unknown operation {f.operation}"
    if not _known(f.permission_type, PERM_ALLOW):
        return f"unknown permission type {f.permission_type}"
    return None


def binding_error(b: AclBinding) -> str | None:
    """Why `b` cannot be created (Kafka's AclControlManager.validateNewAcl and the
    broker's checks), or None."""
    if b.resource_type in (RT_UNKNOWN, RT_ANY) or not _known(b.resource_type, RT_USER):
        return f"Invalid resourceType {b.resource_type}"
    if b.pattern_type not in (PT_LITERAL, PT_PREFIXED):
        return f"Invalid patternType {b.pattern_type}"
    if b.operation in (OP_UNKNOWN, OP_ANY) or not _known(b.operation, OP_DESCRIBE_TOKENS):
        return f"Invalid operation {b.operation}"
    if b.permission_type not in (PERM_DENY, PERM_ALLOW):
        return f"Invalid permissionType {b.permission_type}"
    if not b.resource_name:
        return "Resource name should not be empty"
    if b.resource_type == RT_CLUSTER and b.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if ":" not in b.principal:
        return (f"Could not parse principal from `{b.principal}` "
                "(no colon is present separating the principal type from the principal name)")
    return None


def pattern_matches(f: AclFilter, b: AclBinding) -> bool:
    """Kafka's ResourcePatternFilter.matches: ANY matches any type; MATCH also matches
    the literal wildcard `*` and prefixes of the name; a null name matches any name."""
    if f.resource_type != RT_ANY and f.resource_type != b.resource_type:
        return False
    if f.pattern_type not in (PT_ANY, PT_MATCH) and f.pattern_type != b.pattern_type:
        return False
    if f.resource_name is None:
        return True
    if f.pattern_type in (PT_ANY, b.pattern_type):
        return f.resource_name == b.resource_name
    if b.pattern_type == PT_LITERAL:  # filter MATCH
        return f.resource_name == b.resource_name or b.resource_name == WILDCARD
    return f.resource_name.startswith(b.resource_name)  # PREFIXED


def entry_matches(f: AclFilter, b: AclBinding) -> bool:
    """Kafka's AccessControlEntryFilter.matches (null principal/host: any)."""
    if f.principal is not None and f.principal != b.principal:
        return False
    if f.host is not None and f.host != b.host:
        return False
    if f.operation != OP_ANY and f.operation != b.operation:
        return False
    return f.permission_type == PERM_ANY or f.permission_type == b.permission_type


def matches(f: AclFilter, b: AclBinding) -> bool:
    return pattern_matches(f, b) and entry_matches(f, b)
