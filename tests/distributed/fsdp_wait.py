"""Rank 0 works alone for ``SECONDS`` (as it plays rollouts) while rank 1 waits for its result in
``FSDP.on_main``; the collectives' timeout is ``dist_timeout_minutes`` = ``MINUTES``.

    torchrun --standalone --nproc_per_node 2 tests/distributed/fsdp_wait.py MINUTES SECONDS
"""

from __future__ import annotations

import sys
import time

from milepost.distributed.fsdp import setup
from milepost.training.config import TrainConfig


def main(minutes: float, seconds: float) -> None:
    fsdp = setup(TrainConfig(name="wait", data="unused", device="cpu", dist_timeout_minutes=minutes))
    assert fsdp is not None
    got = fsdp.on_main(lambda: time.sleep(seconds) or ["episode"] * 3)
    assert got == ["episode"] * 3
    fsdp.wait_for_main()
    print(f"rank {fsdp.rank} received {len(got)}")
    fsdp.close()


if __name__ == "__main__":
    main(float(sys.argv[1]), float(sys.argv[2]))
