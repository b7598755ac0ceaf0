"""Beyond one process: Ray rollout / evaluation workers with an exactly-once episode ledger (``workers``,
``ledger``), and FSDP2 training under ``torchrun`` (``fsdp``). Ray and torch.distributed are imported only
where they are used, so ``import milepost`` needs neither."""
