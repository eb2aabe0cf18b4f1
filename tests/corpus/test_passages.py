import json

import pytest

from ifqa.corpus.passages import Passage, split_passages
from ifqa.errors import IfqaError


def test_jsonl_line_is_what_json_dumps_writes():
    for text in ["plain", 'quotes " and \\ backslash', "tab\tnew\nline \u2028 \x00 \x7f", "é ü 中文 😀", ""]:
        passage = Passage("12-0", 'Title "x"', text)
        line = passage.to_line(tsv=False)
        assert line == json.dumps(passage._asdict(), ensure_ascii=False) + "\n"
        assert json.loads(line) == passage._asdict()


def test_tsv_line_keeps_fields_on_one_line():
    assert Passage("1-0", "T\tx", "a\tb\nc  d").to_line(tsv=True) == "1-0\ta b c d\tT x\n"


def test_split_is_disjoint_and_covers_every_word():
    passages = split_passages("7", "Seven", " ".join(f"w{i}" for i in range(25)), words=10)
    assert [p.id for p in passages] == ["7-0", "7-1", "7-2"]
    assert " ".join(p.text for p in passages).split() == [f"w{i}" for i in range(25)]


def test_an_id_tsv_cannot_hold_is_refused():
    with pytest.raises(IfqaError, match=r"passage id 'a\\tb' holds a tab or a line break, which DPR's TSV cannot"):
        Passage("a\tb", "T", "text").to_line(tsv=True)
    assert json.loads(Passage("a\tb", "T", "text").to_line(tsv=False))["id"] == "a\tb"
