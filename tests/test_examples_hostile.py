"""examples/pr-comment.yml under a hostile pull request (issue 34 item 8): the sweep writes
outside the PR's checkout (run folders a PR commits under results/ would be taken as done
and reported as measured), and the step edits only a comment its own account wrote (anyone
can post a comment that starts with the marker)."""

from __future__ import annotations

from conftest import ROOT


def test_the_pr_workflow_measures_outside_the_checkout_and_edits_only_its_own_comment():
    text = (ROOT / "examples" / "pr-comment.yml").read_text()
    assert "--results results" not in text and "e2e report results/" not in text
    assert '--results "$RUNNER_TEMP/e2e-results"' in text
    assert 'select(.user.login == "github-actions[bot]" and' in text
