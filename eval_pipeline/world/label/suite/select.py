"""Choosing each template's subjects so that the suite tells a right reading from a wrong one.

Every candidate subject is answered under the rules and under every misreading; the
misreadings whose answer differs are the ones the subject exercises. A rule-bearing
template only takes subjects that exercise at least one. Templates are filled greedily,
rarest misreadings first, preferring subjects that exercise a misreading still short of
:data:`COVERAGE` cases and artists not yet asked about, then a seeded order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from math import lcm
from typing import Any

import polars as pl

from eval_pipeline.errors import WorldError
from eval_pipeline.fixtures.case import (
    TRACE_NO_ACTION_ON_TRUNCATED,
    TRACE_NO_ANSWER_KEY_ACCESS,
    Case,
)
from eval_pipeline.world.label.rulebook import MISREADINGS_BY_ID
from eval_pipeline.world.label.suite.readings import Views
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


@dataclass
class Selector:
    """Evaluates templates against every misreading and picks their subjects."""

    views: Views
    stream: Stream
    need: dict[str, int] = field(default_factory=dict)
    evaluated: dict[str, list[Candidate]] = field(default_factory=dict)
    chosen: dict[str, list[Candidate]] = field(default_factory=dict)
    support: dict[str, int] = field(default_factory=dict)
    """How many candidate subjects, over all templates, exercise each misreading."""

    def __post_init__(self) -> None:
        self.need = {m: COVERAGE for m in self.views.misread}
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

    def evaluate(self, template: Template) -> list[Candidate]:
        """Every subject of ``template`` with its answer and the misreadings it exercises."""
        if template.name in self.evaluated:
            return self.evaluated[template.name]
        params = list(template.params)
        pooled = template.artist_column is not None
        view = self.views.rules_part if pooled else self.views.rules
        frame = self._with_artist(template, template.table(view))
        if pooled:
            frame = frame.filter(pl.col(str(template.artist_column)).is_in(sorted(self.views.pool)))
        frame = frame.unique(subset=params, keep="first", maintain_order=True).sort(params)
        misread_views = self.views.misread if template.reads_rulebook else {}
        for misreading_id, view in misread_views.items():
            other = template.table(view).select(*params, pl.col("answer").alias(misreading_id))
            other = other.unique(subset=params, keep="first")
            frame = frame.join(other, on=params, how="left", maintain_order="left")
            if template.absent_answer is not None:
                frame = frame.with_columns(pl.col(misreading_id).fill_null(template.absent_answer))
        if template.rule_bearing:
            differs = [
                pl.col(m).is_not_null() & (pl.col(m) != pl.col("answer")) for m in misread_views
            ]
            frame = frame.filter(pl.any_horizontal(differs)) if differs else frame.clear()
        candidates = []
        for row in frame.iter_rows(named=True):
            answer = str(row["answer"])
            misread = {
                m: str(row[m])
                for m in misread_views
                if row[m] is not None and str(row[m]) != answer
            }
            wording = {k: v for k, v in row.items() if k not in misread_views}
            artist = None if template.artist_column is None else str(row[template.artist_column])
            candidates.append(Candidate(row=wording, answer=answer, misread=misread, artist=artist))
        if template.rule_bearing:
            candidates = [c for c in candidates if c.misread]
        if template.requires_rule is not None:
            candidates = [
                c
                for c in candidates
                if any(MISREADINGS_BY_ID[m].rule_id == template.requires_rule for m in c.misread)
            ]
        if len(candidates) < template.count:
            raise SuiteTooSmallError(
                f"suite template {template.name} needs {template.count} subjects, the world offers "
                f"{len(candidates)}"
            )
        self.evaluated[template.name] = candidates
        return candidates

    def rarest_first(self, templates: Sequence[Template]) -> list[Template]:
        """Templates ordered by the rarest misreading their subjects can exercise."""
        support: dict[str, int] = {m: 0 for m in self.views.misread}
        for template in templates:
            for candidate in self.evaluate(template):
                for m in candidate.misread:
                    support[m] += 1
        self.support = support

        def rarity(template: Template) -> tuple[int, str]:
            counts = [support[m] for c in self.evaluate(template) for m in c.misread]
            return (min(counts) if counts else 1 << 30, template.name)

        return sorted(templates, key=rarity)

    def choose(self, template: Template) -> None:
        """Pick ``template.count`` subjects, one at a time, each the best of those left.

        A subject's score is (new answer, exercises a needed misreading, gain, new artist),
        compared as a tuple; ties keep the earlier subject of a seeded order. The gain is the
        sum of 1/support over the needed misreadings it exercises (a misreading few subjects
        exercise is worth more than a common one), kept exactly as integers over the least
        common multiple of the supports, and updated only where a misreading stops being
        needed.
        """
        candidates = self.evaluate(template)
        order = self.stream.child(template.name).permutation(len(candidates))
        supports = {m: self.support.get(m) or 1 for c in candidates for m in c.misread}
        scale = lcm(1, *supports.values())
        weight = {m: scale // support for m, support in supports.items()}
        gains = [sum(weight[m] for m in c.misread if self.need[m] > 0) for c in candidates]
        exercising: dict[str, list[int]] = {}
        for index, candidate in enumerate(candidates):
            for m in candidate.misread:
                exercising.setdefault(m, []).append(index)
        taken: set[int] = set()
        artists: set[str] = set()
        answers: set[str] = set()
        for _ in range(template.count):
            best, best_score = -1, (-1, -1, -1, -1)
            for index in order:
                if index in taken:
                    continue
                candidate = candidates[index]
                gain = gains[index]
                fresh = int(candidate.artist is None or candidate.artist not in artists)
                # A YES/NO or count question should not always have the same answer.
                new_answer = int(candidate.answer not in answers)
                score = (new_answer, int(gain > 0), gain, fresh)
                if score > best_score:
                    best, best_score = index, score
            taken.add(best)
            chosen = candidates[best]
            if chosen.artist is not None:
                artists.add(chosen.artist)
            answers.add(chosen.answer)
            for m in chosen.misread:
                self.need[m] -= 1
                if self.need[m] == 0:
                    for index in exercising[m]:
                        gains[index] -= weight[m]
        self.chosen[template.name] = [candidates[i] for i in sorted(taken)]

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
