"""`ifqa evaluate --run A --compare B`: gold recall intervals and the paired test between two runs."""

import json


def test_compare_two_runs_of_the_same_questions(tmp_path, cli):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert cli("retrieve", "--k", "20", "-o", a, "--no-progress").returncode == 0
    assert cli("retrieve", "--k", "20", "--query-mode", "main-clause", "-o", b, "--no-progress").returncode == 0
    result = cli("evaluate", "--run", a, "--compare", b, "--json")
    assert result.returncode == 0, result.stderr
    compare = json.loads(result.stdout)["compare"]
    assert compare["n"] == 24 and set(compare["vs_baseline"]) == {"1", "5", "20"}
    assert all(0 < t["p_value"] <= 1 for t in compare["vs_baseline"].values())
    same = json.loads(cli("evaluate", "--run", a, "--compare", a, "--json").stdout)["compare"]
    assert all(t["difference"] == 0 and t["p_value"] == 1 for t in same["vs_baseline"].values())
    text = cli("evaluate", "--run", a, "--compare", b).stdout
    assert "permutation test" in text and "95% CI" in text
