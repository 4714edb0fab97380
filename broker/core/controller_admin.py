"""The controller's admin requests, their checks in admin_rules.py: topics (create, delete,
new partitions), topic and broker configs, ACLs (Kafka's AclControlManager), preferred and
unclean leader elections, and partition reassignments (KRaft's
alterPartitionReassignment). Each writes its records through the controller's
partition changes and metadata quorum.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.core import acls
from broker.core.admin_rules import (
    AdminError,
    check_assignment,
    config_records,
    manual_partitions,
    new_partitions,
    new_topic_configs,
    placed_partitions,
)
from broker.core.controller_partitions import PartitionChanges
from broker.core.election import reassignment_revert, reassignment_to
from broker.core.messages import (
    NO_LEADER,
    PREFERRED_ELECTION,
    AclDeleteResult,
    AclResult,
    Actions,
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterReassignmentRequest,
    AlterReassignmentResponse,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicRequest,
    CreateTopicResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteTopicRequest,
    DeleteTopicResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    TopicPartition,
)
from broker.core.metadata import (
    TOPIC_RESOURCE,
    AccessControlEntryRecord,
    PartitionRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
    acl_id_for,
)


class AdminRequests(PartitionChanges):
    """Topics, configs, ACLs, elections and reassignments asked by admin clients."""

    # ------------------------------------------------------------ topics
    def _on_create_topic(self, req: CreateTopicRequest, acts: Actions) -> CreateTopicResponse:
        try:
            if req.name in self.image.topics:
                raise AdminError(ErrorCode.topic_already_exists, f"Topic '{req.name}' already exists.")
            configs = new_topic_configs(req.configs)
            if req.assignments:
                if req.num_partitions != -1 or req.replication_factor != -1:
                    raise AdminError(ErrorCode.invalid_request, "A manual partition assignment was specified, but "
                                                                "numPartitions or replicationFactor was not set to -1.")
                regs = manual_partitions(self.image, req.assignments, 0)
            else:
                if req.replication_factor <= 0:
                    raise AdminError(ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0.")
                regs = placed_partitions(self.image, req.num_partitions, req.replication_factor, len(self.image.partitions))
        except AdminError as e:
            return CreateTopicResponse(req.correlation_id, req.name, e.code, e.message)
        if not req.validate_only:
            self._commit(TopicRecord(req.name, tuple(sorted(configs.items()))), acts)
            for i, reg in enumerate(regs):
                self._commit(PartitionRecord(TopicPartition(req.name, i), reg), acts)
        return CreateTopicResponse(req.correlation_id, req.name, ErrorCode.none)

    def _on_create_partitions(self, req: CreatePartitionsRequest, acts: Actions) -> CreatePartitionsResponse:
        have = sum(1 for tp in self.image.partitions if tp.topic == req.topic)
        try:
            regs = new_partitions(self.image, req.topic, req.count, req.assignments, len(self.image.partitions))
        except AdminError as e:
            return CreatePartitionsResponse(req.correlation_id, req.topic, e.code, e.message)
        if not req.validate_only:
            for i, reg in enumerate(regs):
                self._commit(PartitionRecord(TopicPartition(req.topic, have + i), reg), acts)
        return CreatePartitionsResponse(req.correlation_id, req.topic, ErrorCode.none)

    def _on_alter_configs(self, req: AlterConfigsRequest, acts: Actions) -> AlterConfigsResponse:
        def answer(code: ErrorCode, text: str = "") -> AlterConfigsResponse:
            return AlterConfigsResponse(req.correlation_id, req.resource_type, req.resource_name, code, text)

        try:
            records = config_records(self.image, req.resource_type, req.resource_name, req.changes, req.replace)
        except AdminError as e:
            return answer(e.code, e.message)
        if req.validate_only or not records:
            return answer(ErrorCode.none)
        for rec in records:
            self._commit(rec, acts)
        # e.g. unclean election newly allowed on a topic or as a broker default: elect where none leads
        for tp, reg in sorted(self.image.partitions.items()):
            if reg.leader == NO_LEADER and (req.resource_type != TOPIC_RESOURCE or tp.topic == req.resource_name):
                self._change(tp, acts)
        return answer(ErrorCode.none)

    def _on_delete_topic(self, req: DeleteTopicRequest, acts: Actions) -> DeleteTopicResponse:
        if req.name not in self.image.topics:
            return DeleteTopicResponse(req.correlation_id, req.name, ErrorCode.unknown_topic_or_partition, f"no topic {req.name!r}")
        for tp in [tp for tp in self._recovery if tp.topic == req.name]:
            del self._recovery[tp]
        self._commit(RemoveTopicRecord(req.name), acts)
        return DeleteTopicResponse(req.correlation_id, req.name, ErrorCode.none)

    # ------------------------------------------------------------ ACLs
    def _on_create_acls(self, req: CreateAclsRequest, acts: Actions) -> CreateAclsResponse:
        """Kafka's AclControlManager.createAcls: each binding checked on its own; one
        already stored (or earlier in the request) succeeds without a new record."""
        stored = set(self.image.acls.values())
        results = []
        for b in req.creations:
            why = acls.binding_error(b)
            if why is not None:
                results.append(AclResult(ErrorCode.invalid_request, why))
                continue
            if b not in stored:
                off = self.quorum.end_offset
                self._commit(AccessControlEntryRecord(acl_id_for(off), b.resource_type, b.resource_name, b.pattern_type,
                                                      b.principal, b.host, b.operation, b.permission_type), acts)
                stored.add(b)
            results.append(AclResult(ErrorCode.none))
        return CreateAclsResponse(req.correlation_id, tuple(results))

    def _on_delete_acls(self, req: DeleteAclsRequest, acts: Actions) -> DeleteAclsResponse:
        """Kafka's AclControlManager.deleteAcls: every filter lists every stored ACL it
        matches; each matched ACL is removed once."""
        gone: dict[str, None] = {}
        results = []
        for f in req.filters:
            why = acls.filter_error(f)
            if why is not None:
                results.append(AclDeleteResult(ErrorCode.invalid_request, why))
                continue
            hits = [(aid, b) for aid, b in self.image.acls.items() if acls.matches(f, b)]
            gone.update((aid, None) for aid, _ in hits)
            results.append(AclDeleteResult(ErrorCode.none, "", tuple(b for _, b in hits)))
        for aid in gone:
            self._commit(RemoveAccessControlEntryRecord(aid), acts)
        return DeleteAclsResponse(req.correlation_id, tuple(results))

    # ------------------------------------------------------------ elections
    def _on_elect_leaders(self, req: ElectLeadersRequest, acts: Actions) -> ElectLeadersResponse:
        """Kafka's electLeader: PREFERRED moves the leadership to the first replica (when it
        is in the ISR and usable); UNCLEAN elects where no leader is, uncleanly if it must."""
        reg = self.image.partitions.get(req.tp)
        if reg is None:
            return ElectLeadersResponse(req.correlation_id, req.tp, ErrorCode.unknown_topic_or_partition)
        if req.election_type == PREFERRED_ELECTION:
            if reg.replicas and reg.leader == reg.replicas[0]:
                return ElectLeadersResponse(req.correlation_id, req.tp, ErrorCode.election_not_needed, reg.leader)
            new = self._change(req.tp, acts, preferred=True)
            code = ErrorCode.none if new != reg else ErrorCode.preferred_leader_not_available
            return ElectLeadersResponse(req.correlation_id, req.tp, code, new.leader)
        if reg.leader != NO_LEADER:
            return ElectLeadersResponse(req.correlation_id, req.tp, ErrorCode.election_not_needed, reg.leader)
        new = self._change(req.tp, acts)
        if new.leader == NO_LEADER:
            for r in reg.replicas:
                if self.image.is_usable(r):
                    new = self._change(req.tp, acts, force_leader=r, how="manual unclean election")
                    break
        code = ErrorCode.none if new.leader != NO_LEADER else ErrorCode.eligible_leaders_not_available
        return ElectLeadersResponse(req.correlation_id, req.tp, code, new.leader)

    # ------------------------------------------------------------ reassignments
    def _on_alter_reassignment(self, req: AlterReassignmentRequest, acts: Actions) -> AlterReassignmentResponse:
        """Start, replace or cancel the reassignment of one partition (KRaft's
        alterPartitionReassignment): the target replicas join, and once they are all in the
        ISR the replicas they replace leave (election.py, completed by any later change)."""
        try:
            self._reassign(req, acts)
        except AdminError as e:
            return AlterReassignmentResponse(req.correlation_id, req.tp, e.code, e.message)
        return AlterReassignmentResponse(req.correlation_id, req.tp, ErrorCode.none)

    def _reassign(self, req: AlterReassignmentRequest, acts: Actions) -> None:
        reg = self.image.partitions.get(req.tp)
        if reg is None:
            raise AdminError(ErrorCode.unknown_topic_or_partition, f"Unable to find partition {req.tp.topic}:{req.tp.partition}.")
        if req.replicas is None:
            if not reg.reassigning:
                raise AdminError(ErrorCode.no_reassignment_in_progress, "No partition reassignment is in progress.")
            original, isr, unclean = reassignment_revert(reg)
            if unclean and not self._policy(req.tp.topic).unclean:
                raise AdminError(ErrorCode.invalid_replica_assignment, f"Unable to revert partition assignment for "
                                 f"{req.tp.topic}:{req.tp.partition} because it would require an unclean leader election.")
            self._change(req.tp, acts, target_isr=isr, assignment=original)
            return
        check_assignment(self.image, req.replicas)
        if not req.allow_rf_change and len(req.replicas) != len(reg.target_replicas):
            raise AdminError(ErrorCode.invalid_replication_factor, f"The replication factor is changed from "
                             f"{len(reg.target_replicas)} to {len(req.replicas)}, which is not allowed.")
        self._change(req.tp, acts, assignment=reassignment_to(reg, req.replicas))
