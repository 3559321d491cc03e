"""`asg-reconciler demo`: the bundled example cluster against an in-process AWS mock and a local Git
repository, told as plan -> review -> (apply, next stage).

Nothing is special-cased: the demo writes kubectl-style snapshots, a config file and a bare Git
repository, then runs the very CLI commands it prints.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from reconciler.demo.mock_aws import REGION, create_groups, mock_aws
from reconciler.errors import UserError

Echo = Callable[[str], None]
_PLACEHOLDER = re.compile(r"\{\{(instance|zone):([\w-]+):(\d+)\}\}")
PROPOSAL = "asg-reconciler/demo/scale-down"


def _cluster(instances: dict[str, list[tuple[str, str]]]) -> list[dict[str, Any]]:
    template = resources.files("reconciler.demo").joinpath("cluster.yaml").read_text()

    def fill(match: re.Match[str]) -> str:
        instance_id, zone = instances[match[2]][int(match[3])]
        return instance_id if match[1] == "instance" else zone

    document = YAML(typ="safe", pure=True).load(_PLACEHOLDER.sub(fill, template))
    items: list[dict[str, Any]] = document["items"]
    return items


def _write(path: Path, items: Sequence[dict[str, Any]]) -> Path:
    with path.open("w") as handle:
        YAML(typ="safe", pure=True).dump({"apiVersion": "v1", "kind": "List", "items": list(items)}, handle)
    return path


def _git(*args: str, cwd: Path) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return result.stdout


class _Session:
    def __init__(self, echo: Echo, workdir: Path) -> None:
        self.echo, self.workdir = echo, workdir

    def run(self, *args: str) -> None:
        """Print the command as a user would type it, then run it through the real CLI."""
        from reconciler.cli import cli

        shown = " ".join(a.replace(str(self.workdir) + "/", "") for a in args)
        self.echo(f"\n$ asg-reconciler {shown}")
        cli.main(args=list(args), prog_name="asg-reconciler", standalone_mode=False)

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
    keep.mkdir(parents=True, exist_ok=True)
    yield keep.resolve()


def _sleep_until_interrupted() -> None:
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass


def _hand_over(echo: Echo, workdir: Path, endpoint: str) -> None:
    """What a person needs to go on from where the demo stopped, in another shell."""
    config = workdir / "asg-reconciler.yaml"
    echo("\n# Your turn: the files stay in " + str(workdir) + "; the mock AWS serves until Ctrl-C.")
    echo("# In another shell:")
    echo(
        f"unset AWS_PROFILE; export AWS_ENDPOINT_URL={endpoint} AWS_ACCESS_KEY_ID=demo "
        f"AWS_SECRET_ACCESS_KEY=demo AWS_DEFAULT_REGION={REGION}"
    )
    echo(f"asg-reconciler status --config {config} --snapshot {workdir / 'busy.yaml'}")
    echo(f"asg-reconciler plan --dry-run --config {config} --snapshot {workdir / 'quiet.yaml'}")
    echo(f"asg-reconciler history --config {config}")
    echo(f"git -C {workdir / 'capacity.git'} log --oneline --all")


def run_demo(
    echo: Echo, keep: Path | None = None, wait: Callable[[], None] = _sleep_until_interrupted
) -> None:
    """The walkthrough; with `keep`, its files stay in that directory and the mock AWS keeps serving
    until `wait` returns (Ctrl-C), so a person can run the commands themselves."""
    with _workdir(keep) as workdir, mock_aws() as endpoint:
        demo = _Session(echo, workdir)
        echo(f"# asg-reconciler demo: AWS is an in-process moto server at {endpoint}")
        instances = create_groups()
        for name, launched in sorted(instances.items()):
            ids = ", ".join(instance for instance, _ in launched)
            echo(f"#   ASG {name}: {len(launched)} instance(s) {ids}".rstrip())
        cluster = _cluster(instances)
        quiet = _write(
            workdir / "quiet.yaml", [o for o in cluster if (o.get("status") or {}).get("phase") != "Pending"]
        )
        busy = _write(workdir / "busy.yaml", cluster)
        remote = workdir / "capacity.git"
        _git("init", "--quiet", "--bare", "--initial-branch=main", str(remote), cwd=workdir)
        config_text = resources.files("reconciler.demo").joinpath("asg-reconciler.yaml").read_text()
        config = workdir / "asg-reconciler.yaml"
        config.write_text(config_text + f"git: {{url: '{remote}', workDir: '{workdir / 'work'}'}}\n")
        echo("# the cluster is the bundled example (reconciler/demo/cluster.yaml), read as kubectl dumps;")
        echo(f"# the capacity repository is a local bare repository ({remote.name})")

        demo.say("1. A quiet cluster: what is there?")
        demo.run("status", "--config", str(config), "--snapshot", str(quiet))

        demo.say(
            "2. Plan without writing: node ip-10-0-2-20 is nearly idle, so it is proposed for removal by\n"
            "#    name (the demo config sets scaleDown.unneededTime: 0s; by default a node waits 10m first)"
        )
        demo.run("plan", "--dry-run", "--config", str(config), "--snapshot", str(quiet))

        demo.say("3. Plan for real: main gets the manifest, the scale-down becomes a proposal branch (a PR)")
        demo.run("plan", "--config", str(config), "--snapshot", str(quiet))
        echo("\n$ git log --oneline --all")
        echo(_git("log", "--oneline", "--all", cwd=remote).rstrip())

        demo.say("4. Review: a person reads the proposal and merges it into main")
        echo(f"\n$ git show {PROPOSAL}")
        echo(_git("show", "--format=%B", PROPOSAL, cwd=remote).strip())
        clone = workdir / "reviewer"
        _git("clone", "--quiet", str(remote), str(clone), cwd=workdir)
        _git(
            "-c",
            "user.name=Demo Reviewer",
            "-c",
            "user.email=reviewer@example.com",
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
        echo(f"\n$ git merge --no-ff origin/{PROPOSAL} && git push origin main   # as Demo Reviewer")

        demo.say(
            "5. Batch jobs arrive before apply ran: the approved removal is cancelled first, then groups grow"
        )
        demo.run("plan", "--config", str(config), "--snapshot", str(busy))

        demo.say(
            "6. The audit trail, from commit trailers (sizes there are the manifest's targets: 1 -> 3 is\n"
            "#    the approved 2 -> 1 given back plus one new node; the plan table counts from AWS's 2)"
        )
        demo.run("history", "--config", str(config))

        demo.say(
            "Next: `asg-reconciler apply` syncs main to AWS (SetDesiredCapacity for increases; cordon, drain "
            "and terminate exactly the approved instances) - it arrives with the apply stage."
        )
        if keep is not None:
            _hand_over(echo, workdir, endpoint)
            wait()
