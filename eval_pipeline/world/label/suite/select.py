"""Choosing each template's subjects so that the suite tells a right reading from a wrong one.

Every candidate subject is answered under the rules and under every misreading; the
misreadings whose answer differs are the ones the subject exercises. A rule-bearing
template only takes subjects that exercise at least one. Templates are filled greedily,
rarest misreadings first, preferring subjects that exercise a misreading still short of
:data:`COVERAGE` cases and artists not yet asked about, then a seeded order.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from math import lcm
from typing import Any, cast

import numpy as np
import polars as pl

from eval_pipeline.cases.case import (
    TRACE_NO_ACTION_ON_TRUNCATED,
    TRACE_NO_ANSWER_KEY_ACCESS,
    Case,
)
from eval_pipeline.errors import WorldError
from eval_pipeline.world.label.rulebook import MISREADINGS_BY_ID, RuleReading
from eval_pipeline.world.label.suite.answers import STACK, LabelData, UnstackableError
from eval_pipeline.world.label.suite.readings import (
    SIDE_BY_SIDE_MAX_LINES,
    Views,
    side_by_side_workers,
)
from eval_pipeline.world.label.suite.templates import Template
from eval_pipeline.world.rng import Stream

COVERAGE = 3


class SuiteTooSmallError(WorldError):
    """The world offers too few subjects for a template (usually: too small a scale)."""


ABSTAIN_NOTE = (
    "If the records cannot answer this, say so with a line ABSTAIN: <reason> instead of guessing."
)


@dataclass
class Candidate:
    row: dict[str, Any]
    answer: str
    misread: dict[str, str]
    artist: str | None


_MASK, _POSITION, _INDEX = "_mask", "_position", "_index"


@dataclass(frozen=True)
class Evaluated:
    """A template's candidate subjects, in parameter order: their wording columns (answer and
    artist included) and ``_mask``, a bit per misreading whose answer differs; ``misread``
    holds those answers (``_index``: the candidate's row, misreading, answer); ``artist``
    names the column holding a subject's artist, if any."""

    frame: pl.DataFrame
    misread: pl.DataFrame
    artist: str | None

    @classmethod
    def of(
        cls, candidates: Sequence[Candidate], bits: Mapping[str, int], artist: str | None
    ) -> Evaluated:
        """Candidates given one by one, each row holding its answer and artist column."""
        rows = [{**c.row, _MASK: sum(1 << bits[m] for m in c.misread)} for c in candidates]
        text = {name: pl.String for name in ("answer", artist) if name is not None}
        frame = pl.DataFrame(rows, schema_overrides={**text, _MASK: pl.Int64})
        misread = pl.DataFrame(
            [
                {_INDEX: i, "misreading": m, "misread_answer": a}
                for i, c in enumerate(candidates)
                for m, a in c.misread.items()
            ],
            schema=_MISREAD_SCHEMA,
        )
        return cls(frame=frame, misread=misread, artist=artist)

    def candidates(self, indices: Sequence[int]) -> list[Candidate]:
        """The candidates in rows ``indices``, in that order (two frame operations for all
        of them: one each costs more than the rest of a pick on this machine)."""
        rows = self.frame.drop(_MASK)[list(indices)].to_dicts()
        misread: dict[int, dict[str, str]] = {index: {} for index in indices}
        for index, misreading, answer in (
            self.misread.filter(pl.col(_INDEX).is_in(list(indices)))
            .select(_INDEX, "misreading", "misread_answer")
            .iter_rows()
        ):
            misread[index][misreading] = answer
        return [
            Candidate(
                row=row,
                answer=str(row["answer"]),
                misread=misread[index],
                artist=None
                if self.artist is None or row[self.artist] is None
                else str(row[self.artist]),
            )
            for index, row in zip(indices, rows, strict=True)
        ]


_MISREAD_SCHEMA = {_INDEX: pl.Int64, "misreading": pl.String, "misread_answer": pl.String}
_ORDER_SCHEMA = {"misreading": pl.String, "_order": pl.Int64}

STACKED_ROWS = 300_000
"""The most rows of misread answers compared to the rules' in one join, unless one
misreading alone has more (1x: every misreading of a template at once, 250,000 rows at most;
10x: the biggest templates, of 225,000 to 820,000 candidates, one misreading at a time as
before: batches of a million rows raised the 10x peak by 50 MB)."""


def _differing_answers(
    template: Template, rules: pl.DataFrame, theirs: pl.DataFrame, order: pl.DataFrame
) -> pl.DataFrame:
    """The rules' candidates (``rules``: ``_index``, parameters, answer) whose answer under a
    misreading of ``theirs`` (parameters, misreading, ``_theirs``) differs, with the
    misreading's place (``order``: the misreadings of ``theirs``, ``_order``). A candidate
    that a misreading's table leaves out answers ``template.absent_answer`` under it, or
    nothing when that is None; of two rows for one candidate, the first counts."""
    params = list(template.params)
    if order.height == 1:
        # One misreading: its table joined to the candidates, who are in order already
        # (a template of 820,000 candidates at 10x; crossing them with it copies them).
        misreading, place = order.row(0)
        compared = rules.join(
            theirs.drop("misreading"), on=params, how="left", maintain_order="left"
        )
        if compared.height != rules.height:
            # A candidate (one row of `rules`) its table lists twice: the first row counts.
            # Rarely so; dropping the others first costs as much as the join (at 10x).
            first = theirs.unique(subset=params, keep="first").drop("misreading")
            compared = rules.join(first, on=params, how="left", maintain_order="left")
        if template.absent_answer is not None:
            compared = compared.with_columns(pl.col("_theirs").fill_null(template.absent_answer))
        return compared.filter(pl.col("_theirs") != pl.col("answer")).select(
            pl.col(_INDEX).cast(pl.Int64),
            misreading=pl.lit(misreading, dtype=pl.String),
            misread_answer=pl.col("_theirs"),
            _order=pl.lit(place, dtype=pl.Int64),
        )
    theirs = theirs.unique(subset=["misreading", *params], keep="first")
    if template.absent_answer is None:
        # Left out means no answer, which never differs: only the rows both tables have.
        compared = rules.join(theirs, on=params, how="inner")
    else:
        compared = (
            rules.join(order.select("misreading"), how="cross")
            .join(theirs, on=["misreading", *params], how="left")
            .with_columns(pl.col("_theirs").fill_null(template.absent_answer))
        )
    return (
        compared.filter(pl.col("_theirs") != pl.col("answer"))
        .join(order, on="misreading")
        .select(
            pl.col(_INDEX).cast(pl.Int64),
            "misreading",
            misread_answer=pl.col("_theirs"),
            _order="_order",
        )
    )


class _ReadingSeen:
    """A reading that notes which of its fields were read."""

    def __init__(self, reading: RuleReading, seen: set[str]) -> None:
        self._reading = reading
        self._seen = seen

    def __getattr__(self, name: str) -> Any:
        self._seen.add(name)
        return getattr(self._reading, name)


class _Inputs:
    """A view that notes what an answer table reads of it: tables, reading fields, and
    the world or truth mappings themselves."""

    def __init__(self, data: LabelData) -> None:
        self._data = data
        self.tables: set[str] = set()
        self.fields: set[str] = set()
        self.mappings: set[str] = set()

    @property
    def world(self) -> Mapping[str, pl.DataFrame]:
        self.mappings.add("world")
        return self._data.world

    @property
    def truth(self) -> Mapping[str, pl.DataFrame]:
        self.mappings.add("truth")
        return self._data.truth

    @property
    def reading(self) -> RuleReading:
        return cast(RuleReading, _ReadingSeen(self._data.reading, self.fields))

    def table(self, name: str) -> pl.DataFrame:
        self.tables.add(name)
        return self._data.table(name)

    @property
    def view(self) -> LabelData:
        """The view read (without noting it)."""
        return self._data

    def same_in(self, other: LabelData) -> bool:
        """Whether ``other`` gives an answer table the same inputs (the same frames, equal
        reading fields): then it gives the same answers."""
        data = self._data
        return (
            all(getattr(other, m) is getattr(data, m) for m in self.mappings)
            and all(other.table(name) is data.table(name) for name in self.tables)
            and all(getattr(other.reading, f) == getattr(data.reading, f) for f in self.fields)
        )


class _CommonReading:
    """The reading of several views, for a field they all read alike; a field they read
    differently means they cannot be answered at once."""

    def __init__(self, readings: Sequence[RuleReading]) -> None:
        self._readings = readings

    def __getattr__(self, name: str) -> Any:
        first, *others = (getattr(reading, name) for reading in self._readings)
        if any(other != first for other in others):
            raise UnstackableError(f"the misreadings read {name} differently")
        return first


class _StackedTables(Mapping[str, pl.DataFrame]):
    """The truth tables of several misreadings' views: a table they share as it is, one
    they differ in stacked (each row with its misreading in :data:`STACK`), on first use."""

    def __init__(self, views: Sequence[tuple[str, LabelData]]) -> None:
        self._views = views
        self._stacked: dict[str, pl.DataFrame] = {}

    def __getitem__(self, name: str) -> pl.DataFrame:
        if name not in self._stacked:
            tables = [view.truth[name] for _, view in self._views]
            if all(table is tables[0] for table in tables):
                self._stacked[name] = tables[0]
            else:
                # The columns all of them hold (a misreading's own registry keeps only what
                # the answer tables read of one, see `readings.py`).
                common = [c for c in tables[0].columns if all(c in t.columns for t in tables)]
                self._stacked[name] = pl.concat(
                    table.select(*common, pl.lit(misreading, dtype=pl.String).alias(STACK))
                    for (misreading, _), table in zip(self._views, tables, strict=True)
                )
        return self._stacked[name]

    def __contains__(self, name: object) -> bool:
        return name in self._views[0][1].truth

    def __iter__(self) -> Iterator[str]:
        return iter(self._views[0][1].truth)

    def __len__(self) -> int:
        return len(self._views[0][1].truth)


def _stacked_view(views: Sequence[tuple[str, LabelData]]) -> LabelData:
    """One view answering for all of ``views`` (misreading id, view), which share the world."""
    return LabelData(
        world=views[0][1].world,
        truth=_StackedTables(views),
        reading=cast(RuleReading, _CommonReading([view.reading for _, view in views])),
        stacked=tuple(misreading for misreading, _ in views),
    )


@dataclass
class Selector:
    """Evaluates templates against every misreading and picks their subjects."""

    views: Views
    stream: Stream
    need: dict[str, int] = field(default_factory=dict)
    evaluated: dict[str, Evaluated] = field(default_factory=dict)
    pickable: dict[tuple[str, int], pl.DataFrame] = field(default_factory=dict)
    """By template name and count: see :meth:`_pickable`."""
    chosen: dict[str, list[Candidate]] = field(default_factory=dict)
    support: dict[str, int] = field(default_factory=dict)
    """How many candidate subjects, over all templates, exercise each misreading."""
    bits: dict[str, int] = field(default_factory=dict)
    """Each misreading's bit in a candidate's mask."""

    def __post_init__(self) -> None:
        self.need = {m: COVERAGE for m in self.views.misread}
        self.bits = {m: bit for bit, m in enumerate(self.views.misread)}
        if len(self.bits) > 62:
            raise WorldError(f"the suite tells apart at most 62 misreadings, not {len(self.bits)}")
        self._artist_of_contract = dict(
            self.views.rules.table("contracts").select("contract_id", "artist_id").iter_rows()
        )

    def _with_artist(self, template: Template, frame: pl.DataFrame) -> pl.DataFrame:
        column = template.artist_column
        if column is None or column in frame.columns:
            return frame
        return frame.with_columns(
            pl.col("contract_id")
            .replace_strict(self._artist_of_contract, return_dtype=pl.String)
            .alias(column)
        )

    def evaluate(self, template: Template) -> Evaluated:
        """Every subject of ``template`` with its answer and the misreadings it exercises."""
        if template.name in self.evaluated:
            return self.evaluated[template.name]
        params = list(template.params)
        pooled = template.artist_column is not None
        view = self.views.rules_part if pooled else self.views.rules
        inputs = _Inputs(view)
        frame = self._with_artist(template, template.table(cast(LabelData, inputs)))
        if frame.schema.get("answer") != pl.String:
            raise WorldError(f"suite template {template.name} answers in {frame.schema}, not text")
        if pooled:
            frame = frame.filter(pl.col(str(template.artist_column)).is_in(sorted(self.views.pool)))
        frame = frame.unique(subset=params, keep="first", maintain_order=True).sort(params)
        misread_views = self.views.misread if template.reads_rulebook else {}
        misread = self._misread_answers(template, inputs, frame, misread_views)
        # A candidate's mask: a bit per misreading whose answer differs.
        bit_of = {m: 1 << bit for m, bit in self.bits.items()}
        masks = misread.group_by(_INDEX).agg(
            pl.col("misreading").replace_strict(bit_of, return_dtype=pl.Int64).sum()
        )
        # A rule-bearing template keeps the candidates some misreading answers otherwise; one
        # that requires a rule, those a misreading of that rule answers otherwise.
        keep: pl.Series | None = None
        if template.rule_bearing:
            keep = misread.get_column(_INDEX)
        if template.requires_rule is not None:
            ruled = [
                m for m in misread_views if MISREADINGS_BY_ID[m].rule_id == template.requires_rule
            ]
            keep = misread.filter(pl.col("misreading").is_in(ruled)).get_column(_INDEX)
        frame = frame.with_row_index(_INDEX).with_columns(pl.col(_INDEX).cast(pl.Int64))
        if keep is not None:
            frame = frame.filter(pl.col(_INDEX).is_in(keep.implode()))
        if frame.height < template.count:
            raise SuiteTooSmallError(
                f"suite template {template.name} needs {template.count} subjects, the world offers "
                f"{frame.height}"
            )
        # Renumber the candidates left, in order, and their misread answers with them.
        renumber = frame.select(pl.col(_INDEX).alias("_was"), pl.int_range(pl.len()).alias("_now"))
        frame = (
            frame.join(masks, on=_INDEX, how="left", maintain_order="left")
            .with_columns(pl.col("misreading").fill_null(0).alias(_MASK))
            .drop(_INDEX, "misreading")
        )
        misread = misread.join(
            renumber, left_on=_INDEX, right_on="_was", maintain_order="left"
        ).select(pl.col("_now").cast(pl.Int64).alias(_INDEX), "misreading", "misread_answer")
        evaluated = Evaluated(frame=frame, misread=misread, artist=template.artist_column)
        self.evaluated[template.name] = evaluated
        return evaluated

    def _misread_answers(
        self,
        template: Template,
        inputs: _Inputs,
        frame: pl.DataFrame,
        misread_views: Mapping[str, LabelData],
    ) -> pl.DataFrame:
        """Each candidate's answer under each misreading, where it differs from the rules'
        (``_index``: the candidate's row in ``frame``, misreading, answer), by misreading
        then row. In a small world a polars operation costs the same whatever its size
        (80-200 us here), so a stackable template answers most misreadings at once
        (:meth:`_answer_groups`), and the answers are compared to the rules' up to
        :data:`STACKED_ROWS` rows at a time; at 10x the biggest templates still go one
        misreading at a time, as the memory allows."""
        params = list(template.params)
        rules = frame.select(*params, "answer").with_row_index(_INDEX)
        places = {misreading: place for place, misreading in enumerate(misread_views)}
        found: list[pl.DataFrame] = [pl.DataFrame(schema={**_MISREAD_SCHEMA, "_order": pl.Int64})]
        batch: list[tuple[list[str], pl.DataFrame]] = []
        batch_rows = 0

        def compare() -> None:
            ids = [misreading for misreadings, _ in batch for misreading in misreadings]
            order = pl.DataFrame(
                {"misreading": ids, "_order": [places[m] for m in ids]}, schema=_ORDER_SCHEMA
            )
            theirs = pl.concat([table for _, table in batch])
            found.append(_differing_answers(template, rules, theirs, order))

        for group in self._answer_groups(template, inputs, misread_views, rules.height):
            for misreadings, theirs in self._answered(template, group):
                rows = max(theirs.height, rules.height * len(misreadings))
                if batch and batch_rows + rows > STACKED_ROWS:
                    compare()
                    batch, batch_rows = [], 0
                batch.append((misreadings, theirs))
                batch_rows += rows
        if batch:
            compare()
        return pl.concat(found).sort("_order", _INDEX).drop("_order")

    @staticmethod
    def _answer_groups(
        template: Template,
        inputs: _Inputs,
        misread_views: Mapping[str, LabelData],
        answers: int,
    ) -> list[list[tuple[str, LabelData]]]:
        """The misreadings whose answers may differ from the rules' (``inputs``: what the
        table read of the rules' view), in the groups a stackable template answers at once:
        those differing from the rules in the same tables read and alike in the reading
        fields read, up to :data:`STACKED_ROWS` rows of the tables they differ in or of
        answers (about ``answers`` each, as many as the rules give: at 10x, 225,000 lines
        of `line_royalty` each, so one at a time)."""
        pending = [(m, view) for m, view in misread_views.items() if not inputs.same_in(view)]
        if not template.stackable or "truth" in inputs.mappings:
            return [[one] for one in pending]
        rules = inputs.view
        kinds: dict[tuple[tuple[str, ...], tuple[Any, ...]], list[tuple[str, LabelData]]] = {}
        for misreading, view in pending:
            differing = tuple(
                name for name in sorted(inputs.tables) if view.table(name) is not rules.table(name)
            )
            fields = tuple(getattr(view.reading, name) for name in sorted(inputs.fields))
            kinds.setdefault((differing, fields), []).append((misreading, view))
        groups: list[list[tuple[str, LabelData]]] = []
        for (differing, _), members in kinds.items():
            group: list[tuple[str, LabelData]] = []
            rows = 0
            for misreading, view in members:
                height = max(answers, sum(view.table(name).height for name in differing))
                if group and rows + height > STACKED_ROWS:
                    groups.append(group)
                    group, rows = [], 0
                group.append((misreading, view))
                rows += height
            groups.append(group)
        return groups

    @staticmethod
    def _answered(
        template: Template, group: Sequence[tuple[str, LabelData]]
    ) -> list[tuple[list[str], pl.DataFrame]]:
        """``group``'s answers (parameters, misreading, ``_theirs``): stacked in one table
        when the template can, else one table per misreading."""
        params = list(template.params)
        if len(group) > 1:
            stacked = _stacked_view(group)
            try:
                table = template.table(stacked)
            except UnstackableError:
                pass  # Answered one by one below: the same answers, table by table.
            else:
                if STACK not in table.columns:
                    # Nothing the table read differs between them: the same answers for each.
                    table = stacked.each_misreading(table)
                theirs = table.select(
                    *params,
                    pl.col(STACK).cast(pl.String).alias("misreading"),
                    _theirs=pl.col("answer").cast(pl.String),
                )
                return [(list(stacked.stacked), theirs)]
        return [
            (
                [misreading],
                template.table(view).select(
                    *params,
                    misreading=pl.lit(misreading, dtype=pl.String),
                    _theirs=pl.col("answer").cast(pl.String),
                ),
            )
            for misreading, view in group
        ]

    def _exercised(self, evaluated: Evaluated) -> dict[str, int]:
        """How many of the candidates exercise each misreading."""
        counts = evaluated.frame.select(
            [((pl.col(_MASK) & (1 << bit)) != 0).sum().alias(m) for m, bit in self.bits.items()]
        ).row(0, named=True)
        return {m: int(n) for m, n in counts.items()}

    def _evaluate_for_picking(self, template: Template) -> Evaluated:
        self._pickable(template)
        return self.evaluate(template)

    def rarest_first(self, templates: Sequence[Template]) -> list[Template]:
        """Templates ordered by the rarest misreading their subjects can exercise."""
        # Polars releases the GIL: templates are evaluated side by side on the machine's
        # cores (each is a pure function of the views; the first error in template order
        # is the one raised, as when run one by one). Not at scale: there two templates'
        # candidates at once are the suite's memory peak (at 10x, 100 MB more), and the few
        # big templates take most of the time either way.
        lines = self.views.rules.world["statement_lines"].height
        workers = side_by_side_workers(lines) if lines < SIDE_BY_SIDE_MAX_LINES else 1
        with ThreadPoolExecutor(max_workers=workers) as executor:
            evaluated = list(executor.map(self._evaluate_for_picking, templates))
        exercised = {t.name: self._exercised(e) for t, e in zip(templates, evaluated, strict=True)}
        support: dict[str, int] = {m: 0 for m in self.views.misread}
        for counts in exercised.values():
            for m, n in counts.items():
                support[m] += n
        self.support = support

        def rarity(template: Template) -> tuple[int, str]:
            counts = [support[m] for m, n in exercised[template.name].items() if n]
            return (min(counts) if counts else 1 << 30, template.name)

        return sorted(templates, key=rarity)

    def _pickable(self, template: Template) -> pl.DataFrame:
        """The candidates :meth:`choose` may pick, in the seeded order (``_index``, ``_mask``,
        and answer and artist as numbers): computed with the template's evaluation, side
        by side, as it does not depend on what was picked before."""
        key = (template.name, template.count)
        if key in self.pickable:
            return self.pickable[key]
        evaluated = self.evaluate(template)
        artist = evaluated.artist
        who = pl.col(artist) if artist is not None else pl.lit(None, pl.String)
        candidates = evaluated.frame.select(
            pl.int_range(pl.len(), dtype=pl.Int64).alias(_INDEX), _MASK, "answer", who.alias("_who")
        )
        left = (
            # The seeded order: each candidate's 64-bit value at its row.
            self.stream.child(template.name)
            .add_u64(candidates, _INDEX, "_u")
            .sort(["_u", _INDEX])
            # Subjects alike in answer, misreadings and artist score alike at every pick, so
            # the earlier in the seeded order is always taken first: no more than
            # ``count`` of each kind can be taken (at 10x this leaves 36 of the 493,000
            # candidates of `line_should_be_flagged`; a gain no longer present shifts
            # ranks, not their order).
            .filter(pl.int_range(pl.len()).over(_MASK, "answer", "_who") < template.count)
            # Answers and artists as numbers (0: no artist, which is always new).
            .select(
                _INDEX,
                _MASK,
                pl.col("answer").rank("dense").cast(pl.Int64).alias("_answer"),
                pl.col("_who").rank("dense").cast(pl.Int64).fill_null(0).alias("_who"),
            )
        )
        self.pickable[key] = left
        return left

    def choose(self, template: Template) -> None:
        """Pick ``template.count`` subjects, one at a time, each the best of those left.

        A subject's score is (new answer, exercises a needed misreading, gain, new artist),
        compared as a tuple; ties keep the earlier subject of a seeded order. The gain is the
        sum of 1/support over the needed misreadings it exercises (a misreading few subjects
        exercise is worth more than a common one): subjects that exercise the same needed
        misreadings gain the same, so the gains are computed exactly per set (as integers
        over the least common multiple of the supports) and compared by rank.

        Each pick depends on the last, so the picks run one after another, each a few numpy
        operations over the candidates left once those that can never be picked are dropped
        (:meth:`_pickable`): per pick, a frame operation costs more than that, and a Python
        pass over the 10,000 candidates a line template keeps at 1x cost 0.05 s a template.
        """
        evaluated = self.evaluate(template)
        left = self._pickable(template)
        indices = left.get_column(_INDEX).to_numpy()
        masks = left.get_column(_MASK).to_numpy()
        answer_codes = left.get_column("_answer").to_numpy()
        artist_codes = left.get_column("_who").to_numpy()
        answer_taken = np.zeros(int(answer_codes.max(initial=0)) + 1, dtype=bool)
        artist_taken = np.zeros(int(artist_codes.max(initial=0)) + 1, dtype=bool)
        alive = np.ones(len(indices), dtype=bool)
        supports = {m: self.support.get(m) or 1 for m in self.bits}
        scale = lcm(1, *supports.values())
        taken: list[int] = []
        for _ in range(template.count):
            if not alive.any():
                raise WorldError(f"suite template {template.name} ran out of subjects")
            needed = sum(1 << self.bits[m] for m, n_left in self.need.items() if n_left > 0)
            sets_needed = masks & needed
            # The gain of each set of needed misreadings, exactly, ranked: only its order
            # counts (a score compares answer, misreading, gain and artist in turn).
            sets, set_of_row = np.unique(sets_needed, return_inverse=True)
            gains = [
                sum(scale // supports[m] for m, b in self.bits.items() if v >> b & 1)
                for v in sets.tolist()
            ]
            rank_of = {g: i for i, g in enumerate(sorted(set(gains)))}
            rank = np.array([rank_of[g] for g in gains], dtype=np.int64)[set_of_row]
            width = len(rank_of) + 1
            score = (
                ((~answer_taken[answer_codes]) * 2 + (sets_needed != 0)) * width + rank
            ) * 2 + ~artist_taken[artist_codes]
            # The best score; of equals, the first in the seeded order.
            best = int(np.argmax(np.where(alive, score, -1)))
            alive[best] = False
            taken.append(int(indices[best]))
            answer_taken[answer_codes[best]] = True
            if artist_codes[best]:  # no artist (0) is never taken: it stays new
                artist_taken[artist_codes[best]] = True
            chosen_mask = int(masks[best])
            for m, bit in self.bits.items():
                if chosen_mask >> bit & 1:
                    self.need[m] -= 1
        self.chosen[template.name] = evaluated.candidates(sorted(taken))

    def shortfall(self) -> dict[str, int]:
        """Misreadings exercised by fewer than :data:`COVERAGE` chosen cases."""
        return {m: COVERAGE - left for m, left in self.need.items() if left > 0}

    def cases(self, templates: Sequence[Template]) -> list[Case]:
        """The chosen subjects as cases, in suite order, numbered per category."""
        cases: list[Case] = []
        numbers: dict[str, int] = {}
        for template in templates:
            for candidate in self.chosen[template.name]:
                numbers[template.category] = numbers.get(template.category, 0) + 1
                row = candidate.row
                payload = template.payload(row, self.views.rules) if template.payload else None
                resolver = getattr(template.table, "__name__", "<lambda>")
                cases.append(
                    Case(
                        case_id=f"{template.category}-{numbers[template.category]:03d}",
                        category=template.category,
                        prompt=f"{template.question(row)}\n{ABSTAIN_NOTE}\n{template.answer_line(row)}",
                        answer_kind=template.answer_kind,
                        expected=candidate.answer,
                        tolerance="0",
                        tiers=template.tiers,
                        trace_checks=(
                            *template.trace_checks,
                            TRACE_NO_ANSWER_KEY_ACCESS,
                            TRACE_NO_ACTION_ON_TRUNCATED,
                        ),
                        expected_first_call=template.first_call(row),
                        core=False,
                        template=template.name,
                        resolver=template.name if resolver == "<lambda>" else resolver,
                        params={p: str(row[p]) for p in template.params},
                        expected_payload=payload,
                        rules=tuple(
                            sorted({MISREADINGS_BY_ID[m].rule_id for m in candidate.misread})
                        ),
                        misreadings=dict(sorted(candidate.misread.items())),
                    )
                )
        return cases
