import json

import pytest

PASSAGES = [
    ("p0", "Glimmerton", "Glimmerton is a market town on the river Lune with a stone bridge."),
    ("p1", "Lune", "The river Lune flows west into Morecambe Bay past several towns."),
    ("p2", "Copper", "Copper is a soft metal with high thermal and electrical conductivity."),
    ("p3", "Falcon", "The falcon is a bird of prey that hunts at very high speed."),
    ("p4", "Harbour", "A harbour shelters ships from waves; the town's harbour was built in stone."),
    ("p5", "Orchard", "An orchard is land planted with fruit trees such as apple and pear."),
    ("p6", "Lantern", "A lantern carries a light source, once a candle and now often an LED."),
    ("p7", "Signal", "Railway signals tell drivers whether the line ahead is clear."),
]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "passages.jsonl"
    path.write_text("".join(json.dumps({"id": i, "title": t, "text": x}) + "\n" for i, t, x in PASSAGES))
    return path


@pytest.fixture
def questions(tmp_path):
    examples = [
        {
            "idx": 1,
            "question": "If the river Lune dried up, what would Glimmerton's bridge cross?",
            "answers": ["nothing"],
            "context": [PASSAGES[0][2]],
        },
        {
            "idx": 2,
            "question": "If copper lost its conductivity, which metal property would be gone?",
            "answers": ["conductivity"],
            "context": [PASSAGES[2][2]],
        },
        {
            "idx": 3,
            "question": "If falcons were slow, how would this bird of prey hunt?",
            "answers": ["slowly"],
            "context": [PASSAGES[3][2]],
        },
    ]
    path = tmp_path / "questions.json"
    path.write_text(json.dumps(examples))
    return path
