"""The simulator's shipped EC2 facts (reconciler/simulation/data/) against public reference tables.

The expected numbers are copied from (not fetched by the test):

- max pods: aws/amazon-vpc-cni-k8s misc/eni-max-pods.txt, and the ENI and IPv4-per-ENI limits from
  pkg/vpc/vpc_ip_resource_limit.go (ENILimit, IPv4Limit), both at commit
  b52188387f2e2f10bf289ace929d6a63b176a4fa (2026-08-20; both files last changed in
  6152e01c83bb8f04fdc8690e99134ebe1445db29). eni-max-pods.txt is ENIs * (IPv4 per ENI - 1) + 2.
- vCPUs and memory: kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/ec2_instance_types.go
  (VCPU, MemoryMb, which is MiB) at commit 55c37cd5eb550756c5ccc5a89e9068d77797e575.

A type added to instance_types.json must be added here too, with its numbers from those files.
"""

import json
from importlib import resources
from typing import Any

from reconciler.aws.allocatable import vpc_cni_max_pods
from reconciler.runtime.price_table import prices_from_document
from reconciler.simulation.cluster import instance_types_from_document

# type: (max pods from eni-max-pods.txt, ENILimit, IPv4Limit)
VPC_CNI = {
    "c5.2xlarge": (58, 4, 15),
    "c5.4xlarge": (234, 8, 30),
    "c5.large": (29, 3, 10),
    "c5.xlarge": (58, 4, 15),
    "c6i.2xlarge": (58, 4, 15),
    "c6i.4xlarge": (234, 8, 30),
    "c6i.large": (29, 3, 10),
    "c6i.xlarge": (58, 4, 15),
    "m5.2xlarge": (58, 4, 15),
    "m5.4xlarge": (234, 8, 30),
    "m5.large": (29, 3, 10),
    "m5.xlarge": (58, 4, 15),
    "m6i.2xlarge": (58, 4, 15),
    "m6i.4xlarge": (234, 8, 30),
    "m6i.large": (29, 3, 10),
    "m6i.xlarge": (58, 4, 15),
    "m7i.2xlarge": (58, 4, 15),
    "m7i.4xlarge": (234, 8, 30),
    "m7i.large": (29, 3, 10),
    "m7i.xlarge": (58, 4, 15),
    "r5.2xlarge": (58, 4, 15),
    "r5.4xlarge": (234, 8, 30),
    "r5.large": (29, 3, 10),
    "r5.xlarge": (58, 4, 15),
    "r6i.2xlarge": (58, 4, 15),
    "r6i.4xlarge": (234, 8, 30),
    "r6i.large": (29, 3, 10),
    "r6i.xlarge": (58, 4, 15),
    "t3.2xlarge": (58, 4, 15),
    "t3.large": (35, 3, 12),
    "t3.medium": (17, 3, 6),
    "t3.small": (11, 3, 4),
    "t3.xlarge": (58, 4, 15),
}

# type: (VCPU, MemoryMb) from cluster-autoscaler's ec2_instance_types.go
EC2_SPECS = {
    "c5.2xlarge": (8, 16384),
    "c5.4xlarge": (16, 32768),
    "c5.large": (2, 4096),
    "c5.xlarge": (4, 8192),
    "c6i.2xlarge": (8, 16384),
    "c6i.4xlarge": (16, 32768),
    "c6i.large": (2, 4096),
    "c6i.xlarge": (4, 8192),
    "m5.2xlarge": (8, 32768),
    "m5.4xlarge": (16, 65536),
    "m5.large": (2, 8192),
    "m5.xlarge": (4, 16384),
    "m6i.2xlarge": (8, 32768),
    "m6i.4xlarge": (16, 65536),
    "m6i.large": (2, 8192),
    "m6i.xlarge": (4, 16384),
    "m7i.2xlarge": (8, 32768),
    "m7i.4xlarge": (16, 65536),
    "m7i.large": (2, 8192),
    "m7i.xlarge": (4, 16384),
    "r5.2xlarge": (8, 65536),
    "r5.4xlarge": (16, 131072),
    "r5.large": (2, 16384),
    "r5.xlarge": (4, 32768),
    "r6i.2xlarge": (8, 65536),
    "r6i.4xlarge": (16, 131072),
    "r6i.large": (2, 16384),
    "r6i.xlarge": (4, 32768),
    "t3.2xlarge": (8, 32768),
    "t3.large": (2, 8192),
    "t3.medium": (2, 4096),
    "t3.small": (2, 2048),
    "t3.xlarge": (4, 16384),
}


def _packaged(name: str) -> Any:
    return json.loads(resources.files("reconciler.simulation").joinpath("data", name).read_text())


def test_the_reference_tables_cover_exactly_the_shipped_types() -> None:
    types = instance_types_from_document(_packaged("instance_types.json"), "instance_types.json")
    assert sorted(types) == sorted(VPC_CNI) == sorted(EC2_SPECS)


def test_max_pods_of_each_shipped_type_is_the_vpc_cni_table() -> None:
    types = instance_types_from_document(_packaged("instance_types.json"), "instance_types.json")
    for name, info in types.items():
        max_pods, enis, ipv4 = VPC_CNI[name]
        assert vpc_cni_max_pods(info.max_enis, info.ipv4_per_eni) == max_pods, name
        assert (info.max_enis, info.ipv4_per_eni) == (enis, ipv4), name
        assert enis * (ipv4 - 1) + 2 == max_pods, f"{name}: the copied numbers disagree with each other"


def test_vcpus_and_memory_of_each_shipped_type() -> None:
    types = instance_types_from_document(_packaged("instance_types.json"), "instance_types.json")
    for name, info in types.items():
        assert (info.vcpus, info.memory_mib) == EC2_SPECS[name], name
        assert info.architecture == "amd64", name


def test_every_shipped_type_has_a_price_and_every_price_a_type() -> None:
    document = _packaged("prices.json")
    prices = prices_from_document(document, "prices.json")
    assert document["region"] == "us-east-1" and document["currency"] == "USD"
    assert sorted(prices) == sorted(VPC_CNI)
    for name, price in prices.items():
        assert 0 < price < 5, name
