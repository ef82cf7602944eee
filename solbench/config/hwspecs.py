"""Load ``hardware_specs/*.yaml`` (and ``*.yml``) into :class:`HardwareSpec` values (SI units).

One file per device model, named after its id (two files of one name, ``.yaml`` and ``.yml``, are an
error). Pydantic checks each file strictly (unknown fields, missing fields and ill-typed values are
errors); a problem is reported as one line naming the file, the line and the field, e.g.
``hardware_specs/h200-sxm.yaml:17: bandwidth_tbs: required field missing``.

Directory: ``$SOLBENCH_SPECS_DIR``, else ``<repo>/hardware_specs``, else the copy inside an
installed wheel (``solbench/hardware_specs``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from solbench.analysis.hwspec import HardwareSpec
from solbench.config.yamlio import YamlDocument, read_yaml, yaml_files
from solbench.errors import ConfigError
from solbench.text import suggest

TensorUnit = Literal["fp64", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"]
VectorUnit = Literal["fp64", "fp32", "bf16", "fp16"]
_TERA = 1e12


def _tera(value: float) -> float:
    """TFLOP/s or TB/s to SI, rounded to a whole unit so 66.9 TFLOP/s is exactly 66.9e12."""
    return float(round(value * _TERA))


def _per_direction(bidirectional_gbs: float | None) -> float | None:
    """A datasheet's bidirectional GB/s as bytes/s per direction (what nccl-tests' busbw compares with)."""
    return None if bidirectional_gbs is None else bidirectional_gbs * 1e9 / 2


def _regex(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid regex {pattern!r}: {exc}") from None
    return pattern


def _has_fp32(peaks: dict[str, float]) -> dict[str, float]:
    if "fp32" not in peaks:
        raise ValueError("the fp32 vector peak is required")
    return peaks


# Every amount (TB/s, TFLOP/s, GB, MiB, W, GB/s) at least 1e-3 and at most 1e9 of its file unit, and
# finite: a smaller one divides by about zero later, a larger one overflows once in SI units.
_Positive = Annotated[float, Field(ge=1e-3, le=1e9, allow_inf_nan=False)]
_PositiveInt = Annotated[int, Field(gt=0, le=10**9)]


def _plausible(low: float, high: float, unit: str, example: str) -> Any:
    """A check that a rate lies within [low, high] of its file unit: bounds with a clear margin around
    every real GPU and CPU, so that a figure written in another unit (3350 for 3.35 TB/s, GFLOP/s
    for TFLOP/s) is refused instead of making every T_SOL it sets 1000x off."""
    def check(value: float) -> float:
        if not low <= value <= high:
            raise ValueError(f"outside {low:g}-{high:g} {unit}, beyond any real device: it is in {unit}, e.g. "
                             f"{example}")
        return value

    return AfterValidator(check)


# Plausible rates (shipped specs: 0.3-8 TB/s, tensor 65-10,000 TFLOP/s, vector 0.25-133.8 TFLOP/s)
_Bandwidth = Annotated[_Positive, _plausible(0.01, 100, "TB/s", "3.35 for 3.35 TB/s")]
_TensorPeak = Annotated[_Positive, _plausible(0.1, 1e5, "TFLOP/s", "989.4 for 989.4 TFLOP/s")]
_VectorPeak = Annotated[_Positive, _plausible(1e-3, 1e3, "TFLOP/s", "66.9 for 66.9 TFLOP/s")]
# interconnects (shipped: PCIe 32 GB/s to NVLink 1800 GB/s, both directions): 1.8 for 1.8 TB/s refused
_LinkRate = Annotated[_Positive, _plausible(10, 2e4, "GB/s", "900 for 900 GB/s")]
_Regex = Annotated[str, AfterValidator(_regex)]
_HexId = Annotated[str, Field(pattern=r"^0x[0-9a-fA-F]{4}$")]
_Id = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")]
_Confidence = Literal["high", "medium", "low"]


class _GpuFile(BaseModel):
    """The fields of a GPU spec file, in file units."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: _Id
    name: str
    vendor: str
    kind: Literal["gpu"] = "gpu"
    arch: str
    compute_capability: Annotated[str, Field(pattern=r"^\d+\.\d+$")]
    sm_count: _PositiveInt
    max_sm_clock_mhz: _PositiveInt | None
    tensor_spec_clock_mhz: _PositiveInt | None
    memory_gb: _Positive
    memory_type: str
    bandwidth_tbs: _Bandwidth
    l2_mb: _Positive | None
    tdp_w: _Positive | None
    nvlink_gbs: _LinkRate | None = None  # GB/s per GPU, both directions together, as datasheets give it
    pcie_gbs: _LinkRate | None = None  # GB/s of the x16 host link, both directions together
    pci_device_ids: list[_HexId]
    name_patterns: list[_Regex]
    match_priority: int
    aliases: list[_Id] = []
    tensor_peaks_tflops: dict[TensorUnit, _TensorPeak]
    vector_peaks_tflops: Annotated[dict[VectorUnit, _VectorPeak], AfterValidator(_has_fp32)]
    sources: dict[str, str]
    notes: list[str] = []
    confidence: _Confidence

    def to_spec(self) -> HardwareSpec:
        """The spec in SI units."""
        return HardwareSpec(
            id=self.id, name=self.name, kind="gpu", source="datasheet", vendor=self.vendor, arch=self.arch,
            compute_capability=self.compute_capability, sm_count=self.sm_count,
            max_sm_clock_mhz=self.max_sm_clock_mhz, tensor_spec_clock_mhz=self.tensor_spec_clock_mhz,
            memory_bytes=round(self.memory_gb * 1e9), memory_type=self.memory_type,
            bandwidth=_tera(self.bandwidth_tbs),
            l2_bytes=None if self.l2_mb is None else round(self.l2_mb * 2**20), tdp_w=self.tdp_w,
            nvlink_bandwidth=_per_direction(self.nvlink_gbs), pcie_bandwidth=_per_direction(self.pcie_gbs),
            tensor_peaks={k: _tera(v) for k, v in self.tensor_peaks_tflops.items()},
            vector_peaks={k: _tera(v) for k, v in self.vector_peaks_tflops.items()},
            pci_device_ids=tuple(int(p, 16) for p in self.pci_device_ids),
            name_patterns=tuple(self.name_patterns), match_priority=self.match_priority,
            aliases=tuple(self.aliases), sources=dict(self.sources), notes=tuple(self.notes),
            confidence=self.confidence,
        )


class _CpuFile(BaseModel):
    """The fields of the CPU spec file: identity only, peaks are measured at run time."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: _Id
    name: str
    kind: Literal["cpu"]
    vendor: str | None = None
    name_patterns: list[_Regex] = []
    match_priority: int = 1000
    aliases: list[_Id] = []
    sources: dict[str, str] = {}
    notes: list[str] = []
    confidence: _Confidence = "low"

    def to_spec(self) -> HardwareSpec:
        """The spec, without peaks until they are measured."""
        return HardwareSpec(
            id=self.id, name=self.name, kind="cpu", source="measured", vendor=self.vendor,
            name_patterns=tuple(self.name_patterns), match_priority=self.match_priority,
            aliases=tuple(self.aliases), sources=dict(self.sources), notes=tuple(self.notes),
            confidence=self.confidence,
        )


def specs_dir(directory: str | Path | None = None) -> Path:
    """The spec directory: the argument, $SOLBENCH_SPECS_DIR, the repo's or the wheel's copy."""
    if directory is not None:
        chosen = Path(directory)
    elif os.environ.get("SOLBENCH_SPECS_DIR"):
        chosen = Path(os.environ["SOLBENCH_SPECS_DIR"])
    else:
        here = Path(__file__).resolve()
        repo, wheel = here.parents[2] / "hardware_specs", here.parents[1] / "hardware_specs"
        chosen = repo if repo.is_dir() else wheel
    if not chosen.is_dir():
        raise ConfigError(f"{chosen}: hardware spec directory not found (set SOLBENCH_SPECS_DIR)")
    return chosen


def load_spec_file(path: str | Path) -> HardwareSpec:
    """Read and validate one spec file."""
    return _load(Path(path))[0]


def _load(path: Path) -> tuple[HardwareSpec, YamlDocument]:
    """One spec file validated, and its document (for the lines of later errors)."""
    doc = read_yaml(path)
    if not isinstance(doc.data, dict):
        raise doc.error([], "expected a mapping of spec fields")
    model = _CpuFile if doc.data.get("kind") == "cpu" else _GpuFile
    try:
        parsed = model.model_validate(doc.data)
    except ValidationError as exc:
        errors = exc.errors()  # an unknown field first: it is usually a misspelt required one
        first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        raise doc.validation_error(first, _pci_hint(first) or _unknown_hint(first, model)) from None
    if parsed.id != path.stem:
        raise doc.error(["id"], f"{parsed.id!r} must equal the file name {path.stem!r}")
    return parsed.to_spec(), doc


def load_specs(directory: str | Path | None = None) -> tuple[HardwareSpec, ...]:
    """Every spec in the directory, in match order (match_priority, then id)."""
    root = specs_dir(directory)
    specs: list[HardwareSpec] = []
    owner: dict[str, str] = {}  # id, alias or pci id -> "file:line" that claims it
    named: dict[str, Path] = {}  # file name without its suffix (the id) -> the file
    for path in yaml_files(root):
        if path.stem in named:
            raise ConfigError(f"{named[path.stem]} and {path}: two hardware spec files named {path.stem!r}; keep one")
        named[path.stem] = path
        spec, doc = _load(path)
        claims: list[tuple[str, list[str | int]]] = [
            (spec.id, ["id"]), *((a, ["aliases", i]) for i, a in enumerate(spec.aliases)),
            *((f"pci 0x{p:04x}", ["pci_device_ids", i]) for i, p in enumerate(spec.pci_device_ids))]
        for claim, loc in claims:
            if claim in owner:
                raise doc.error(loc, f"{claim!r} is also claimed by {owner[claim]}")
            owner[claim] = f"{path}:{doc.line_of(loc)}"
        specs.append(spec)
    if not specs:
        raise ConfigError(f"{root}: no hardware spec files (*.yaml, *.yml)")
    return tuple(sorted(specs, key=lambda s: (s.match_priority, s.id)))


def get_spec(spec_id_or_alias: str, directory: str | Path | None = None) -> HardwareSpec:
    """The spec with this id or alias (case-insensitive), e.g. "h200" -> h200-sxm."""
    key = spec_id_or_alias.strip().lower()
    specs = load_specs(directory)
    for spec in specs:
        if key == spec.id or key in spec.aliases:
            return spec
    known = ", ".join(sorted(s.id for s in specs))
    aliases = ", ".join(f"{a}={s.id}" for s in specs for a in s.aliases)
    raise ConfigError(f"unknown hardware spec {spec_id_or_alias!r}; known: {known} (aliases: {aliases})")


def _unknown_hint(error: Any, model: type[BaseModel]) -> str | None:
    """"unknown field 'bandwith_tbs' (did you mean 'bandwidth_tbs'?)" for a misspelt top-level field."""
    loc = error["loc"]
    if error["type"] != "extra_forbidden" or len(loc) != 1:
        return None
    return f"unknown field {loc[0]!r}{suggest(str(loc[0]), model.model_fields)}"


def _pci_hint(error: Any) -> str | None:
    """YAML reads 0x2335 as the integer 9013: say how to write a PCI ID."""
    value = error.get("input")
    if error["loc"][0] == "pci_device_ids" and type(value) is int:
        msg = str(error["msg"]).removeprefix("Value error, ")
        return f'{msg} (got {value}: quote hex IDs, e.g. "0x{value:04x}")'
    return None


__all__ = ["get_spec", "load_spec_file", "load_specs", "specs_dir"]
