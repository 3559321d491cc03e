"""Discovery that finds nothing says where it looked (issue 20): the region as resolved and where it
came from, every tag of every autoDiscovery spec (all must match) with its value, the explicit names."""

from __future__ import annotations

from reconciler.aws.discovery import nothing_found
from reconciler.config.settings import config_from_document


def test_it_names_the_region_from_the_config_each_tag_and_the_names() -> None:
    text = nothing_found(
        config_from_document(
            {
                "cluster": "prod",
                "region": "eu-west-1",
                "nodeGroups": {
                    "autoDiscovery": [
                        "asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod=owned",
                        "asg:tag=team=batch",
                    ],
                    "explicit": ["0:6:gpu-a", "1:3:gpu-b"],
                },
            },
            "asg-reconciler.yaml",
        ),
        "eu-west-1",
    )
    assert "\n" not in text
    assert "region eu-west-1 (region: in the config)" in text
    wanted = "k8s.io/cluster-autoscaler/enabled (any value) and k8s.io/cluster-autoscaler/prod=owned"
    assert f"all of the tags {wanted}" in text
    assert "all of the tags team=batch" in text
    assert "named gpu-a, gpu-b" in text
    assert "wrong region is the common cause" in text


def test_a_region_from_the_environment_says_so() -> None:
    text = nothing_found(
        config_from_document(
            {"cluster": "prod", "nodeGroups": {"autoDiscovery": ["asg:tag=k8s.io/cluster-autoscaler/prod"]}},
            "asg-reconciler.yaml",
        ),
        "us-west-2",
    )
    assert "region us-west-2 (from the AWS environment: AWS_REGION, AWS_DEFAULT_REGION or the profile" in text
    assert "named" not in text


def test_a_config_that_names_no_group_at_all_says_so() -> None:
    text = nothing_found(config_from_document({"cluster": "prod"}, "asg-reconciler.yaml"), "us-east-1")
    assert "nodeGroups is empty (neither autoDiscovery nor explicit is set)" in text
    assert "region" not in text  # no region is the cause of looking nowhere
