"""The ACL APIs: DescribeAcls from this broker's metadata image, CreateAcls and
DeleteAcls through the active controller (metadata records, broker/core/acls.py for the
rules). ACLs are stored and listed only: this broker authorizes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.core import acls
from broker.core.acls import AclBinding, AclFilter
from broker.core.messages import AclDeleteResult, AclResult, CreateAclsRequest, DeleteAclsRequest
from broker.server.api_base import ApiFamily, Req
from broker.wire import kafka as k

E = ErrorCode
ACL_TIMEOUT_S = 30.0  # how long CreateAcls/DeleteAcls wait for the controller
PROPAGATION_S = 5.0  # and then for this broker's image to show the change


def filter_of(f: Any) -> AclFilter:
    """An `AclFilter` from a DescribeAcls request or a DeleteAcls filter."""
    return AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                     f.host_filter, f.operation, f.permission_type)


def describe(image_acls: dict[str, AclBinding], f: AclFilter) -> list[dict[str, Any]]:
    """DescribeAcls resources: the matching bindings grouped by resource pattern."""
    by_resource: dict[tuple[int, str, int], list[AclBinding]] = {}
    for b in image_acls.values():
        if acls.matches(f, b):
            by_resource.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(b)
    return [{"resource_type": rt, "resource_name": name, "pattern_type": pt,
             "acls": [{"principal": b.principal, "host": b.host, "operation": b.operation,
                       "permission_type": b.permission_type}
                      for b in sorted(bs, key=lambda b: (b.principal, b.host, b.operation, b.permission_type))]}
            for (rt, name, pt), bs in sorted(by_resource.items())]


class AclApis(ApiFamily):
    def apis(self) -> dict[int, Callable[[Req, Any], None]]:
        return {k.DESCRIBE_ACLS: self.describe_acls, k.CREATE_ACLS: self.create_acls, k.DELETE_ACLS: self.delete_acls}

    def describe_acls(self, req: Req, body: Any) -> None:
        f = filter_of(body)
        why = acls.filter_error(f)
        if why is not None:
            req.reply({"throttle_time": 0, "error_code": E.invalid_request, "error_message": why, "resources": []})
            return
        req.reply({"throttle_time": 0, "error_code": E.none, "error_message": None,
                   "resources": describe(self.image.acls, f)})

    def create_acls(self, req: Req, body: Any) -> None:
        creations = tuple(AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                                     c.operation, c.permission_type) for c in body.creations)

        def answer(results: tuple[AclResult, ...]) -> None:
            req.reply({"throttle_time": 0, "results": [
                {"error_code": r.error, "error_message": r.message or None} for r in results]})

        def shown(_results: tuple[AclResult, ...]) -> bool:
            stored = set(self.image.acls.values())
            return all(b in stored for b in creations if acls.binding_error(b) is None)

        self._via_controller(CreateAclsRequest(self.node.new_cid(), creations), len(creations), answer, shown)

    def delete_acls(self, req: Req, body: Any) -> None:
        filters = tuple(filter_of(f) for f in body.filters)

        def answer(results: tuple[AclDeleteResult, ...]) -> None:
            out = []
            for r in results:
                out.append({"error_code": r.error, "error_message": r.message or None, "matching_acls": [
                    {"error_code": E.none, "error_message": None, "resource_type": b.resource_type,
                     "resource_name": b.resource_name, "pattern_type": b.pattern_type, "principal": b.principal,
                     "host": b.host, "operation": b.operation, "permission_type": b.permission_type}
                    for b in r.matching]})
            req.reply({"throttle_time": 0, "filter_results": out})

        def shown(results: tuple[AclDeleteResult, ...]) -> bool:
            matched = {b for r in results for b in r.matching}
            return not matched & set(self.image.acls.values())

        self._via_controller(DeleteAclsRequest(self.node.new_cid(), filters), len(filters), answer, shown)

    def _via_controller(self, msg: Any, n: int, answer: Callable[[Any], None], shown: Callable[[Any], bool]) -> None:
        """Forward `msg`; answer with its results once this broker's image shows them (at
        most PROPAGATION_S later), or REQUEST_TIMED_OUT for each of the `n` items."""
        fut = self.node.forward_to_controller(msg)
        loop = asyncio.get_running_loop()
        timer = loop.call_later(ACL_TIMEOUT_S, lambda: fut.done() or fut.cancel())

        def done(f: asyncio.Future[Any]) -> None:
            timer.cancel()
            if f.cancelled():
                answer(tuple(AclDeleteResult(E.request_timed_out, "the controller did not answer in time")
                             for _ in range(n)))
                return
            results = f.result().results
            wait = self.node.wait_for_metadata(lambda: shown(results))
            guard = loop.call_later(PROPAGATION_S, lambda: wait.done() or wait.cancel())

            def shown_or_late(_w: asyncio.Future[None]) -> None:
                guard.cancel()
                answer(results)

            wait.add_done_callback(shown_or_late)

        fut.add_done_callback(done)
