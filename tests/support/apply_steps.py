"""Steps the apply attack tests share on apply's World: a person's clone, a bot's commit, what the
fake API listed, whether a node carries our taint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reconciler.domain.model import OWN_DRAIN_TAINT
from tests.support.apply_world import (
    MAIN_PATH,
    World,
    manifest_on_main,
)
from tests.support.git import BOB, git


def ours(world: World, node: str) -> bool:
    found = world.kube.get_object("Node", None, node)
    assert found is not None
    return any(t["key"] == OWN_DRAIN_TAINT for t in found["spec"].get("taints") or [])


def listing_b(world: World) -> str:
    return manifest_on_main(world).replace("removeInstances: []", f"removeInstances:\n      - {world.b_id}")


def show(result: Any) -> str:
    return f"exit {result.code}\n--- out\n{result.out}\n--- err\n{result.err}"


def bot_commit(world: World, text: str | None, message: str) -> str:
    """The bot (unsigned) commits on main through a clone; None deletes the manifest."""
    clone = world.tmp / f"bot-{len(list(world.tmp.glob('bot-*')))}"
    git("clone", "--quiet", str(world.remote), str(clone))
    if text is None:
        git("rm", "--quiet", MAIN_PATH, cwd=clone)
    else:
        (clone / MAIN_PATH).write_text(text)
        git("add", MAIN_PATH, cwd=clone)
    git("commit", "--quiet", "-m", message, cwd=clone, env=BOB.env())
    git("push", "--quiet", "origin", "main", cwd=clone)
    return git("rev-parse", "HEAD", cwd=clone).strip()


def alice_clone(world: World, name: str) -> Path:
    clone = world.tmp / name
    git("clone", "--quiet", str(world.remote), str(clone))
    return clone
