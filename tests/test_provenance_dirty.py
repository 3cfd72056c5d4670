"""``dirty`` means the e2e checkout's code changed, not that a run wrote results into it
(issue 34 item 15): an untracked results folder of any name leaves it clean (and is never
read whole to be hashed); an untracked source file or a changed tracked file makes it dirty."""

from __future__ import annotations

import subprocess

from e2e.session import source_facts


def _git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_results_written_into_the_checkout_leave_it_clean(tmp_path):
    root = tmp_path / "checkout"
    (root / "e2e").mkdir(parents=True)
    (root / "e2e" / "a.py").write_text("x = 1\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "c")
    assert source_facts(root)["dirty"] is False
    run = root / "my-results" / "exp" / "main-c1-base-r1"
    run.mkdir(parents=True)
    for name in ("run.json", "requests.parquet", "server.log", "metrics_before.prom"):
        (run / name).write_text("{}")
    (root / "site").mkdir()
    (root / "site" / "index.html").write_text("<html>")
    assert source_facts(root)["dirty"] is False
    (root / "e2e" / "new.py").write_text("y = 2\n")
    assert source_facts(root)["dirty"] is True
    (root / "e2e" / "new.py").unlink()
    (root / "e2e" / "a.py").write_text("x = 2\n")
    assert source_facts(root)["dirty"] is True
