"""profiles.yaml: what each ``evaltui run PROFILE`` command asks of the machine.

```yaml
train-small:            # a profile name
  marginal_vram_mb: 8000
  exclusive_gpu: false
  priority: 0
  cpus: 4               # CPU cores it holds while it runs (default: none counted)
notebook:
  exclusive_gpu: true   # no marginal_vram_mb: a whole GPU
```

Looked up in ``--profiles FILE``, else ``./profiles.yaml``, else
``state_dir()/profiles.yaml``. A profile that is not in the file (or no file at all)
takes a whole GPU, exclusively: the safe guess for a command nobody described.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from evaltui.rundir.layout import state_dir

PROFILES_FILENAME = "profiles.yaml"


class ProfileError(ValueError):
    """The profiles file cannot be used; the message names the file, profile and field."""


class Profile(BaseModel):
    """One profile's resource request."""

    model_config = ConfigDict(extra="forbid")

    marginal_vram_mb: StrictInt | None = Field(default=None, ge=0)
    """VRAM (MiB) to reserve; unset with ``exclusive_gpu`` means the whole GPU."""
    exclusive_gpu: StrictBool = False
    """Run only on a GPU nothing else runs on (and keep others off it)."""
    priority: StrictInt = Field(default=0, ge=-100, le=100)
    cpus: float | None = Field(default=None, gt=0, le=4096)
    """CPU cores the command holds while it runs (admitted like memory); unset: none."""


WHOLE_GPU = Profile(exclusive_gpu=True)


@dataclass(frozen=True)
class ResolvedProfile:
    """The profile to use, and where it came from (for the user)."""

    name: str
    profile: Profile
    source: str
    """``FILE`` or a note saying the default applies and why."""
    found: bool


def find_profiles_file(explicit: Path | None = None) -> Path | None:
    """``explicit`` (it must exist), else ./profiles.yaml, else the state dir's."""
    if explicit is not None:
        if not explicit.is_file():
            raise ProfileError(f"{explicit}: no such profiles file")
        return explicit
    for candidate in (Path.cwd() / PROFILES_FILENAME, state_dir() / PROFILES_FILENAME):
        if candidate.is_file():
            return candidate
    return None


def load_profiles(path: Path) -> dict[str, Profile]:
    """Parse and validate a profiles file."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read: {exc}") from None
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path}: not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: must map profile names to settings, got "
                           f"{type(data).__name__}")
    profiles: dict[str, Profile] = {}
    for name, settings in data.items():
        try:
            profiles[str(name)] = Profile.model_validate(settings or {})
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "settings"
            raise ProfileError(f"{path}: profile {name!r}: {where}: {err['msg']}") from None
    return profiles


def resolve_profile(name: str, explicit: Path | None = None) -> ResolvedProfile:
    """The named profile, or a whole exclusive GPU when it is not described anywhere."""
    path = find_profiles_file(explicit)
    if path is None:
        return ResolvedProfile(name, WHOLE_GPU, "no profiles.yaml found: a whole GPU, "
                               "exclusive", False)
    profiles = load_profiles(path)
    if name in profiles:
        return ResolvedProfile(name, profiles[name], str(path), True)
    return ResolvedProfile(name, WHOLE_GPU, f"{path} has no profile {name!r}: a whole GPU, "
                           "exclusive", False)
