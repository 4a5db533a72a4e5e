"""A searched configuration re-measured on fresh seeds: `harness run KIND --params-from`.

The best trial's score is the highest of many noisy scores, so it overestimates what its
configuration scores (the winner's curse), and the more trials the more so. An honest figure comes
from seeds the search never trained on: this run's seeds are moved past the search's when they
would overlap, and its summary (mean with the interval `harness compare` builds, reports/stats.py,
through seed_summary.add_intervals) is printed beside the search's score.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from foundation.infra.errors import UserError
from tasks.config import FinetuneConfig


def fresh_config(config: FinetuneConfig, seeds: int, origin: dict[str, Any]) -> FinetuneConfig:
    """`config` with seeds the search never used: as given if they are fresh; from the default seed,
    moved past the search's; an explicit seed that overlaps them is refused."""
    used = set(origin["search_seeds"] or ())
    chosen = range(config.seed, config.seed + seeds)
    overlap = sorted(used.intersection(chosen))
    if not overlap:
        return config
    fresh = max(used) + 1
    if config.seed != FinetuneConfig().seed:
        raise UserError(f"seed={config.seed} with --seeds {seeds} trains seed{'s' * (len(overlap) > 1)} "
                        f"{_listed(overlap)}, which the search {origin['study']!r} trained on; its "
                        "configuration is re-measured on seeds it never used: leave seed unset or pass "
                        f"seed={fresh} or more")
    return dataclasses.replace(config, seed=fresh)


def report(results: dict[str, Any], origin: dict[str, Any]) -> str:
    """Two lines: the search's score of its best trial, and this run's on fresh seeds with its interval."""
    task = origin["task"]
    trial_seeds = origin["trial_seeds"]
    lines = [f"search score {origin['score']:.4f}: {origin['study']} trial {origin['trial']}, the best of "
             f"{origin['trials']} trials, mean of seed{'s' if len(trial_seeds) > 1 else ''} "
             f"{_listed(trial_seeds)} (optimistic: chosen for being the highest)"]
    score = results.get("summary", {}).get(task, {}).get("score")
    if not isinstance(score, dict):
        return "\n".join(lines + [f"no fresh-seed score: this run holds no finished {task} seed"])
    fresh = sorted(record["seed"] for record in results["runs"] if record["task"] == task)
    line = f"fresh seeds {_listed(fresh)}: mean {score['mean']:.4f}"
    if "ci_low" in score:
        line += f", 95% interval [{score['ci_low']:.4f}, {score['ci_high']:.4f}] ({score['ci_covers']})"
    return "\n".join(lines + [line])


def _listed(seeds) -> str:
    return ", ".join(map(str, seeds))
