"""`make demo` runs `asg-reconciler demo`: it must work from the installed entry point."""

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.terminal import from_a_terminal

# Real processes with timing bounds: one worker, in turn.
pytestmark = pytest.mark.xdist_group("timing")


def test_demo_runs_end_to_end() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "reconciler", "demo"], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "demo-general" in out
    assert "~ demo-general  2 -> 1" in out  # the idle node proposed by name
    if shutil.which("ssh-keygen"):
        assert "approved: scale-down merged as" in out  # a person's signed merge
    else:  # no OpenSSH: the demo says so and trusts a plain merge (approval.mode protected-branch)
        assert "protected-branch" in out
    assert "drained ip-10-0-2-20.ec2.internal and terminated i-" in out  # apply: exactly that instance
    assert "ml/train-0 -> demo-gpu" in out  # scale from zero on the GPU group's tags
    assert "raised desired 0 -> 1" in out  # and apply raises it
    assert "Demo Reviewer" in out  # history shows who merged the proposal
    assert "asg-reconciler-apply" in out  # and apply's records
    assert "Traceback" not in result.stderr


def test_demo_keep_leaves_a_world_to_play_with(tmp_path: Path) -> None:
    """`demo --keep DIR`: the printed commands work from another process against the still-running
    mock AWS, and Ctrl-C ends it (exit 130) with the files left behind."""
    keep = tmp_path / "playground"
    process = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "demo", "--keep", str(keep)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=from_a_terminal,
    )
    try:
        assert process.stdout is not None
        exports = ""
        hand_over: list[str] = []
        for line in process.stdout:
            if line.startswith("unset AWS_PROFILE; export "):
                exports = line
            if exports and line.startswith(("asg-reconciler ", "GIT_CONFIG_GLOBAL=", "git clone ")):
                hand_over.append(line)
            if line.startswith("git -C "):  # the last hand-over line
                break
        assert exports, process.stderr.read() if process.stderr else ""
        env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")} | dict(
            pair.split("=", 1) for pair in exports.split("export ", 1)[1].split()
        )
        env.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
        status = subprocess.run(
            [
                sys.executable,
                "-m",
                "reconciler",
                "status",
                "--config",
                str(keep / "asg-reconciler.yaml"),
                "--snapshot",
                str(keep / "busy.yaml"),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert status.returncode == 0, status.stderr
        assert "demo-general" in status.stdout and "MANIFEST" in status.stdout  # AWS and Git both read
        # docs/development.md: after the walkthrough, quiet.yaml (its jobs done, the new nodes idle)
        # shows a scale-down
        plan = ["plan", "--dry-run", "--config", str(keep / "asg-reconciler.yaml")]
        quiet = subprocess.run(
            [sys.executable, "-m", "reconciler", *plan, "--snapshot", str(keep / "quiet.yaml")],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert quiet.returncode == 0, quiet.stderr
        assert "~ demo-general  3 -> 1" in quiet.stdout, quiet.stdout
        outputs = follow_the_hand_over(hand_over, env, keep)
        assert "~ demo-general  3 -> 1" in outputs["plan --dry-run"]  # the live cluster is quiet.yaml's
        applied = outputs["apply --config"]
        assert applied.count("terminated i-") == 2, applied  # exactly the two idle nodes
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 130  # Ctrl-C ends it as it ends any command
        assert (keep / "capacity.git").is_dir() and (keep / "busy.yaml").is_file()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def follow_the_hand_over(lines: list[str], env: dict[str, str], keep: Path) -> dict[str, str]:
    """Every command the hand-over suggests, in its order, as a person pastes them (`run` aside, a
    loop): each must succeed (issue 28: it suggested an `approve` the walkthrough had already done,
    exit 2). Their outputs by the first two words after `asg-reconciler`."""
    outputs: dict[str, str] = {}
    ran = []
    for line in lines:
        command = line.split("   #", 1)[0].strip()
        if " asg-reconciler run " in f" {command} ":
            continue
        done = subprocess.run(
            ["bash", "-c", command.replace("asg-reconciler ", f"{sys.executable} -m reconciler ")],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=keep,
        )
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        words = command.split("asg-reconciler ", 1)[-1].split()
        key = " ".join(w for w in words[:2] if not w.startswith("/"))
        outputs.setdefault(key, done.stdout)
        ran.append(key)
    approval = "approve scale-down" if "approve scale-down" in ran else "git clone"
    assert ran.index("plan --config") < ran.index(approval) < ran.index("apply --config"), ran
    return outputs


def test_demo_keep_refuses_a_directory_with_files(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("mine")
    result = subprocess.run(
        [sys.executable, "-m", "reconciler", "demo", "--keep", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == f"error: {tmp_path}: not an empty directory (demo --keep needs a new or empty one)"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["precious.txt"]


def test_demo_keep_where_no_directory_can_be_made_is_one_line(tmp_path: Path) -> None:
    """A --keep path under a file (or anywhere mkdir fails) is a user's mistake: one line, exit 2,
    not a NotADirectoryError traceback (found by a new user's trial)."""
    (tmp_path / "a-file").write_text("mine")
    keep = tmp_path / "a-file" / "playground"
    result = subprocess.run(
        [sys.executable, "-m", "reconciler", "demo", "--keep", str(keep)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith(f"error: {keep}: cannot create the directory"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
