"""Webis-CausalQA-22's seven lexical rules (its Table 3): each on hand-written positives and near misses."""

import json

import pytest

from ifqa.datasets.causal_rules import RULES, causal_rule, matching_rules, rule_counts

POSITIVES = {
    "R1": ["Why does a kettle whistle?", "So why is the sea salty", "WHY do owls hoot at night?"],
    "R2": ["What causes a rainbow?", "Can stress cause hair loss?", "what is the cause of inflation"],
    "R3": ["How come cats land on their feet?", "How did the river get its name?", "how  did Rome fall?"],
    "R4": [
        "What is the effect of salt on ice?",
        "How does sugar affect teeth?",
        "What effects did the war have?",
        "Which factor affects the price most?",
    ],
    "R5": ["What does a lack of sleep lead to?", "Does poverty lead to crime?", "which habit leads to obesity"],
    "R6": [
        "What happens if you swallow gum?",
        "What will happen when the sun dies?",
        "what might happen if the dam breaks",
        "What happens to bread when it is toasted?",
    ],
    "R7": ["What to do if a dog bites you?", "What should be done when a fuse blows?", "what to do to stop hiccups"],
}

NEAR_MISSES = [
    "Who wrote the novel Whyte Notes?",  # 'why' only inside a word
    "Which causeway links the two islands?",  # 'cause' only inside a word
    "How do bees make honey?",  # how, but neither 'how come' nor 'how did'
    "Who starred in Special Effects Team?".replace("Effects", "Effex"),
    "Where is the effectiveness report kept?",  # 'effect' only inside a word
    "Who was the lead singer of the band?",  # 'lead' without 'to'
    "What happened in 1066?",  # 'happened' is not 'happen(s)', and no if/when
    "What happens next in the story?",  # 'what happens' without if/when
    "What to eat in Lisbon?",  # 'what to' but not 'what to do'
    "What do you do for a living?",  # 'what ... do' without 'what to do'
    "What to do with leftover rice?",  # 'what to do' without a condition word of its own
    "What would happen if the Moon vanished?",  # R6 names will/might, not would (as the paper writes it)
    "If the Eiffel Tower were in London, which river would it stand beside?",  # counterfactual, not causal
]


@pytest.mark.parametrize("rule, question", [(rule, q) for rule, qs in POSITIVES.items() for q in qs])
def test_each_rule_matches_its_positives(rule, question):
    assert rule in matching_rules(question)


@pytest.mark.parametrize("question", NEAR_MISSES)
def test_near_misses_are_not_causal(question):
    assert causal_rule(question) is None


def test_the_papers_own_examples_match_their_rule():
    for rule in RULES:
        assert causal_rule(rule.example) == rule.name


def test_a_question_gets_the_first_rule_that_fires_and_counts_add_up():
    question = "Why does smoking cause cancer and what effects does it have?"
    assert matching_rules(question) == ["R1", "R2", "R4"] and causal_rule(question) == "R1"
    questions = [qs[0] for qs in POSITIVES.values()] + NEAR_MISSES
    counts = rule_counts(questions)
    assert counts == {"R1": 1, "R2": 1, "R3": 1, "R4": 1, "R5": 1, "R6": 1, "R7": 1, "none": len(NEAR_MISSES)}
    assert sum(counts.values()) == len(questions)


def test_classify_command_counts_and_writes_each_question(cli, tmp_path):
    out = tmp_path / "rules.jsonl"
    result = cli("classify", "causal", "--setting", "causalqa-demo", "--json", "-o", out)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["n"] == 8 and summary["causal"] == 8 and summary["by_rule"]["R1"]["n"] == 4
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 8 and all(line["rule"] == line["rules"][0] for line in lines)
    demo = cli("classify", "causal")  # IfQA-style counterfactual questions: mostly not causal
    assert demo.returncode == 0 and "questions causal" in demo.stdout


def test_classifying_a_file_of_questions_needs_no_answers(cli, tmp_path):
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        '{"idx": 1, "question": "Why is the sky blue?"}\n{"idx": 2, "question": "Who won?", "answers": []}\n'
    )
    result = cli("classify", "causal", "--questions", questions, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["n"] == 2 and json.loads(result.stdout)["causal"] == 1
    questions.write_text('{"idx": 1, "question": "Why?", "answers": "blue"}\n')  # malformed answers are still refused
    result = cli("classify", "causal", "--questions", questions)
    assert result.returncode == 1 and "'answers' must be a non-empty list" in result.stderr
