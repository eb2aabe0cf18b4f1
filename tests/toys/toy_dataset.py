"""A toy dataset: what a new question set needs (splits, a default split, ``load``)."""

from ifqa.artifacts import Example


class ToyDataset:
    splits = ("train", "dev")
    default_split = "dev"

    def load(self, split, data_dir=None):
        if split == "train":
            return [Example("t0", "If Paris were in Italy, what river would Lyon be on?", ["Lyon"])]
        return [
            Example("t1", "If the Rhone ran north, where would it end?", ["the North Sea"]),
            Example("t2", "If Lyon were a port, on which sea?", ["Mediterranean"]),
        ]


TOY = ToyDataset()
