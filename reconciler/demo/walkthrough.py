"""`asg-reconciler demo`: the bundled example cluster on a fake Kubernetes API, an in-process AWS
mock and a local Git repository, told as plan -> review -> apply.

Nothing is special-cased: the demo loads the cluster into the fake API, writes a config file and a
bare Git repository, then runs the very CLI commands it prints.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from reconciler.demo.kube_api import FakeKubeAPI
from reconciler.demo.mock_aws import REGION, create_groups, group_instances, mock_aws
from reconciler.domain.errors import UserError

Echo = Callable[[str], None]
Command = Callable[[list[str]], None]  # runs one asg-reconciler command line
_PLACEHOLDER = re.compile(r"\{\{(instance|zone):([\w-]+):(\d+)\}\}")
PROPOSAL = "asg-reconciler/demo/scale-down"


def _cluster(instances: dict[str, list[tuple[str, str]]]) -> list[dict[str, Any]]:
    template = resources.files("reconciler.demo").joinpath("cluster.yaml").read_text()

    def fill(match: re.Match[str]) -> str:
        instance_id, zone = instances[match[2]][int(match[3])]
        return instance_id if match[1] == "instance" else zone

    # our own packaged template, which shares labels and capacities through anchors; never YAML we
    # are handed (that goes through documents.yaml_loader, which refuses anchors)
    document = YAML(typ="safe", pure=True).load(_PLACEHOLDER.sub(fill, template))
    items: list[dict[str, Any]] = document["items"]
    return items


def _write(path: Path, items: Sequence[dict[str, Any]]) -> Path:
    """The snapshot as kubectl writes one: every value spelt out, no anchors for shared objects
    (the snapshot reader refuses them, as it refuses any YAML bomb)."""
    yaml = YAML(typ="safe", pure=True)
    yaml.representer.ignore_aliases = lambda _data: True
    with path.open("w") as handle:
        yaml.dump({"apiVersion": "v1", "kind": "List", "items": list(items)}, handle)
    return path


def _settled(kube: FakeKubeAPI, instances: dict[str, list[tuple[str, str]]]) -> list[dict[str, Any]]:
    """The cluster the walkthrough leaves, an hour later: the instances its scale-up launched are
    up (a Node like the others of their group, no pods on it: idle) and the batch jobs are done
    (their pods gone). Planned on (`plan --dry-run --snapshot quiet.yaml`), it shows the scale-down
    that follows a scale-up. A group with no node to copy (the GPU group) keeps its instance
    unregistered."""
    nodes = kube.objects("Node")
    by_instance = {n["spec"]["providerID"].rsplit("/", 1)[-1]: n for n in nodes}
    added: list[dict[str, Any]] = []
    for _group, launched in sorted(instances.items()):
        model = next((by_instance[i] for i, _ in launched if i in by_instance), None)
        if model is None:
            continue
        for instance, zone in launched:
            if instance in by_instance:
                continue
            meta = {k: v for k, v in model["metadata"].items() if k not in ("uid", "resourceVersion")}
            meta["name"] = f"ip-10-0-9-{len(added) + 1}.ec2.internal"
            added.append(
                {
                    **model,
                    "metadata": meta,
                    "spec": {**model["spec"], "providerID": f"aws:///{zone}/{instance}"},
                }
            )
    pods = [
        p
        for p in kube.objects("Pod")
        if not any(o.get("kind") == "Job" for o in p["metadata"].get("ownerReferences") or [])
    ]
    return [*kube.objects("Namespace"), *nodes, *added, *kube.objects("DaemonSet"), *pods]


def _git(*args: str, cwd: Path) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return result.stdout


class _Session:
    def __init__(self, echo: Echo, workdir: Path, command: Command) -> None:
        self.echo, self.workdir, self.command = echo, workdir, command

    def run(self, *args: str) -> None:
        """Print the command as a user would type it, then run it through the real CLI."""
        shown = " ".join(a.replace(str(self.workdir) + "/", "") for a in args)
        self.echo(f"\n$ asg-reconciler {shown}")
        self.command(list(args))

    def say(self, text: str) -> None:
        self.echo(f"\n# {text}")


@contextmanager
def _workdir(keep: Path | None) -> Iterator[Path]:
    if keep is None:
        with tempfile.TemporaryDirectory(prefix="asg-reconciler-demo-") as tmp:
            yield Path(tmp)
        return
    if keep.exists() and (not keep.is_dir() or any(keep.iterdir())):
        raise UserError(f"{keep}: not an empty directory (demo --keep needs a new or empty one)")
    try:
        keep.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # under a file, read-only, no permission: the user's path, not a bug
        raise UserError(
            f"{keep}: cannot create the directory ({exc.strerror}); give demo --keep a new directory"
            " in a writable place, e.g. /tmp/playground"
        ) from exc
    yield keep.resolve()


def _sleep_until_interrupted() -> None:
    """Until Ctrl-C, whose KeyboardInterrupt goes on up: the servers stop on the way (their threads
    are daemons) and the command ends like any interrupted one, "aborted" and exit 130."""
    while True:
        time.sleep(3600)


def _kubeconfig(path: Path, url: str) -> Path:
    """A kubeconfig for the fake API (JSON is YAML)."""
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "demo", "cluster": {"server": url}}],
        "users": [{"name": "demo", "user": {"token": "demo"}}],
        "contexts": [{"name": "demo", "context": {"cluster": "demo", "user": "demo"}}],
        "current-context": "demo",
    }
    path.write_text(json.dumps(document, indent=2))
    return path


@dataclass(frozen=True)
class _Approver:
    """Who approves in the demo: a throwaway SSH key and `approve` (the default signed mode) when
    ssh-keygen is here; else a plain merge under protected-branch, which trusts whoever can push."""

    key: Path | None
    config: str
    story: str

    @classmethod
    def make(cls, workdir: Path) -> _Approver:
        if shutil.which("ssh-keygen") is None:
            return cls(
                None,
                "approval: {mode: protected-branch}   # no ssh-keygen here: the demo trusts the merge\n",
                "no ssh-keygen here, so the demo uses approval.mode protected-branch: a merge is approval",
            )
        key = workdir / "reviewer-key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(key)], check=True)
        signers = workdir / "allowed_signers"
        signers.write_text(f"reviewer@example.com {Path(f'{key}.pub').read_text().strip()}\n")
        gitconfig = workdir / "reviewer.gitconfig"
        gitconfig.write_text(
            "[user]\n\tname = Demo Reviewer\n\temail = reviewer@example.com\n"
            f"\tsigningKey = {key}.pub\n[gpg]\n\tformat = ssh\n"
        )
        return cls(
            gitconfig,
            f"approval: {{mode: signed, allowedSigners: '{signers}'}}\n",
            "a person reads the proposal and approves it with `approve`, signing the merge with their own\n"
            "#    SSH key (apply checks the signature against approval.allowedSigners)",
        )

    def approve(self, demo: _Session, remote: Path, args: tuple[str, ...]) -> None:
        if self.key is None:
            clone = demo.workdir / "reviewer"
            _git("clone", "--quiet", str(remote), str(clone), cwd=demo.workdir)
            identity = ("-c", "user.name=Demo Reviewer", "-c", "user.email=reviewer@example.com")
            _git(
                *identity,
                "merge",
                "--quiet",
                "--no-ff",
                "-m",
                "Merge scale-down proposal",
                f"origin/{PROPOSAL}",
                cwd=clone,
            )
            _git("push", "--quiet", "origin", "main", cwd=clone)
            _git("push", "--quiet", "origin", "--delete", PROPOSAL, cwd=clone)
            demo.echo(f"\n$ git merge --no-ff origin/{PROPOSAL} && git push origin main   # as Demo Reviewer")
            return
        saved = os.environ.get("GIT_CONFIG_GLOBAL")
        os.environ["GIT_CONFIG_GLOBAL"] = str(self.key)  # the reviewer's own git config, not the bot's
        try:
            demo.run("approve", "scale-down", *args)
        finally:
            if saved is None:
                os.environ.pop("GIT_CONFIG_GLOBAL", None)
            else:
                os.environ["GIT_CONFIG_GLOBAL"] = saved


def _record_key(workdir: Path) -> Path:
    """Apply's own key (in production a Kubernetes Secret): its records are signed with it, so the
    plan bot, which can push to the notes ref, cannot forge or quietly rewrite them."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = workdir / "record-key"
    path.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
    )
    path.chmod(0o600)
    return path


def _settle(kube: FakeKubeAPI, instances: dict[str, list[tuple[str, str]]]) -> list[dict[str, Any]]:
    """Move the fake API an hour on (`_settled`: the launched instances registered and idle, the
    batch jobs done) and return its objects, so that what the hand-over suggests next, a scale-down
    to propose, approve and apply, is there on the live cluster as in quiet.yaml."""
    settled = _settled(kube, instances)
    live = {n["metadata"]["name"] for n in kube.objects("Node")}
    kube.put_many(o for o in settled if o.get("kind") == "Node" and o["metadata"]["name"] not in live)
    for pod in kube.objects("Pod"):
        if any(o.get("kind") == "Job" for o in pod["metadata"].get("ownerReferences") or []):
            kube.delete_object("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"])
    return settled


def _hand_over(echo: Echo, workdir: Path, endpoint: str) -> None:
    """What a person can do next from where the demo stopped, in another shell, in order: the
    walkthrough's own proposal is applied, so the next step is the scale-down that follows its
    scale-up (the cluster has moved an hour on: `_settle`), proposed, approved and applied."""
    config = workdir / "asg-reconciler.yaml"
    remote = workdir / "capacity.git"
    echo("\n# Your turn: the files stay in " + str(workdir) + "; AWS and Kubernetes serve until Ctrl-C.")
    echo("# An hour has passed: the batch jobs are done and the nodes the scale-up launched are idle.")
    echo("# In another shell:")
    echo(f'export PATH="{Path(sys.executable).parent}:$PATH"   # where asg-reconciler is installed')
    echo(
        f"unset AWS_PROFILE; export AWS_ENDPOINT_URL={endpoint} AWS_ACCESS_KEY_ID=AKIDEMOEXAMPLE "
        f"AWS_SECRET_ACCESS_KEY=demo-secret-not-real AWS_DEFAULT_REGION={REGION}"
    )
    echo(f"asg-reconciler status --config {config}")
    echo(f"asg-reconciler plan --dry-run --config {config}   # the idle nodes, proposed for removal by name")
    echo(f"asg-reconciler plan --config {config}   # the proposal branch (a pull request with a forge)")
    reviewer = workdir / "reviewer.gitconfig"
    if reviewer.exists():
        echo(f"GIT_CONFIG_GLOBAL={reviewer} asg-reconciler approve scale-down --config {config}")
    else:  # approval.mode protected-branch: a merge pushed to main is the approval
        clone = workdir / "reviewer-2"
        echo(
            f"git clone --quiet {remote} {clone} && git -C {clone} -c user.name='Demo Reviewer' -c "
            f"user.email=reviewer@example.com merge --no-ff -m 'Merge scale-down proposal' "
            f"origin/{PROPOSAL} && git -C {clone} push --quiet origin main   # the approval"
        )
    echo(f"asg-reconciler apply --dry-run --config {config}")
    echo(f"asg-reconciler apply --config {config}   # drains and terminates exactly the approved instances")
    echo(f"asg-reconciler history --config {config}")
    busy = workdir / "busy.yaml"
    echo(f"asg-reconciler plan --dry-run --snapshot {busy} --config {config}   # from a kubectl dump")
    echo(f"asg-reconciler run --config {config}   # the loop: plans as pods go pending (Ctrl-C stops it)")
    echo(f"git -C {remote} log --oneline --all")


def run_demo(
    echo: Echo,
    command: Command,
    keep: Path | None = None,
    wait: Callable[[], None] = _sleep_until_interrupted,
) -> None:
    """The walkthrough; `command` runs one `asg-reconciler` command line in this process (the CLI
    passes itself, so the demo shows the real commands against the in-process AWS mock). With
    `keep`, its files stay in that directory and the mock AWS and the fake Kubernetes API keep
    serving until `wait` returns or raises (Ctrl-C), so a person can go on by hand."""
    with _workdir(keep) as workdir, mock_aws() as endpoint, FakeKubeAPI() as kube:
        demo = _Session(echo, workdir, command)
        echo(f"# asg-reconciler demo: AWS is an in-process moto server at {endpoint}")
        instances = create_groups()
        for name, launched in sorted(instances.items()):
            ids = ", ".join(instance for instance, _ in launched)
            echo(f"#   ASG {name}: {len(launched)} instance(s) {ids}".rstrip())
        cluster = _cluster(instances)
        waiting = [o for o in cluster if (o.get("status") or {}).get("phase") == "Pending"]
        kube.put_many(o for o in cluster if o not in waiting)
        _write(workdir / "quiet.yaml", [o for o in cluster if o not in waiting])
        _write(workdir / "busy.yaml", cluster)
        remote = workdir / "capacity.git"
        _git("init", "--quiet", "--bare", "--initial-branch=main", str(remote), cwd=workdir)
        approver = _Approver.make(workdir)
        config_text = resources.files("reconciler.demo").joinpath("asg-reconciler.yaml").read_text()
        config = workdir / "asg-reconciler.yaml"
        config.write_text(
            config_text
            + f"git: {{url: '{remote}', workDir: '{workdir / 'work'}'}}\n"
            + f"kubernetes: {{kubeconfig: '{_kubeconfig(workdir / 'kubeconfig', kube.url)}'}}\n"
            + approver.config
            + f"apply: {{signingKey: '{_record_key(workdir)}'}}   # apply signs its records with it\n"
        )
        echo(f"# Kubernetes is a fake API at {kube.url} holding the example (reconciler/demo/cluster.yaml);")
        echo(f"# the capacity repository is a local bare repository ({remote.name})")
        args = ("--config", str(config))

        demo.say("1. What is there?")
        demo.run("status", *args)

        demo.say(
            "2. Plan without writing: node ip-10-0-2-20 is nearly idle, so it is proposed for removal by\n"
            "#    name (the demo config sets scaleDown.unneededTime: 0s; by default a node waits 10m first)"
        )
        demo.run("plan", "--dry-run", *args)

        demo.say("3. Plan for real: main gets the manifest, the scale-down becomes a proposal branch (a PR)")
        demo.run("plan", *args)
        echo("\n$ git log --oneline --all")
        echo(_git("log", "--oneline", "--all", cwd=remote).rstrip())

        demo.say(f"4. Review: {approver.story}")
        echo(f"\n$ git show {PROPOSAL}")
        echo(_git("show", "--format=%B", PROPOSAL, cwd=remote).strip())
        approver.approve(demo, remote, args)

        demo.say(
            "5. Apply: the approved instance is checked again on live state, drained, and terminated by name"
        )
        demo.run("apply", "--dry-run", *args)
        demo.run("apply", *args)
        drained = next(
            n["metadata"]["name"] for n in cluster if n["kind"] == "Node" and "2-20" in n["metadata"]["name"]
        )
        kube.delete_object("Node", None, drained)  # what the cloud node controller does once it is gone
        echo(f"# (the cloud controller deletes node {drained}; a ReplicaSet would recreate the evicted pod)")

        demo.say("6. Batch jobs arrive: the plan commits a scale-up to main, and apply raises the groups")
        kube.put_many(waiting)
        demo.run("plan", *args)
        demo.run("apply", *args)

        demo.say("7. The audit trail: the plan's commits and apply's records, from one git log")
        demo.run("history", *args)
        if keep is not None:
            _write(workdir / "quiet.yaml", _settle(kube, group_instances()))
            _hand_over(echo, workdir, endpoint)
            wait()
