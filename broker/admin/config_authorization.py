"""Which ACL a config resource needs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs), as
Kafka's ConfigHelper and KafkaApis check it: a TOPIC resource the operation on the topic (else
TOPIC_AUTHORIZATION_FAILED), a GROUP resource on the group, a BROKER, BROKER_LOGGER or
CLIENT_METRICS resource the operation on the cluster (else CLUSTER_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType

CONFIG_TOPIC, CONFIG_GROUP = 2, 32


def refusal(authz, op: AclOperation, config_resource_type: int, name: str) -> tuple[ErrorCode, str] | None:
    """(error, message) when the principal may not `op` (DESCRIBE_CONFIGS or ALTER_CONFIGS) the
    resource; None when it may."""
    if config_resource_type == CONFIG_TOPIC:
        if authz.allowed(op, ResourceType.TOPIC, name):
            return None
        return ErrorCode.topic_authorization_failed, f"Topic authorization failed for {name}"
    if config_resource_type == CONFIG_GROUP:
        if authz.allowed(op, ResourceType.GROUP, name):
            return None
        return ErrorCode.group_authorization_failed, f"Group authorization failed for {name}"
    if authz.allowed(op, ResourceType.CLUSTER, CLUSTER_NAME):
        return None
    return ErrorCode.cluster_authorization_failed, "Cluster authorization failed."


def refused_alteration(ctx, resource):
    """The AlterConfigsResourceResponse refusing `resource` (AlterConfigs and IncrementalAlterConfigs
    answer alike) when the principal may not ALTER_CONFIGS it; None when it may."""
    refused = refusal(ctx.authz, AclOperation.ALTER_CONFIGS, int(resource.resource_type), resource.resource_name)
    if refused is None:
        return None
    return ctx.build("AlterConfigsResourceResponse", error_code=refused[0], error_message=refused[1],
                     resource_type=resource.resource_type, resource_name=resource.resource_name)
