"""`ifqa classify causal`: which questions are causal by Webis-CausalQA-22's seven lexical rules."""

from __future__ import annotations

import json

import click

from ifqa.cli.options import output_option, question_options, question_source
from ifqa.datasets.causal_rules import RULES, causal_rule, matching_rules, summarize
from ifqa.io import write_jsonl
from ifqa.tables import table


@click.group()
def classify() -> None:
    """Classify questions."""


@classify.command("causal")
@question_options
@output_option("Also write one JSONL line per question: {qid, question, rule, rules}.", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def classify_causal(setting, split, questions, data_dir, output, as_json) -> None:
    """Count questions per causal rule (R1 why, R2 cause, R3 how come/how did, R4 effect/affect,
    R5 lead to, R6 what happens if/when, R7 what to do if/when); a question gets the first rule
    that fires."""
    question_set = question_source(setting, split, questions, data_dir).load(answers=False)  # rules read questions only
    texts = [example.question for example in question_set]
    result = {"questions": question_set.name, **summarize(texts)}
    if output:
        rows = (
            dict(qid=e.qid, question=e.question, rule=causal_rule(e.question), rules=matching_rules(e.question))
            for e in question_set
        )
        write_jsonl(output, rows)
    if as_json:
        click.echo(json.dumps(result))
        return
    examples = {rule.name: rule.example for rule in RULES}
    rows = [
        [name, group["n"], f"{group['share']:.2f}", examples.get(name, "")] for name, group in result["by_rule"].items()
    ]
    click.echo(
        f"{result['questions']}: {result['causal']} of {result['n']} questions causal "
        f"({result['causal_share']:.2f}%)\n\n" + table(["rule", "questions", "%", "the paper's example"], rows)
    )


COMMANDS = [classify]
