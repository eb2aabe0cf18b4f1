"""Training groups: mined negatives and other questions' gold passages (random or closest), and the
seeded step plan."""

import re
from types import SimpleNamespace

import pytest

from ifqa.artifacts import Example
from ifqa.errors import IfqaError
from ifqa.retrieval.hits import hits_at
from ifqa.training.data import mine_groups, planned_steps, read_groups, write_groups

GOLD = {
    "tsunami": "A tsunami crosses the deep ocean at hundreds of metres per second, its speed set by the depth.",
    "sprinter": "The sprinter ran 100 metres in 9.8 seconds, a speed of about ten metres per second.",
    "bread": "Bread is baked from flour, water and yeast in an oven.",
    "opera": "The opera premiered in Vienna with a soprano in the title role.",
}
QUESTIONS = {
    "tsunami": "If the ocean were 5000 metres deep, what would a tsunami's speed in metres per second be?",
    "sprinter": "If the sprinter had run 200 metres, what would his time in seconds have been?",
    "bread": "If the bread had no yeast, what would it be?",
    "opera": "If the opera had premiered in Paris, who would have sung the title role?",
}
COLLECTION = [
    {"id": "1", "title": "Ocean", "text": "The ocean floor lies thousands of metres deep in the Pacific."},
    {"id": "2", "title": "Tsunami", "text": GOLD["tsunami"]},  # a copy of the gold passage: never a negative
    {"id": "3", "title": "Yeast", "text": "Yeast makes bread rise."},
]


class Pipeline:
    """What mining uses of a retrieval pipeline: query formulation and search (``Hit`` lists)."""

    def formulate(self, questions):
        return [[q.replace("If ", "")] for q in questions]

    def batch_search(self, questions, k=None, subqueries=None):
        ranked = [(0, 3.0), (1, 2.0), (2, 1.0)]
        return [hits_at(ranked, COLLECTION.__getitem__) for _ in questions]


def mining(**settings) -> SimpleNamespace:
    """A mined kind's recipe, as far as mining reads it."""
    return SimpleNamespace(**{"hard_depth": 3, "other_gold": 1, "seed": 0, "other_gold_from": "random", **settings})


def examples():
    return [Example(key, QUESTIONS[key], ["x"], [GOLD[key]]) for key in GOLD]


def test_random_other_gold_passages_are_never_the_question_own():
    for seed in range(5):
        for group in mine_groups(examples(), Pipeline(), mining(other_gold=2, seed=seed), progress=False):
            assert len(group.other_gold) == 2 and GOLD[group.qid] not in group.other_gold


def test_closest_other_gold_passages_come_first_and_never_the_question_own():
    groups = {g.qid: g for g in mine_groups(examples(), Pipeline(), mining(other_gold_from="closest"), progress=False)}
    tsunami = groups["tsunami"]
    assert tsunami.other_gold[0] == GOLD["sprinter"]  # shares "metres per second"; bread and opera do not
    assert GOLD["tsunami"] not in tsunami.other_gold and len(tsunami.other_gold) == 3
    assert groups["bread"].negatives == [p["text"] for p in COLLECTION]
    assert tsunami.negatives == [COLLECTION[0]["text"], COLLECTION[2]["text"]]  # the copy of its gold is left out


def test_step_plan_samples_both_kinds_of_negative_from_the_first_hard_depth():
    groups = mine_groups(examples(), Pipeline(), mining(other_gold_from="closest"), progress=False)
    recipe = SimpleNamespace(epochs=2, questions_per_step=2, seed=1, hard_depth=2)
    steps = planned_steps(groups, recipe, group_size=3, other_gold=1)
    assert len(steps) == 4 and steps == planned_steps(groups, recipe, 3, 1)
    by_question = {g.question: g for g in groups}
    for step in steps:
        for question, passages in step:
            group = by_question[question]
            assert passages[0] in group.positives and len(passages) == 3
            assert passages[1] in group.other_gold[:2] and passages[2] in group.negatives[:2]


def test_mined_groups_read_back_as_written_and_a_damaged_line_is_named(tmp_path):
    groups = mine_groups(examples(), Pipeline(), mining(), progress=False)
    path = tmp_path / "groups.jsonl"
    write_groups(groups, path)
    assert read_groups(path) == groups
    lines = path.read_text(encoding="utf-8").splitlines()
    for damaged, problem in (
        ("{not json", "invalid JSON"),
        ('{"qid": "q"}', "not a training group"),
        ("[1]", "not a training group"),
    ):
        path.write_text("\n".join([lines[0], damaged, *lines[1:]]) + "\n", encoding="utf-8")
        with pytest.raises(IfqaError, match=rf"^{re.escape(str(path))}:2: {problem}"):
            read_groups(path)
