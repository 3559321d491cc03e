"""EC2 instance type facts a node template needs, from DescribeInstanceTypes.

Instance types do not change while a process runs, so answers (including "no such type") are cached
per process and per endpoint: the long-running loop asks once, not every 30 seconds. Known types are
also kept on disk between one-shot runs (reconciler/aws/cache.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast

from botocore.exceptions import ClientError

from reconciler.aws.clients import error_code

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.literals import InstanceTypeType
    from mypy_boto3_ec2.type_defs import InstanceTypeInfoTypeDef

TYPES_PER_CALL = 100  # DescribeInstanceTypes accepts at most 100 names
_UNKNOWN_TYPE = "InvalidInstanceType"
_ARCH = {"x86_64": "amd64", "arm64": "arm64", "i386": "386", "x86_64_mac": "amd64", "arm64_mac": "arm64"}


@dataclass(frozen=True)
class InstanceTypeInfo:
    name: str
    vcpus: int
    memory_mib: int
    architecture: str  # as the kubernetes.io/arch label spells it: amd64, arm64
    max_enis: int
    ipv4_per_eni: int
    gpu_count: int = 0
    gpu_manufacturer: str = ""


def info_from_api(item: InstanceTypeInfoTypeDef) -> InstanceTypeInfo:
    archs = item.get("ProcessorInfo", {}).get("SupportedArchitectures", [])
    preferred = next((a for a in ("x86_64", "arm64") if a in archs), archs[0] if archs else "x86_64")
    gpus = item.get("GpuInfo", {}).get("Gpus", [])
    network = item.get("NetworkInfo", {})
    return InstanceTypeInfo(
        name=item.get("InstanceType", ""),
        vcpus=item.get("VCpuInfo", {}).get("DefaultVCpus", 0),
        memory_mib=item.get("MemoryInfo", {}).get("SizeInMiB", 0),
        architecture=_ARCH.get(preferred, preferred),
        max_enis=network.get("MaximumNetworkInterfaces", 0),
        ipv4_per_eni=network.get("Ipv4AddressesPerInterface", 0),
        gpu_count=sum(gpu.get("Count", 0) for gpu in gpus),
        gpu_manufacturer=gpus[0].get("Manufacturer", "") if gpus else "",
    )


class KnownTypes(Protocol):
    """A longer-lived store of answers (the disk cache)."""

    def instance_type(self, name: str) -> InstanceTypeInfo | None: ...
    def add_instance_types(self, infos: list[InstanceTypeInfo]) -> None: ...


_cache: dict[tuple[str, str], dict[str, InstanceTypeInfo | None]] = {}
_lock = threading.Lock()


def clear_cache() -> None:
    with _lock:
        _cache.clear()


def describe_instance_types(
    ec2: EC2Client, names: Iterable[str], stored: KnownTypes | None = None
) -> dict[str, InstanceTypeInfo]:
    """Facts for each known name; names EC2 does not know are left out (and remembered as unknown)."""
    key = (str(ec2.meta.endpoint_url), str(ec2.meta.region_name))
    wanted = sorted(set(names))
    with _lock:
        known = _cache.setdefault(key, {})
        todo = [name for name in wanted if name not in known]
    if stored is not None:
        found = {name: info for name in todo if (info := stored.instance_type(name)) is not None}
        with _lock:
            known.update(found)
        todo = [name for name in todo if name not in found]
    for start in range(0, len(todo), TYPES_PER_CALL):
        answers = _describe_batch(ec2, todo[start : start + TYPES_PER_CALL])
        with _lock:
            known.update(answers)
        if stored is not None:
            stored.add_instance_types([info for info in answers.values() if info is not None])
    return {name: info for name in wanted if (info := known.get(name)) is not None}


def _describe_batch(ec2: EC2Client, batch: list[str]) -> dict[str, InstanceTypeInfo | None]:
    """One paged call; if EC2 rejects a name it fails the whole batch, so then ask one by one."""
    try:
        found = _describe(ec2, batch)
    except ClientError as exc:
        if error_code(exc) != _UNKNOWN_TYPE:
            raise
        if len(batch) == 1:
            return {batch[0]: None}
        answers: dict[str, InstanceTypeInfo | None] = {}
        for name in batch:
            answers.update(_describe_batch(ec2, [name]))
        return answers
    return {name: found.get(name) for name in batch}


def _describe(ec2: EC2Client, batch: list[str]) -> dict[str, InstanceTypeInfo]:
    paginator = ec2.get_paginator("describe_instance_types")
    names = cast("list[InstanceTypeType]", batch)  # the stubs list every type AWS had when generated
    pages = paginator.paginate(InstanceTypes=names, PaginationConfig={"PageSize": TYPES_PER_CALL})
    infos = (info_from_api(item) for page in pages for item in page.get("InstanceTypes", []))
    return {info.name: info for info in infos}
