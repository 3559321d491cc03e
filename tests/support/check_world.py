"""Steps the check tests share on apply's World: the remote's refs, a signed branch."""

from __future__ import annotations

from tests.support.apply_world import MAIN_PATH, World
from tests.support.git import git


def remote_refs(world: World) -> str:
    return git("for-each-ref", "--format=%(refname) %(objectname)", cwd=world.remote)


def signed_branch(world: World, branch: str, text: str, message: str) -> str:
    """Alice commits the manifest `text` on a new branch off main, signed with her key, and pushes it."""
    clone = world.tmp / f"alice-{branch.replace('/', '-')}"
    git("clone", "--quiet", str(world.remote), str(clone))
    git("checkout", "--quiet", "-b", branch, cwd=clone)
    (clone / MAIN_PATH).write_text(text)
    git("add", MAIN_PATH, cwd=clone)
    git("commit", "--quiet", "-S", "-m", message, cwd=clone)
    git("push", "--quiet", "origin", branch, cwd=clone)
    return git("rev-parse", "HEAD", cwd=clone).strip()
