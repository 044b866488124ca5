"""The replay document: per-node costs, round timings and savings in one versioned JSON
document (capture/round/replays.py `run_replays` measures all of it).

Results are plain DataFrames plus this document; `reports` renders them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from graph_harness.capture.export.documents import ExportError, Fields, frame_records, show
from graph_harness.capture.export.kinds import load_document
from graph_harness.capture.files import write_atomic
from graph_harness.capture.rows import columns
from graph_harness.capture.stats import ROUND_TRIAL_COLUMNS, Fit

REPLAY_SCHEMA = "graph-harness/replay"
# Version 2: rounds timed over builds (round_trials carry `build`), savings carry their
# interval (`measured_lo`/`measured_hi`) and name what they remove `removed_nodes` and
# `removed_by_type` (A - B; a delta is B - A everywhere). Version-1 files written after
# builds landed hold the same content under `delta_nodes`/`delta_by_type` and are read;
# earlier ones are refused (see ReplayResult.from_dict). Version 3 adds the host side of a
# launch (`host_trials`, `host_fits`); a version-2 file, without them, is read.
REPLAY_SCHEMA_VERSION = 3


# --- the document ------------------------------------------------------------------------


@dataclass(frozen=True)
class ChainTrial:
    """One trial of a chain (capture/replay/chains.py): `calls` calls of one kind, `nodes`
    nodes, and one replay's time, us."""

    kind: str
    calls: int
    nodes: int
    trial: int
    us: float


@dataclass(frozen=True, kw_only=True)
class HostTrial:
    """The host side of a launch (capture/replay/host.py): a trial's median launch, us,
    of a graph of one kind and shape (`branches`: its roots)."""

    kind: str
    shape: str
    branches: int
    calls: int
    nodes: int
    trial: int
    us: float


CHAIN_TRIAL_COLUMNS = columns(ChainTrial)
FIT_COLUMNS = ["kind", *columns(Fit)]
HOST_TRIAL_COLUMNS = columns(HostTrial)
HOST_FIT_COLUMNS = ["kind", "shape", *columns(Fit)]  # one fit per kind and shape
# run_replays adds the ratio of measured to the real-shape prediction.
SAVING_OPTIONAL = ["ratio_shapes"]
REPLAY_KEYS = ("schema", "schema_version", "env", "created", "params", "options")
REPLAY_KEYS += ("chain_trials", "fits", "round_trials", "savings")
# The host side of a launch (capture/replay/host.py); absent from documents written before.
REPLAY_OPTIONAL_KEYS = ("host_trials", "host_fits")


@dataclass(frozen=True, kw_only=True)
class Saving:
    """A saving of the round (capture/round/pricing.py savings()): A -> B, the nodes it
    removes, each round's median, the saving measured with its interval, and the
    predictions. One row of the document's `savings`."""

    a: str
    b: str
    removed_nodes: int
    removed_by_type: str  # JSON: node type -> nodes removed
    round_a_us: float
    round_b_us: float
    measured_us: float
    measured_lo: float
    measured_hi: float
    predicted_us: float  # removed nodes x per-node cost of their type
    ratio: float  # measured / predicted
    predicted_shapes_us: float  # the real-shape chains' calls (NaN where not measured)


SAVING_COLUMNS = columns(Saving)


class ReplayDocumentError(ExportError):
    """A replay document that cannot be read; the message names the file and the field."""


@dataclass(kw_only=True)
class ReplayResult:
    chain_trials: pd.DataFrame
    fits: pd.DataFrame
    round_trials: pd.DataFrame | None = None
    savings: pd.DataFrame | None = None
    params: dict[str, Any] | None = None
    env: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    # The host side of a launch: HOST_TRIAL_COLUMNS and HOST_FIT_COLUMNS
    # (capture/replay/host.py); None where not measured.
    host_trials: pd.DataFrame | None = None
    host_fits: pd.DataFrame | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": REPLAY_SCHEMA,
            "schema_version": REPLAY_SCHEMA_VERSION,
            "env": self.env,
            "created": self.created,
            "params": self.params,
            "options": self.options,
            "chain_trials": frame_records(self.chain_trials),
            "fits": frame_records(self.fits),
            "round_trials": frame_records(self.round_trials),
            "savings": frame_records(self.savings),
            "host_trials": frame_records(self.host_trials),
            "host_fits": frame_records(self.host_fits),
        }

    def write_json(self, path: str | Path) -> Path:
        return write_atomic(
            Path(path), json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n"
        )

    @classmethod
    def from_dict(cls, doc: Any, *, where: str = "replay document") -> ReplayResult:
        """Check every field (type and range) of a replay document; ReplayDocumentError
        naming `where` (the file) and the field otherwise.

        Version 2 is read. Version 1 is read where it already holds version 2's content
        (every file written since rounds were timed over builds); an older version-1
        file is refused, saying so."""
        f = Fields(where, ReplayDocumentError)
        if not isinstance(doc, dict):
            f.fail("", f"not a graph-harness replay document: expected an object, got {show(doc)}")
        if doc.get("schema") != REPLAY_SCHEMA:
            got = show(doc.get("schema"))
            f.fail(
                "",
                f"not a graph-harness replay document (schema {got}, expected {REPLAY_SCHEMA!r})",
            )
        version = doc.get("schema_version")
        if type(version) is not int or version not in (1, 2, REPLAY_SCHEMA_VERSION):
            f.fail(
                "",
                f"replay schema version {show(version)} is not the supported "
                f"{REPLAY_SCHEMA_VERSION} (or 1, 2); re-run `graph-harness replay`",
            )
        try:
            return cls._from_checked(f, doc)
        except ReplayDocumentError as e:
            if version == 1:
                raise ReplayDocumentError(
                    f"{e} (a version-1 replay document from before rounds were timed over "
                    "builds: re-run `graph-harness replay` for a version-2 one)"
                ) from None
            raise

    @classmethod
    def _from_checked(cls, f: Fields, doc: dict) -> ReplayResult:
        f.keys("", doc, REPLAY_KEYS, REPLAY_OPTIONAL_KEYS)
        f.scalars("env", doc["env"])
        f.string("created", doc["created"])
        f.ints("params", doc["params"], none=True)
        f.scalars("options", doc["options"])
        chain_trials = read_frame(f, "chain_trials", doc["chain_trials"], CHAIN_TRIAL_COLUMNS)
        fits = read_frame(f, "fits", doc["fits"], FIT_COLUMNS)
        round_trials = savings = None
        if doc["round_trials"] is not None:
            round_trials = read_frame(f, "round_trials", doc["round_trials"], ROUND_TRIAL_COLUMNS)
        if doc["savings"] is not None:
            rows = doc["savings"]
            if doc["schema_version"] == 1 and isinstance(rows, list):
                rows = [
                    {_V1_NAMES.get(k, k): v for k, v in r.items()} if isinstance(r, dict) else r
                    for r in rows
                ]
            savings = read_frame(f, "savings", rows, SAVING_COLUMNS, SAVING_OPTIONAL)
        host = {}
        for key, cols in (("host_trials", HOST_TRIAL_COLUMNS), ("host_fits", HOST_FIT_COLUMNS)):
            if doc.get(key) is not None:
                host[key] = read_frame(f, key, doc[key], cols)
        return cls(
            chain_trials=chain_trials,
            fits=fits,
            round_trials=round_trials,
            savings=savings,
            params=doc["params"],
            env=doc["env"],
            created=doc["created"],
            options=doc["options"],
            **host,
        )

    @classmethod
    def read_json(cls, path: str | Path) -> ReplayResult:
        """Read and check a replay file; ReplayDocumentError naming the file and field."""
        doc = load_document(path, "replay", ReplayDocumentError)  # another kind: refused
        return cls.from_dict(doc, where=str(path))


_TEXT_COLUMNS = {"kind", "variant", "a", "b", "removed_by_type", "shape"}
# Version 1 named the savings' removed nodes as deltas (same values, A - B).
_V1_NAMES = {"delta_nodes": "removed_nodes", "delta_by_type": "removed_by_type"}
_COUNT_COLUMNS = {"calls": 1, "nodes": 0, "trial": 0, "build": 0, "points": 0, "branches": 1}


def read_frame(
    f: Fields, name: str, rows: object, columns: list[str], optional: list[str] = ()
) -> pd.DataFrame:
    """A list of records with exactly `columns` (and any of `optional`), each value of its
    column's type, as a DataFrame with those columns (also when the list is empty)."""
    for i, r in enumerate(f.array(name, rows)):
        p = f"{name}[{i}]"
        f.keys(p, f.obj(p, r), tuple(columns), tuple(optional))
        for c, v in r.items():
            if c in _TEXT_COLUMNS:
                f.string(f"{p}.{c}", v)
            elif c in _COUNT_COLUMNS:
                f.integer(f"{p}.{c}", v, lo=_COUNT_COLUMNS[c])
            elif c == "removed_nodes":
                f.integer(f"{p}.{c}", v)
            else:
                if v is not None:  # null: not measured (NaN in the frame)
                    f.number(f"{p}.{c}", v)
        if "removed_by_type" in r:
            _check_removed_by_type(f, f"{p}.removed_by_type", r["removed_by_type"])
    present = list(columns) + [c for c in optional if any(c in r for r in rows)]
    df = pd.DataFrame(rows, columns=present)
    for c in present:  # measured numbers, null where not measured: float columns with NaN
        if c not in _TEXT_COLUMNS and c not in _COUNT_COLUMNS and c != "removed_nodes":
            df[c] = pd.to_numeric(df[c], errors="raise").astype(float)
    return df


def _check_removed_by_type(f: Fields, path: str, text: str) -> None:
    """A JSON object of node type -> nodes removed, as savings() writes it."""
    try:
        d = json.loads(text)
    except (ValueError, RecursionError):
        d = None
    if not isinstance(d, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in d.items()
    ):
        f.expected(path, 'a JSON object of node type -> int (e.g. {"kernel": 216})', text)
