"""SubmitScreen: a form over the JobSpec, with validation errors next to their fields.

The form builds the same spec as ``evaltui eval`` (a built-in graph name or a graph or
JobSpec file, plus overrides). Pydantic checks types and ranges of every field at once
before anything is sent; the backend then checks the rest (the graph imports, the
dataset and split exist) and its SpecError lands under the field it names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.suggester import Suggester
from textual.widgets import Button, Checkbox, Input, Label, Select

from evaltui.contract.spec import JobSpec, SpecError
from evaltui.engine.executor.kinds import EXECUTORS, LOCAL, executor_kind
from evaltui.engine.graph.datasets import builtin_splits
from evaltui.engine.graph.specbuild import build_spec
from evaltui.engine.graph.specchecks import check_executor
from evaltui.graphs import builtin_graph_names
from evaltui.tui.backend import Backend
from evaltui.tui.keys import QUIT_BINDINGS
from evaltui.tui.widgets.keys_footer import KeysFooter

FIELDS: tuple[tuple[str, str, str, str], ...] = (
    # id, label, default, input type
    ("graph", "graph", "bot", "text"),
    ("dataset", "dataset", "babyai", "text"),
    ("split", "split", "GoToLocal", "text"),
    ("episodes", "episodes", "20", "integer"),
    ("start", "first index", "0", "integer"),
    ("workers", "workers", "1", "integer"),
    ("step_budget", "step budget", "", "integer"),  # empty: the env's own limit
    ("priority", "priority", "0", "integer"),
    ("vram", "VRAM MiB", "0", "integer"),
    ("replicas", "replicas", "", "text"),  # N or per_gpu: shared nodesets, one per GPU
    ("ray_address", "Ray address", "", "text"),  # after the executor choice
    ("slurm_partition", "Slurm partition", "", "text"),
    ("slurm_time", "Slurm time", "", "text"),
)
EXECUTOR_CHOICES = tuple((kind.label, kind.name) for kind in EXECUTORS.values())

PLACEHOLDERS = {"graph": "built-in ({graphs}) or a JSON file",
                "step_budget": "the env's own limit (BabyAI: max_steps)",
                "ray_address": "HOST:PORT (default $RAY_ADDRESS); executor ray only",
                "replicas": "N or per_gpu: a shared nodeset per GPU (empty: one)",
                # executor slurm's own fields (eval.slurm; empty: the cluster's defaults)
                "slurm_partition": "the cluster's default; executor slurm only",
                "slurm_time": "limit: 90, 1:30:00, 2-00:00:00; executor slurm only"}

REQUIRED = {"graph": "required: a built-in graph name or a JSON file",
            "episodes": "required: how many episodes to run",
            "start": "required: the first episode index (e.g. 0)",
            "workers": "required: how many env workers (1 or more)"}
"""Fields an empty value would silently turn into a default (``workers`` into 1)."""

FIELD_OF_PATH = {
    "target": "graph", "graph": "graph", "eval.dataset": "dataset", "eval.split": "split",
    "eval.episode_count": "episodes", "eval.episode_indices": "episodes",
    "eval.start_episode_index": "start", "eval.worker_count": "workers",
    "eval.step_budget": "step_budget", "scheduling.priority": "priority",
    "scheduling.marginal_vram_mb": "vram", "scheduling.exclusive_gpu": "exclusive",
    "eval.executor": "executor", "eval.ray_address": "ray_address",
    "replicas": "replicas", "eval.slurm": "executor", "eval.slurm.partition": "slurm_partition",
    "eval.slurm.time": "slurm_time",
}
NOT_INPUTS = ("form", "exclusive", "executor")
"""Error slots that are not text fields (no value to keep, nothing to focus)."""


def dataset_splits(dataset: str) -> list[str]:
    """The split names of a dataset as the form's dataset field names it: a built-in's
    manifests, a directory's ``{split}.jsonl`` files, a ``.jsonl`` file's stem."""
    dataset = dataset.strip()
    if builtin_splits(dataset):
        return builtin_splits(dataset)
    path = Path(dataset).expanduser()
    if dataset and path.is_dir():
        return sorted(p.stem for p in path.glob("*.jsonl"))
    return [path.stem] if path.suffix == ".jsonl" else []


class SplitSuggester(Suggester):
    """Completes the split field from the splits of the dataset currently in the form."""

    def __init__(self, screen: SubmitScreen) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.screen = screen

    async def get_suggestion(self, value: str) -> str | None:
        # The split field asks as soon as it mounts, before or after its siblings exist.
        field = next(iter(self.screen.query("#dataset").results(Input)), None)
        if field is None:
            return None
        lowered = value.lower()
        return next((split for split in dataset_splits(field.value)
                     if split.lower().startswith(lowered)), None)


def field_for(path: str) -> str:
    """The form field an error path (``eval.worker_count``, ``graph.nodes.x``) belongs to."""
    for prefix in sorted(FIELD_OF_PATH, key=len, reverse=True):
        if path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "["):
            return FIELD_OF_PATH[prefix]
    return "form"


class FormScroll(VerticalScroll, can_focus=False):
    """The form's frame: it scrolls when the terminal is shorter than the form (80x24),
    and a field or button that takes focus scrolls into view. Not a Tab stop itself."""


class SubmitScreen(ModalScreen[str | None]):
    """Dismisses with the new run_id, or None if cancelled.

    ``draft`` is the caller's dict of field values: the form starts from it and writes
    every change back, so what was typed survives Esc and comes back with the next form.
    """

    BINDINGS = [
        Binding("escape", "dismiss(None)", "Cancel"),
        Binding("ctrl+s", "submit", "Submit", priority=True),
        *QUIT_BINDINGS,
    ]
    CORE_KEYS = ("submit", "dismiss(None)")

    def __init__(self, backend: Backend, draft: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.backend = backend
        self.draft: dict[str, Any] = draft if draft is not None else {}
        self._errored: dict[str, str] = {}
        """The value each field had when its error was shown (a change clears the error)."""

    def compose(self) -> ComposeResult:
        graphs = ", ".join(builtin_graph_names())
        with FormScroll(classes="dialog submit"):
            yield Label("Submit an eval run", classes="dialog-title")
            with Grid(id="submit-form"):
                for field_id, label, default, kind in FIELDS:
                    if field_id == "ray_address":
                        yield Label("executor", classes="form-label")
                        yield Select(EXECUTOR_CHOICES, value=self.draft.get("executor", "local"),
                                     allow_blank=False, id="executor")
                        yield Label("", id="executor-error", classes="field-error")
                    yield Label(label, classes="form-label")
                    yield Input(str(self.draft.get(field_id, default)), id=field_id, type=kind,  # type: ignore[arg-type]
                                placeholder=PLACEHOLDERS.get(field_id, "").format(
                                    graphs=graphs),
                                suggester=SplitSuggester(self) if field_id == "split"
                                else None)
                    yield Label("", id=f"{field_id}-error", classes="field-error")
                yield Label("exclusive", classes="form-label")
                yield Checkbox("alone on its GPU (nothing else admitted there)",
                               bool(self.draft.get("exclusive", False)), id="exclusive")
                yield Label("", id="exclusive-error", classes="field-error")
            yield Label("", id="form-error", classes="field-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Submit (ctrl+s)", id="submit", variant="primary")
        yield KeysFooter()

    def on_mount(self) -> None:
        for label in self.query(".field-error"):
            label.display = False
        self.query_one("#graph", Input).focus()

    def spec(self) -> dict[str, Any]:
        """The JobSpec dict the form describes (raises SpecError for a bad graph target)."""
        def value(field_id: str) -> str:
            return self.query_one(f"#{field_id}", Input).value.strip()

        def integer(field_id: str) -> int | None:
            raw = value(field_id)
            return int(raw) if raw not in ("", "-") else None

        executor = str(self.query_one("#executor", Select).value)
        spec = build_spec(value("graph") or None, dataset=value("dataset") or None,
                          split=value("split") or None, episodes=integer("episodes"),
                          start=integer("start"), workers=integer("workers"),
                          step_budget=integer("step_budget"),
                          executor=None if executor == LOCAL.name else executor,
                          ray_address=value("ray_address") or None,
                          replicas=value("replicas") or None)
        scheduling = dict(spec.get("scheduling") or {})
        for key, field_id in (("priority", "priority"), ("marginal_vram_mb", "vram")):
            number = integer(field_id)
            if number is not None:
                scheduling[key] = number
        scheduling["exclusive_gpu"] = self.query_one("#exclusive", Checkbox).value
        spec["scheduling"] = scheduling
        if executor_kind(executor).batch:  # over a JobSpec file's eval.slurm, as --slurm-*
            given = {"partition": value("slurm_partition"), "time": value("slurm_time")}
            ev = spec.setdefault("eval", {})
            ev["slurm"] = {**dict(ev.get("slurm") or {}), **{k: v for k, v in given.items() if v}}
        return spec

    @on(Input.Changed)
    def _field_changed(self, event: Input.Changed) -> None:
        """Keep the draft, and drop the field's error: it was about the old value."""
        field_id = event.input.id
        if field_id is None:
            return
        self.draft[field_id] = event.value
        if field_id in self._errored and self._errored[field_id] != event.value:
            self._clear_error(field_id)

    @on(Checkbox.Changed, "#exclusive")
    def _exclusive_changed(self, event: Checkbox.Changed) -> None:
        self.draft["exclusive"] = event.value
        self._clear_error("exclusive")

    @on(Select.Changed, "#executor")
    def _executor_changed(self, event: Select.Changed) -> None:
        """Say at once when ray is not installed, rather than at submit."""
        self.draft["executor"] = event.value
        self._clear_error("executor")
        if missing := executor_kind(str(event.value)).missing():
            self._show_errors({"executor": missing})

    def action_submit(self) -> None:
        self._clear_errors()
        empty = {f: why for f, why in REQUIRED.items()
                 if not self.query_one(f"#{f}", Input).value.strip()}
        if empty:
            self._show_errors(empty)
            return
        try:
            spec = self.spec()
            check_executor(JobSpec.model_validate(spec))
        except SpecError as exc:
            self._show_errors({field_for(exc.field): exc.message})
            return
        except ValidationError as exc:
            errors: dict[str, str] = {}
            for err in exc.errors():
                path = ".".join(str(p) for p in err["loc"])
                errors.setdefault(field_for(path), err["msg"].removeprefix("Value error, "))
            self._show_errors(errors)
            return
        self.query_one("#submit", Button).disabled = True
        self._send(spec)

    @work(thread=True, exclusive=True, group="submit", exit_on_error=False)
    def _send(self, spec: dict[str, Any]) -> None:
        try:
            run_id, _ = self.backend.submit(spec)
        except SpecError as exc:
            self.app.call_from_thread(self._rejected, {field_for(exc.field): exc.message})
        except Exception as exc:  # the backend's own failure: show it, keep the form
            self.app.call_from_thread(self._rejected, {"form": f"{type(exc).__name__}: {exc}"})
        else:
            try:
                warnings = self.backend.submit_warnings(run_id)
            except Exception:  # the run is queued: a lost warning must not hide that
                warnings = []
            for warning in warnings:
                self.app.call_from_thread(self.app.notify, warning, title="submitted with a "
                                          "warning", severity="warning", timeout=12)
            self.app.call_from_thread(self.dismiss, run_id)

    def _rejected(self, errors: dict[str, str]) -> None:
        self.query_one("#submit", Button).disabled = False
        self._show_errors(errors)

    def _clear_errors(self, selector: str = ".field-error") -> None:
        for label in self.query(selector).results(Label):
            label.update("")
            label.display = False

    def _clear_error(self, field_id: str) -> None:
        self._errored.pop(field_id, None)
        self._clear_errors(f"#{field_id}-error, #form-error")

    def _show_errors(self, errors: dict[str, str]) -> None:
        for field_id, message in errors.items():
            if field_id not in NOT_INPUTS:
                self._errored[field_id] = self.query_one(f"#{field_id}", Input).value
            label = self.query_one(f"#{field_id}-error", Label)
            label.update(Content(f"↳ {message}"))  # plain text: "evaltui[ray]" is no tag
            label.display = True
        first = next(iter(errors))
        if first not in NOT_INPUTS:
            self.query_one(f"#{first}", Input).focus()

    @on(Button.Pressed, "#submit")
    @on(Input.Submitted)
    def _submit_pressed(self) -> None:
        self.action_submit()

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self) -> None:
        self.dismiss(None)
