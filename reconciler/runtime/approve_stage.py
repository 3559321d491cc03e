"""`approve`, once: the caller merges a proposal with their own signature (approval.mode signed).

The merge is checked with the signed gate before it is pushed when the allowed-signers file is
readable here, so a key apply would refuse never lands an approval that cannot be applied.
"""

from __future__ import annotations

from pathlib import Path

from reconciler.apply.approval import make_gate
from reconciler.config.settings import Config
from reconciler.domain.errors import UserError
from reconciler.domain.verdict import Verdict
from reconciler.gitops.approve import approve
from reconciler.gitops.manifest import for_cluster, parse_manifest


def proposal_branch_name(config: Config, proposal: str) -> str:
    """`scale-down` is this cluster's `asg-reconciler/<cluster>/scale-down`; a full name stays."""
    return proposal if "/" in proposal else f"asg-reconciler/{config.cluster}/{proposal}"


def approve_once(config: Config, proposal: str, expected_head: str | None) -> str:
    if not config.git.url:
        raise UserError(
            f"{config.source or 'config'}: git.url: not set (point it at the capacity repository)"
        )
    verify = None
    if config.approval.mode == "signed" and Path(config.approval.allowed_signers).is_file():
        gate = make_gate(config)

        def verify(sha: str, repo: Path) -> Verdict:
            return gate.check(sha, repo)

    return approve(
        config.git.url,
        proposal_branch_name(config, proposal),
        config.git.branch,
        expected_head=expected_head,
        verify=verify,
        manifest=(config.manifest_path, lambda text, label: _manifest_problem(config, text, label)),
    )


def _manifest_problem(config: Config, text: str, label: str) -> str | None:
    """What makes the merged manifest one apply would refuse (another cluster's included)."""
    try:
        for_cluster(parse_manifest(text, label), config.cluster, f"the config ({config.source or 'config'})")
    except UserError as exc:
        return str(exc)
    return None
