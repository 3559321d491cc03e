"""`validate FILE...`: schema and sense checks for configs and manifests, meant for pull-request CI.

Errors make the command exit 2; warnings (a hand-edited minSize/maxSize mirror) are printed but do not
fail the build. A manifest is compared with its previous version in Git when there is one: the file
as committed at HEAD if the working copy differs, else HEAD's first parent (in a pull-request
checkout of a merge commit, that is the target branch).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git
from ruamel.yaml.comments import CommentedMap

from reconciler.aws.clients import known_regions
from reconciler.config.documents import (
    Problem,
    check,
    clip,
    decode_utf8,
    parse_yaml,
    read_bounded,
    text_too_big,
)
from reconciler.config.settings import config_from_document
from reconciler.domain.errors import UserError
from reconciler.domain.lease_names import apply_lease_name, kube_cluster_name, leader_lease_name
from reconciler.gitops.manifest import (
    document_problems,
    from_document,
    mirror_edits,
    problem_from_error,
)

PreviousText = Callable[[Path], str | None]


@dataclass(frozen=True)
class Report:
    errors: tuple[Problem, ...] = ()
    warnings: tuple[Problem, ...] = ()

    @property
    def exit_code(self) -> int:
        return 2 if self.errors else 0


def validate_files(paths: Sequence[Path], previous: PreviousText | None = None) -> Report:
    """Check each file as a config or a manifest (whichever it looks like)."""
    errors: list[Problem] = []
    warnings: list[Problem] = []
    lookup = previous or previous_from_git
    for path in paths:
        label = str(path)
        outside = _links_out(Path(path))
        if outside:
            errors.append(Problem(label, None, "", outside))
            continue
        try:
            document = parse_yaml(decode_utf8(read_bounded(Path(path), label), label), label)
        except FileNotFoundError:
            errors.append(Problem(label, None, "", "cannot read: No such file or directory"))
            continue
        except UserError as exc:
            errors.append(problem_from_error(exc, label))
            continue
        if looks_like_manifest(document):
            found = document_problems(document, label)
            errors += found
            if not found:
                warnings += _mirror_warnings(document, label, lookup(Path(path)))
        else:
            found = _config_problems(document, label)
            errors += found
            if not found:
                warnings += _region_warnings(document, label) + _lease_name_warnings(document, label)
    return Report(tuple(errors), tuple(warnings))


def _region_warnings(document: Any, label: str) -> list[Problem]:
    """A region botocore does not know: every command refuses it on AWS's own endpoints."""
    region = document.get("region") if isinstance(document, dict) else None
    if not isinstance(region, str) or not region or region in known_regions():
        return []
    close = difflib.get_close_matches(region, sorted(known_regions()), n=2, cutoff=0.75)
    guess = f" (did you mean {' or '.join(close)}?)" if close else ""
    line = document.lc.key("region")[0] + 1 if isinstance(document, CommentedMap) else None
    return [
        Problem(
            label,
            line,
            "region",
            f"{clip(region)!r} is not an AWS region botocore knows{guess}: every command refuses it unless "
            "AWS_ENDPOINT_URL_AUTOSCALING and AWS_ENDPOINT_URL_EC2 point at endpoints of your own",
        )
    ]


def _lease_name_warnings(document: Any, label: str) -> list[Problem]:
    """A cluster name that is no Kubernetes name (`Prod_EKS`) gets derived Lease names: the RBAC a
    deployment ships must grant those (base/cluster.yaml), so say them where the config is checked."""
    cluster = document.get("cluster") if isinstance(document, dict) else None
    if not isinstance(cluster, str) or kube_cluster_name(cluster) == cluster:
        return []
    derived = kube_cluster_name(cluster)
    line = document.lc.key("cluster")[0] + 1 if isinstance(document, CommentedMap) else None
    return [
        Problem(
            label,
            line,
            "cluster",
            f"{cluster!r} is not a Kubernetes name (lowercase letters, digits, '-' and '.'), so the Leases "
            f"carry {derived} instead ({apply_lease_name(cluster)}, "
            f"{leader_lease_name('plan', cluster)}, {leader_lease_name('apply', cluster)}); Git keeps "
            f"{cluster}. Grant those in RBAC: in examples/kubernetes set data.cluster in base/cluster.yaml "
            f"to {derived}",
        )
    ]


def _links_out(path: Path) -> str:
    """Pull-request CI runs validate on files the pull request chose, symlinks included: one that
    leads out of the folder it sits in (to the runner's credentials, say) is not read, so no part
    of that file can be quoted in an error. A link within its folder (a ConfigMap mount's
    `..data/`) is followed."""
    if not path.is_symlink():
        return ""
    folder = path.absolute().parent.resolve()
    target = path.resolve()
    if target == folder or folder in target.parents:
        return ""
    return (
        "a symlink to a file outside its folder: not followed (validate reads files a pull request "
        "may have chosen); commit the file itself, or validate its target by its own path"
    )


def looks_like_manifest(document: Any) -> bool:
    """Manifests map group names to mappings; configs hold autoDiscovery/explicit lists there."""
    if not isinstance(document, dict):
        return False
    groups = document.get("nodeGroups")
    if isinstance(groups, dict) and groups:
        return any(isinstance(v, dict) for v in groups.values())
    return "version" in document or (set(document) <= {"cluster", "nodeGroups"} and "nodeGroups" in document)


def _config_problems(document: Any, label: str) -> list[Problem]:
    problems = check(document, "config", label) if isinstance(document, dict) else []
    if problems:
        return problems
    try:
        config_from_document(document, label)
    except UserError as exc:
        return [problem_from_error(exc, label)]
    return []


def _mirror_warnings(document: Any, label: str, previous_text: str | None) -> list[Problem]:
    if previous_text is None:
        return []
    try:
        text_too_big(previous_text, f"{label} (previous)")
        before = parse_yaml(previous_text, f"{label} (previous)")
    except UserError:
        return []
    if document_problems(before, label):
        return []
    return mirror_edits(from_document(before), from_document(document, label), label)


def previous_from_git(path: Path) -> str | None:
    """The version to compare with: HEAD's if the file has local changes, else HEAD^'s; None outside Git."""
    try:
        repo = git.Repo(path.resolve().parent, search_parent_directories=True)
        relative = path.resolve().relative_to(Path(repo.working_tree_dir or "").resolve()).as_posix()
        current = path.read_text(encoding="utf-8")
        at_head = _show(repo, f"HEAD:{relative}")
        if at_head is not None and at_head != current:
            return at_head
        return _show(repo, f"HEAD^:{relative}")
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError, OSError):
        return None


def _show(repo: git.Repo, spec: str) -> str | None:
    try:
        text: str = repo.git.execute(["git", "show", spec], strip_newline_in_stdout=False)
        return text
    except git.GitCommandError:
        return None
