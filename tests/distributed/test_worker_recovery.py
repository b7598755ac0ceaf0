"""The Ray pool on a real cluster under every failure it can meet, and ``--workers`` as a user runs it.

- Failures injected through Ray itself (one cluster, bound to loopback): an actor process that exits, an actor
  killed with ``ray.kill`` by the driver, an actor method that raises (``RayTaskError``; once, and on every
  attempt of one episode), an actor that hangs past the episode timeout, and a result object whose owner died
  (``OwnerDiedError``, an ``ObjectLostError``): every episode is collected exactly once, a replayed episode equals
  the in-process one, and the episode that fails every attempt is recorded as an infrastructure failure that
  names its error. (Node death and Ray's memory monitor need more than one node or a starved one; their
  recovery decision is tested in ``test_recovery.py``.)
- ``milepost eval --workers 2`` in a subprocess: every listening socket of its Ray processes is on loopback,
  and Ctrl-C (SIGINT to the process group, as a terminal sends it) ends it with exit status 130 and one line.

Run with ``make test-distributed`` (marker ``distributed``).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from milepost.agent.loop import AgentSettings, Job, run_episodes
from milepost.datasets import write_dataset
from milepost.distributed.eval_pool import EvalKit
from milepost.distributed.recovery import WorkersLost, WorkerTimeouts
from milepost.distributed.workers import Fault, WorkerPool, _Call, init_ray
from milepost.envs import make_env
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.evaluation.failures import is_infra_failure
from milepost.evaluation.runner import EvalSpec, build_policy

ray = pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")
pytestmark = pytest.mark.distributed
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    init_ray(num_cpus=2)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tasks = [make_task(*generate_easy(4, 10, 9, i + 10), level="S4", split="test", index=i) for i in range(4)]
    return write_dataset(tmp_path_factory.mktemp("ds") / "ds", {"train": [], "test": tasks}, {"seed": 9})


@ray.remote(num_cpus=0)
def _later() -> str:
    time.sleep(60)
    return "episodes"


@ray.remote(num_cpus=0)
class _Owner:
    def make(self) -> list[Any]:
        return [_later.remote()]  # a result this actor owns, not made yet


class OwnerDiedPool(WorkerPool):
    """A pool whose first fetch of a chosen episode's chunk reads a result whose owner Ray has killed: the
    ``OwnerDiedError`` a driver gets when the process that owned a result is gone before it is read."""

    target: tuple[str, int] = ("", 0)
    fired = False

    def _fetch(self, ref: Any, call: _Call) -> list[dict[str, Any]]:
        if not self.fired and self.target in {(a.job.task.task_id, a.job.sample) for a in call.chunk}:
            self.fired = True
            owner = _Owner.remote()  # type: ignore[attr-defined]
            (orphan,) = ray.get(owner.make.remote())
            ray.kill(owner)
            return ray.get(orphan, timeout=120)
        return super()._fetch(ref, call)


def test_every_failure_kind_is_recovered_exactly_once(
    cluster: None, dataset: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spec = EvalSpec(
        env="sudoku",
        data=str(dataset),
        policy="noisy-oracle:0.7:format",
        n=4,
        env_kwargs={"max_steps": 12},
        settings=AgentSettings(batch_size=8),
        seed=2,
    )
    from milepost.datasets import load_tasks

    jobs = [Job(t, s) for t in load_tasks(str(dataset), "test") for s in range(4)]
    ids = [(j.task.task_id, j.sample) for j in jobs]
    make = lambda: make_env("sudoku", max_steps=12, size=4)  # noqa: E731
    expected = {
        (e.task_id, e.sample): e.to_dict()
        for e in run_episodes(make, jobs, build_policy(spec), spec.settings, seed=2, progress=False)
    }
    hopeless = ids[13]
    faults = {
        ids[1]: Fault(1, "exit"),
        ids[5]: Fault(1, "raise"),
        # Two attempts: the driver's ray.kill below can take ids[9]'s first attempt before it hangs (which chunk
        # actor 0 holds then depends on the machine's load), and the hang must still happen once.
        ids[9]: Fault(2, "hang"),
        hopeless: Fault(3, "raise"),
    }
    # Each hang costs one episode timeout (30 s for a chunk of 2); scripted episodes take milliseconds.
    pool = OwnerDiedPool(
        EvalKit(spec, {"max_steps": 12, "size": 4}), 2, faults, WorkerTimeouts(start=300, episode=15, fetch=120)
    )
    pool.target = ids[3]
    seen: list[tuple[str, int]] = []

    def on_episode(ep: Any) -> None:
        if not seen and pool.actors[0] is not None:
            ray.kill(pool.actors[0])  # the driver kills a worker mid-run: whatever it holds or gets next is lost
        seen.append((ep.task_id, ep.sample))

    caplog.set_level(logging.WARNING, logger="milepost.distributed.workers")
    try:
        run = pool.play(jobs, seed=2, policy_name="noisy-oracle", on_episode=on_episode, chunk_size=2, progress=False)
    finally:
        pool.close()
    assert sorted(seen) == sorted(ids)  # each exactly once
    c = run.counts
    assert (c.submitted, c.collected, c.duplicated, c.exhausted) == (16, 16, 0, 1)
    for ep in run.episodes:
        key = (ep.task_id, ep.sample)
        if key == hopeless:
            assert is_infra_failure(ep) and "RuntimeError: injected fault" in ep.meta["error"]
            assert "(3 attempts)" in ep.meta["error"]
        else:
            assert ep.to_dict() == expected[key]  # a replayed episode is the one the lost call would have returned
    log = "\n".join(r.getMessage() for r in caplog.records)
    for sign in ("ActorDiedError", "RuntimeError: injected fault", "no answer within 30 s", "OwnerDiedError"):
        assert sign in log, sign
    # exit, ray.kill, hang, owner died: 4 replacements at least; the task errors keep their actor.
    assert c.lost_chunks >= 4 + 1 + 3 and len(run.recoveries_s) >= 4
    print(f"recovery under every failure kind: {c}, {len(run.recoveries_s)} actors replaced")


@dataclass
class BrokenLaterKit:
    """An eval kit that can no longer be built once the file ``broken`` exists (a node that lost its GPU)."""

    spec: Any
    broken: str

    def __call__(self) -> Any:
        if Path(self.broken).exists():
            raise RuntimeError("no device left on this node")
        return EvalKit(self.spec, {"max_steps": 12, "size": 4})()


def test_workers_that_cannot_be_replaced_end_the_call_in_one_line(cluster: None, dataset: Path, tmp_path: Path) -> None:
    spec = EvalSpec(env="sudoku", data=str(dataset), policy="oracle", n=2, ks=[1], env_kwargs={"max_steps": 12}, seed=2)
    from milepost.datasets import load_tasks

    jobs = [Job(t, s) for t in load_tasks(str(dataset), "test") for s in range(2)]
    killer = (jobs[2].task.task_id, jobs[2].sample)  # kills every worker it meets
    flag = tmp_path / "broken"
    timeouts = WorkerTimeouts(start=300, episode=60, fetch=60)
    pool = WorkerPool(BrokenLaterKit(spec, str(flag)), 2, {killer: Fault(3, "exit")}, timeouts)
    flag.touch()  # from now on no replacement starts
    seen: list[tuple[str, int]] = []
    try:
        with pytest.raises(WorkersLost) as info:
            pool.play(jobs, seed=2, on_episode=lambda ep: seen.append((ep.task_id, ep.sample)), chunk_size=2)
    finally:
        pool.close()
    message = str(info.value)
    assert "\n" not in message and "every Ray worker was lost" in message
    assert f"{len(seen)} of {len(jobs)} episodes were collected" in message
    assert len(seen) == len(set(seen)) and killer not in seen  # what was collected was passed on once


def _listening(procs: list[Any]) -> list[tuple[str, str, int]]:
    """(process, address, port) of every listening TCP socket of ``procs``."""
    out = []
    for proc in procs:
        try:
            label = " ".join(proc.cmdline())[:120]
            conns = proc.net_connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        out += [(label, c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN]
    return out


def _loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip.split("%")[0])
    mapped = getattr(address, "ipv4_mapped", None)
    return bool((mapped or address).is_loopback)


def test_workers_listen_on_loopback_only_and_ctrl_c_exits_130(tmp_path: Path) -> None:
    tasks = [make_task(*generate_easy(4, 10, 9, i), level="S4", split="test", index=i) for i in range(40)]
    data = write_dataset(tmp_path / "ds", {"train": [], "test": tasks}, {"seed": 9})
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "milepost", "eval", "--env", "sudoku", "--data", str(data), "--policy"]
    cmd += ["noisy-oracle:0.7:format", "--n", "100", "--max-steps", "12", "--no-progress", "--workers", "2"]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.Popen(
        [*cmd, "--out", str(out)],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, which a terminal's Ctrl-C reaches as a whole
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a background parent may ignore it
    )
    ray_procs: list[Any] = []
    try:
        episodes = out / "episodes.jsonl"
        while proc.poll() is None and not (episodes.exists() and episodes.stat().st_size > 0):
            time.sleep(0.2)  # the cluster starts, the actors start, the first chunk comes back
        assert proc.poll() is None, "the run ended before it could be inspected"
        ray_procs = psutil.Process(proc.pid).children(recursive=True)
        sockets = _listening([psutil.Process(proc.pid), *ray_procs])
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    labels = " ".join(s[0] for s in sockets)
    assert "gcs_server" in labels and "raylet" in labels and "RolloutWorker" in labels, sockets
    exposed = [s for s in sockets if not _loopback(s[1])]
    assert not exposed, f"listening beyond loopback: {exposed}"
    print(f"{len(sockets)} listening sockets, all on loopback")
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "ValueError" not in err, err[-3000:]
    assert err.strip().splitlines()[-1] == "milepost: interrupted"
    _, alive = psutil.wait_procs(ray_procs, timeout=60)
    for p in alive:
        p.kill()
    assert not alive, f"Ray processes left running after Ctrl-C: {[p.pid for p in alive]}"
