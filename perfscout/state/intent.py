"""What a person asked for, in slots, independent of how it was phrased.

The deterministic parser (:mod:`perfscout.graph.understand`) and the LLM planner both
fill an :class:`Intent`; the same validation, the same questions and the same refusals
apply to either (one trust boundary). Tasks are made from a complete Intent only.

An Intent is *complete* when nothing in :attr:`Intent.missing` is left and it is not
refused; otherwise the clarify step asks one question per missing or ambiguous slot.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from perfscout.state.modes import RequestMode

#: The kinds of question perfscout answers.
Question = Literal[
    "compare",  # two or more codecs side by side
    "best_ratio",  # which setting/codec compresses most (bound held)
    "fastest_compress",
    "fastest_decompress",
    "lowest_error",  # most accurate, optionally at a target ratio / PSNR / bitrate
    "evaluate",  # measure the named codec(s): ratio, speed, error
    "sweep",  # run a sweep spec file
    "profile",  # run a program under a profiler and say what limits it
    "diagnose",  # diagnose an existing profile file
    "describe_machine",  # platform snapshot
    "list_codecs",  # what is installed here
    "compare_runs",  # is run B faster/slower than run A (regression runner)
]

#: Questions that measure codecs on data (they need codecs, a bound and data).
CODEC_QUESTIONS: frozenset[str] = frozenset(
    {"compare", "best_ratio", "fastest_compress", "fastest_decompress", "lowest_error", "evaluate"})


#: Slots the clarify step can ask about, in the order it asks.
Slot = Literal["clause", "question", "codecs", "mode", "bounds", "data", "shape", "dtype", "var",
               "command", "profile_file", "runs"]


class Target(BaseModel):
    """A goal or constraint on a measured figure: "at least 20x", "PSNR >= 80 dB"."""

    model_config = ConfigDict(extra="forbid")

    metric: Literal["ratio", "psnr", "bitrate", "max_abs_err"]
    op: Literal[">=", "<="]
    value: float
    text: str = ""  # as written

    def met_by(self, record: dict[str, Any]) -> bool | None:
        v = record.get(self.metric)
        if v is None:
            return None
        return v >= self.value if self.op == ">=" else v <= self.value

    def label(self) -> str:
        unit = {"ratio": "x", "psnr": " dB", "bitrate": " bits/value"}.get(self.metric, "")
        return f"{self.metric} {self.op} {self.value:g}{unit}"


class DataRef(BaseModel):
    """One piece of data the person named."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["named", "synthetic", "raw", "file"]  # file = netCDF/HDF5/Zarr variable
    name: str = ""  # registry name or synthetic spec KIND:SHAPE
    path: str = ""
    shape: list[int] | None = None
    dtype: Literal["f32", "f64"] | None = None
    endian: Literal["<", ">"] | None = None
    var: str = ""
    text: str = ""  # as written

    def dataset_arg(self) -> str:
        """What the evaluate_codec tool takes as ``dataset``."""
        if self.kind == "synthetic":
            return f"synthetic:{self.name}"
        return self.path if self.kind in ("raw", "file") else self.name

    def label(self) -> str:
        if self.kind == "file":
            return f"{self.var} in {self.path}" if self.var else self.path
        return self.dataset_arg()


class Pending(BaseModel):
    """A slot that must be filled (or a choice made) before anything runs."""

    model_config = ConfigDict(extra="forbid")

    slot: Slot
    question: str  # one precise question, with the candidates where there are some
    candidates: list[str] = Field(default_factory=list)
    detail: str = ""  # the text it concerns (an unknown word, a clause, a file)
    proposal: dict[str, Any] = Field(default_factory=dict)  # what "yes" would accept


class Intent(BaseModel):
    """The request, understood."""

    model_config = ConfigDict(extra="forbid")

    text: str = ""
    language: Literal["en", "zh"] = "en"
    question: Question | None = None
    codecs: list[str] = Field(default_factory=list)  # registry ids
    codec_groups: list[Literal["all", "cpu", "gpu"]] = Field(default_factory=list)
    excluded_codecs: list[str] = Field(default_factory=list)  # "all except zfp", "不要用 sz2": never measured
    mode: RequestMode | None = None
    bounds: list[float] = Field(default_factory=list)
    targets: list[Target] = Field(default_factory=list)
    data: list[DataRef] = Field(default_factory=list)
    devices: list[Literal["cpu", "cuda"]] = Field(default_factory=list)  # empty: as each codec runs
    repeats: int | None = None
    #: missing values, as the request says to treat them: "nan" = evaluate the valid values
    #: only (a variable's masked points and any NaN/Inf kept losslessly beside the stream),
    #: a number = fill a variable's masked points with it; None: asked when the data has any
    masked: Literal["nan"] | float | None = None
    command: list[str] = Field(default_factory=list)
    profile_file: str = ""
    sweep_spec: str = ""
    sweep_out: str = ""
    runs: list[str] = Field(default_factory=list)
    refusal: str = ""  # non-empty: the request is refused as a whole, nothing runs
    missing: list[Pending] = Field(default_factory=list)
    ignored: list[str] = Field(default_factory=list)  # words/clauses not used, said in the report
    notes: list[str] = Field(default_factory=list)  # what the parser assumed, in sentences
    filled_by: Literal["parser", "llm", "parser+llm"] = "parser"

    @property
    def complete(self) -> bool:
        return not self.refusal and not self.missing

    def summary(self) -> str:
        """One line a person can check: what will be done."""
        if self.refusal:
            return f"refused: {self.refusal}"
        parts = [self.question or "?"]
        if self.codecs or self.codec_groups:
            groups = {"all": "every usable codec", "cpu": "every CPU codec", "gpu": "every GPU codec"}
            parts.append("codecs " + ", ".join(self.codecs + [groups[g] for g in self.codec_groups]))
        if self.excluded_codecs:
            parts.append("not " + ", ".join(self.excluded_codecs))
        if self.mode:
            parts.append(f"{self.mode} " + ", ".join(f"{b:g}" for b in self.bounds))
        if self.targets:
            parts.append("targets " + ", ".join(t.label() for t in self.targets))
        if self.data:
            parts.append("data " + ", ".join(d.label() for d in self.data))
        if self.devices:
            parts.append("devices " + ", ".join(self.devices))
        if self.command:
            parts.append("command " + " ".join(self.command))
        if self.profile_file:
            parts.append(f"profile file {self.profile_file}")
        if self.runs:
            parts.append("runs " + ", ".join(self.runs))
        if self.repeats:
            parts.append(f"{self.repeats} repeat{'s' if self.repeats != 1 else ''}")
        if self.masked == "nan":
            parts.append("missing values kept aside (valid values evaluated)")
        elif self.masked is not None:
            parts.append(f"missing values filled with {self.masked:g}")
        return "; ".join(parts)
