"""The config APIs: DescribeConfigs (every property of the table with its value and source),
AlterConfigs and IncrementalAlterConfigs.

Topic configs and dynamic broker configs (a broker's own, or the cluster-wide defaults
under the broker name "") are changed through the active controller, which writes them as
`ConfigRecord`s (broker/core/admin_rules.py has the rules), so they survive a controller
failover; the answer waits until this broker's metadata shows them. A dynamic broker config
that is a topic config's synonym (e.g. `log.retention.ms`) is the default of every topic
that does not set it (`MetadataImage.topic_config`); the rest are read-only, as Kafka's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.config import ConfigEntry, broker_config_entries, dynamic_config_entries, topic_config_entries
from broker.core.admin_rules import AdminError, config_records
from broker.core.messages import CONFIG_SET, AlterConfigsRequest, ConfigChange
from broker.core.metadata import BROKER_RESOURCE, CLUSTER_DEFAULT, TOPIC_RESOURCE
from broker.core.properties import ConfigSource, ConfigType, dynamic
from broker.server.api_admin import TIMED_OUT, topic_settable
from broker.server.api_base import ADMIN_FALLBACK_TIMEOUT_S, ApiFamily, Req
from broker.wire import kafka as k

E = ErrorCode
FLUSH_POLICY = "wrack.flush.policy"  # a read-only line of a broker's DescribeConfigs, not a property
# (not a topic's: clients set back every line they read with the legacy AlterConfigs, librdkafka 0092)
METADATA_WAIT_S = 5.0  # how long an AlterConfigs answer waits for this broker's metadata to show the change


class ConfigApis(ApiFamily):
    def apis(self) -> dict[int, Callable[[Req, Any], None]]:
        return {k.DESCRIBE_CONFIGS: self.describe_configs, k.ALTER_CONFIGS: self.alter_configs,
                k.INCREMENTAL_ALTER_CONFIGS: self.incremental_alter_configs}

    # ------------------------------------------------------------ DescribeConfigs
    def describe_configs(self, req: Req, body: Any) -> None:
        out = []
        docs = bool(getattr(body, "include_documentation", False))
        for res in body.resources:
            keys = set(res.configuration_keys) if res.configuration_keys else None
            entries, err = self._entries(res.resource_type, res.resource_name)
            if err is not None:
                out.append({**err, "resource_type": res.resource_type, "resource_name": res.resource_name, "configs": []})
                continue
            topic = res.resource_type == TOPIC_RESOURCE
            configs = [
                {"name": e.name, "value": e.value,
                 "read_only": not topic_settable(e.name) if topic else dynamic(e.name) is None,
                 "config_source": e.source, "is_sensitive": False, "synonyms": [], "config_type": e.type,
                 "documentation": e.doc if docs else None, "is_default": e.source == ConfigSource.DEFAULT_CONFIG}
                for e in sorted(entries.values(), key=lambda e: e.name) if keys is None or e.name in keys
            ]
            out.append({"error_code": E.none, "error_message": None, "resource_type": res.resource_type,
                        "resource_name": res.resource_name, "configs": configs})
        req.reply({"throttle_time": 0, "results": out})

    def _entries(self, resource_type: int, name: str) -> tuple[dict[str, ConfigEntry], dict[str, Any] | None]:
        """The DescribeConfigs lines of a resource, or the error answering it."""
        if resource_type == TOPIC_RESOURCE:
            if name not in self.image.topics:
                return {}, {"error_code": E.unknown_topic_or_partition, "error_message": f"no topic {name!r}"}
            entries = topic_config_entries(self.s, self.image.topics.get(name, {}), *self._dynamic())
        elif resource_type == BROKER_RESOURCE:
            err = self._broker_name_error(name)
            if err is not None:
                return {}, err
            if name == CLUSTER_DEFAULT:  # as Kafka: the cluster-wide dynamic defaults only
                return dynamic_config_entries(self._dynamic()[0], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG), None
            entries = broker_config_entries(self.s, *self._dynamic())
            entries[FLUSH_POLICY] = self._flush_policy()
        else:
            return {}, {"error_code": E.invalid_request, "error_message": f"resource type {resource_type} is not supported"}
        return entries, None

    def _dynamic(self) -> tuple[dict[str, str], dict[str, str]]:
        """The dynamic broker configs: the cluster-wide defaults, and this broker's own."""
        configs = self.image.broker_configs
        return configs.get(CLUSTER_DEFAULT, {}), configs.get(str(self.node.node_id), {})

    def _broker_name_error(self, name: str) -> dict[str, Any] | None:
        if name in ("", str(self.node.node_id)):
            return None
        return {"error_code": E.invalid_request,
                "error_message": f"Unexpected broker id, expected {self.node.node_id} but received {name}"}

    def _flush_policy(self) -> ConfigEntry:
        """`wrack.flush.policy`: not a property but the storage's description of the flush
        policy the log.flush.* properties make (read-only)."""
        store = self.node.store
        given = any(k.startswith("log.flush.") for k in self.s.storage)
        return ConfigEntry(FLUSH_POLICY, store.describe_flush_policy() if store is not None else "",
                           ConfigSource.STATIC_BROKER_CONFIG if given else ConfigSource.DEFAULT_CONFIG, ConfigType.STRING,
                           "How the storage flushes (from the log.flush.* properties).")

    # ------------------------------------------------------------ AlterConfigs / IncrementalAlterConfigs
    def alter_configs(self, req: Req, body: Any) -> None:
        """The legacy AlterConfigs: a resource's configs become exactly the ones given."""
        self.spawn(req, body, self._alter(req, body, incremental=False))

    def incremental_alter_configs(self, req: Req, body: Any) -> None:
        self.spawn(req, body, self._alter(req, body, incremental=True))

    async def _alter(self, req: Req, body: Any, incremental: bool) -> None:
        resources = list(body.resources)
        ids = [(r.resource_type, r.resource_name) for r in resources]
        results: dict[int, dict[str, Any]] = {}
        asks: dict[int, AlterConfigsRequest] = {}
        for i, res in enumerate(resources):
            changes = tuple(ConfigChange(c.name, c.config_operation if incremental else CONFIG_SET, c.value)
                            for c in res.configs)
            msg = AlterConfigsRequest(self.node.new_cid(), res.resource_type, res.resource_name, changes,
                                      replace=not incremental, validate_only=body.validate_only)
            if ids.count(ids[i]) > 1:
                results[i] = {"error_code": E.invalid_request, "error_message": "Each resource must appear at most once."}
            elif res.resource_type == TOPIC_RESOURCE:
                asks[i] = msg
            elif res.resource_type == BROKER_RESOURCE:
                err = self._broker_name_error(res.resource_name)
                if err is None:
                    asks[i] = msg
                else:
                    results[i] = err
            else:
                results[i] = {"error_code": E.invalid_request, "error_message": f"Unknown resource type {res.resource_type}"}
        for i, resp in (await self.ask_controller(asks, ADMIN_FALLBACK_TIMEOUT_S)).items():
            results[i] = TIMED_OUT if resp is None else {"error_code": resp.error, "error_message": resp.message or None}
        applied = [m for i, m in asks.items() if results[i]["error_code"] is E.none and not m.validate_only]
        if applied:  # answer once this broker's metadata shows the change (a DescribeConfigs may follow)
            await self.await_metadata(lambda: all(self._shown(m) for m in applied), METADATA_WAIT_S)
        req.reply({"throttle_time": 0, "responses": [
            {**results[i], "resource_type": r.resource_type, "resource_name": r.resource_name} for i, r in enumerate(resources)]})

    def _shown(self, msg: AlterConfigsRequest) -> bool:
        """Whether this broker's metadata already holds the change (nothing left to write)."""
        try:
            return not config_records(self.image, msg.resource_type, msg.resource_name, msg.changes, msg.replace)
        except AdminError:
            return True  # e.g. the topic is gone meanwhile
