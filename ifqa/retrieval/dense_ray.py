"""Dense encoding on Ray: chunks of the collection go to a pool of actors, one per GPU of the cluster
(or per CPU without GPUs), each holding the encoder once and writing ``embeddings/chunk-j.npy``
exactly as the single-process loop does (the ``chunks.ChunkEncoder`` class the caller passes in,
so this module never imports ``dense``).

The chunk files are the unit of work and of resuming: a chunk is written whole or not at all, so a
job interrupted anywhere resumes by skipping the chunks on disk, and the FAISS merge is the same
as for a local run. On a cluster the collection and the index folder must be on storage every
node sees (the same paths). Ray is an optional extra: ``pip install 'ifqa[ray]'``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ifqa.errors import IfqaError

log = logging.getLogger(__name__)

CHUNKS_PER_CALL = 4


def encode_on_ray(
    address: str,
    worker: type,
    args: tuple,
    todo: Sequence[int],
    advance: Callable[[int], None],
    workers: int | None = None,
    threads: int | None = None,
    options: dict | None = None,
) -> None:
    """Encode chunks ``todo`` with a pool of Ray actors of class ``worker`` (``worker(*args, threads=,
    **options).encode(j)`` writes chunk j and returns its passage count; ``address``: ``local`` starts
    Ray here)."""
    from pathlib import Path

    import ray
    from ray.util import ActorPool

    args = (Path(args[0]).resolve(), Path(args[1]).resolve(), *args[2:])  # actors run elsewhere on a cluster

    started_here = not ray.is_initialized()
    if started_here:
        try:
            ray.init(
                address=None if address == "local" else address,
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise IfqaError(f"cannot start or reach Ray at {address!r} ({str(exc).splitlines()[0]})") from None
    try:
        cluster = ray.cluster_resources()  # an actor per GPU Ray knows, else per CPU
        gpus, cpus = int(cluster.get("GPU", 0)), max(1, int(cluster.get("CPU", 1)))
        size, resources = (gpus, {"num_gpus": 1, "num_cpus": 1}) if gpus else (cpus, {"num_cpus": 1})
        size = min(workers, size) if workers else size
        log.info("encoding %d chunks on %d Ray actors (%s)", len(todo), size, resources)
        actor = ray.remote(**resources)(worker)
        # one thread per actor unless told: a local run with the same --threads writes the same bytes
        pool = ActorPool(
            [
                actor.remote(*args, threads=threads or resources["num_cpus"], **(options or {}))
                for _ in range(min(size, len(todo)))
            ]
        )
        try:
            # a few chunks per call: an actor on a GPU tokenizes ahead across them (one set of worker processes)
            groups = [list(todo[start : start + CHUNKS_PER_CALL]) for start in range(0, len(todo), CHUNKS_PER_CALL)]
            for count in pool.map_unordered(lambda a, chunks: a.encode.remote(chunks), groups):
                advance(count)
        except ray.exceptions.RayError as exc:  # an actor's own error, e.g. an encoder that cannot load
            cause = getattr(exc, "cause", None)
            if isinstance(cause, IfqaError):
                raise IfqaError(str(cause)) from None
            raise IfqaError(f"a Ray worker failed: {str(cause or exc).splitlines()[0]}") from None
    finally:
        if started_here:
            ray.shutdown()
