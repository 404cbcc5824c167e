"""The README's one-machine Ray recipe is safe to paste: authenticated (Ray listens on
every interface whatever address it is given) and stopping only the nodes it started."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def one_machine_ray_recipe() -> list[str]:
    text = README.read_text()
    after = text[text.index("To try it on one machine"):]
    block = re.search(r"```bash\n(.*?)```", after, re.S)
    assert block is not None
    return block.group(1).replace("\\\n", " ").splitlines()


def test_the_one_machine_ray_recipe_is_authenticated_and_stops_its_own_nodes() -> None:
    lines = one_machine_ray_recipe()
    assert "export RAY_AUTH_MODE=token" in lines
    assert not any("RAY_AUTH_MODE=disabled" in line for line in lines)
    assert not any(line.strip().startswith("ray stop") for line in lines)
    starts = [line for line in lines if line.strip().startswith("ray start")]
    assert len(starts) == 2 and all("--block" in s and s.rstrip().endswith("&")
                                    for s in starts)
    pids = [line.split("=")[0] for line in lines if re.fullmatch(r"[A-Z0-9]+=\$!", line)]
    assert len(pids) == 2
    kills = [line for line in lines if line.startswith("kill ")]
    assert kills and all(f"${pid}" in kills[-1] for pid in pids)
