"""Re-run an episode's logged actions in a fresh env and compare step by step.

The actions are the ``inputs.action`` of the ``fire`` records of the graph's env step
node in ``log.jsonl``; the episode's dataset row gives the env id and seed. Each replayed
step's reward and done flag must equal the logged ``outputs.reward`` / ``outputs.done``,
and the agent positions (appended when they change, start first) must equal
trajectory.json's ``positions``. The built-in BabyAI env is replayed here; Meta-World's
by ``mwreplay.py``, which also recomputes the row's metrics. Other envs are not known to
be deterministic or resettable outside the run. Both read the log and say where the replay
diverges through ``replaysteps.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evaltui.benchmarks.babyai.grid import agent_cell
from evaltui.benchmarks.babyai.minigrid_import import make_env, quiet_stdout
from evaltui.contract.records import (
    GRAPH_FILENAME,
    LOG_FILENAME,
    SPEC_FILENAME,
    TRAJECTORY_FILENAME,
)
from evaltui.engine.graph.datasets import DatasetError, load_episodes, resolve_dataset
from evaltui.results.mwreplay import replay_episode as replay_metaworld
from evaltui.results.replaysteps import Divergence, logged_steps, same_reward
from evaltui.results.verify import AGGREGATED, StoredEpisode, VerifyInputError
from evaltui.rundir.safeopen import read_json_inside

BABYAI_ENV_IMPL = "evaltui.benchmarks.babyai.env:BabyAIEnv"
METAWORLD_ENV_IMPL = "evaltui.benchmarks.metaworld.env:MetaWorldEnv"


@dataclass
class ReplayReport:
    """Outcome of ``verify --replay``: ``unsupported`` set means nothing was replayed."""

    episodes_replayed: int = 0
    steps_replayed: int = 0
    divergences: list[Divergence] = field(default_factory=list)
    unsupported: str | None = None

    @property
    def ok(self) -> bool:
        return not self.divergences

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def run_loop(run_dir: Path) -> tuple[str, str, str]:
    """(env nodeset impl, env nodeset name, step node name) from the run's graph.json."""
    path = run_dir / GRAPH_FILENAME
    try:
        graph = read_json_inside(run_dir, GRAPH_FILENAME)  # never through a symlink out
        env, step = graph["loop"]["env"], graph["loop"]["step"]
        impl = graph["nodesets"][env]["impl"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise VerifyInputError(f"{path} does not name the env loop: {exc!r}") from None
    return str(impl), str(env), str(step)


def env_params(run_dir: Path, env_name: str) -> dict[str, Any]:
    """The env nodeset's params as the run used them (graph.json, defaults filled in)."""
    try:
        params = read_json_inside(run_dir, GRAPH_FILENAME)["nodesets"][env_name]["params"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise VerifyInputError(f"{run_dir / GRAPH_FILENAME} has no params of "
                               f"{env_name!r}: {exc!r}") from None
    if not isinstance(params, dict):
        raise VerifyInputError(f"{run_dir / GRAPH_FILENAME}: params of {env_name!r} are "
                               "not an object")
    return params


def dataset_rows(run_dir: Path) -> list[dict[str, Any]]:
    """The dataset split the run was evaluated on (spec.json ``eval.dataset``/``split``)."""
    path = run_dir / SPEC_FILENAME
    try:
        spec = read_json_inside(run_dir, SPEC_FILENAME)
        dataset, split = spec["eval"]["dataset"], spec["eval"].get("split")
        workspace = spec.get("active_workspace_dir")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise VerifyInputError(f"{path} does not name the dataset: {exc!r}") from None
    if isinstance(workspace, str) and not Path(dataset).is_absolute() and \
            (Path(workspace) / dataset).exists():
        dataset = str(Path(workspace) / dataset)  # a relative path is the submitter's cwd
    try:
        return load_episodes(resolve_dataset(dataset, split)[0])
    except (DatasetError, OSError) as exc:
        raise VerifyInputError(f"cannot read the run's dataset: {exc}") from None


def replay_run(run_dir: Path, episodes: list[StoredEpisode],
               tolerance: float = 0.0) -> ReplayReport:
    """Replay every aggregated episode of ``run_dir``; BabyAI runs only."""
    report = ReplayReport()
    impl, env_name, step_node = run_loop(run_dir)
    if impl == METAWORLD_ENV_IMPL:
        params = env_params(run_dir, env_name)

        def replay(ep: StoredEpisode, row: Mapping[str, Any], node: str,
                   tol: float) -> tuple[int, Divergence | None]:
            return replay_metaworld(ep, row, node, params, tol)
    elif impl == BABYAI_ENV_IMPL:
        replay = replay_episode
    else:
        report.unsupported = (f"replay is unsupported for env nodeset {env_name!r} ({impl}); "
                              f"only {BABYAI_ENV_IMPL} and {METAWORLD_ENV_IMPL} are "
                              "replayable")
        return report
    rows = dataset_rows(run_dir)
    for ep in episodes:
        if ep.record.get("status") not in AGGREGATED or ep.trajectory is None:
            continue
        if not 0 <= ep.index < len(rows):
            report.divergences.append(Divergence(ep.label, 0, f"episode index {ep.index} is "
                                                 f"not in the dataset ({len(rows)} rows)"))
            continue
        row = rows[ep.index]
        if row.get("episode_id") != ep.record.get("episode_id"):
            report.divergences.append(Divergence(
                ep.label, 0, f"dataset row {ep.index} is {row.get('episode_id')!r}"))
            continue
        steps, divergence = replay(ep, row, step_node, tolerance)
        report.episodes_replayed += 1
        report.steps_replayed += steps
        if divergence is not None:
            report.divergences.append(divergence)
    return report


def replay_episode(ep: StoredEpisode, row: Mapping[str, Any], step_node: str,
                   tolerance: float = 0.0) -> tuple[int, Divergence | None]:
    """(steps replayed, first divergence or None) for one episode."""

    if not (ep.ep_dir / LOG_FILENAME).is_file():
        return 0, Divergence(ep.label, 0, f"no {LOG_FILENAME}: no actions to replay")
    positions = (ep.trajectory or {}).get("positions")
    expected = [tuple(int(v) for v in p) for p in positions] if positions else None
    env = make_env(str(row["env_id"]))
    try:
        with quiet_stdout():
            env.reset(seed=int(row["seed"]))
        sim = env.unwrapped
        replayed = [agent_cell(sim)]

        def position_divergence(step: int) -> Divergence | None:
            k = len(replayed) - 1
            if expected is None:
                return None  # the env reported no positions: rewards and flags only
            if k >= len(expected):
                return Divergence(ep.label, step, f"replay reaches position #{k} "
                                  f"{list(replayed[k])}; {TRAJECTORY_FILENAME} has only "
                                  f"{len(expected)} positions")
            if replayed[k] != expected[k]:
                return Divergence(ep.label, step, f"position #{k}: replay {list(replayed[k])}, "
                                  f"{TRAJECTORY_FILENAME} {list(expected[k])}")
            return None

        if (d := position_divergence(0)) is not None:
            return 0, d
        count = 0
        for logged in logged_steps(ep.ep_dir / LOG_FILENAME, step_node):
            action = logged.action
            if isinstance(action, bool) or not isinstance(action, int):
                return count, Divergence(ep.label, logged.step, f"logged action {action!r} is "
                                         "not an int; cannot replay it")
            _obs, reward, terminated, truncated, _ = env.step(action)
            count += 1
            done = bool(terminated or truncated)
            if not same_reward(logged.reward, float(reward), tolerance):
                return count, Divergence(ep.label, logged.step, f"reward: replay {reward!r}, "
                                         f"log {logged.reward!r} (action {action})")
            if logged.done is not done:
                return count, Divergence(ep.label, logged.step, f"done: replay {done}, "
                                         f"log {logged.done!r} (action {action})")
            pos = agent_cell(sim)
            if pos != replayed[-1]:
                replayed.append(pos)
                if (d := position_divergence(logged.step)) is not None:
                    return count, d
        if expected is not None and len(replayed) < len(expected):
            return count, Divergence(ep.label, count, f"{TRAJECTORY_FILENAME} has "
                                     f"{len(expected)} positions, the replay of {count} "
                                     f"actions only {len(replayed)}")
        return count, None
    finally:
        env.close()
