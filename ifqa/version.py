"""The version of ifqa, in a module of its own: what every artifact records (manifests, cards,
exports). Lower modules import it from here, never from the package façade, whose names load the API."""

__version__ = "0.1.0"
