"""The five artist-months worked by hand in docs/royalty-rules.md, pinned against the engine.

Every number below is printed in the document. The test recomputes them two ways: with the
answer key (the vectorized engine over the whole world) and line by line with the scalar
face of the engine on the raw statement lines, in plain Python integers.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import polars as pl
import pytest

from eval_pipeline.world.base import AnswerKey, GeneratedWorld
from eval_pipeline.world.label import engine
from eval_pipeline.world.label.statements import PERIODS

# groups: (contract, distributor, channel, currency, lines, units, amount_minor,
#          gross_usd_micro, rate_ppm, royalty_micro)
# accounts: (account, balance_before, charges, earnings, recouped, balance_after), micro-USD
# examples: (line_id, gross_usd_micro, royalty_micro)
CASES: dict[str, dict[str, Any]] = {
    "plain": {
        "artist_id": "ART-0052",
        "period": "2025-12",
        "groups": [
            ("CON-0106", "DST-01", "streaming", "USD", 32, 20406, 6868, 68680000, 205000, 14079400),
            ("CON-0106", "DST-02", "streaming", "EUR", 16, 8249, 2442, 24209988, 205000, 4963048),
            ("CON-0106", "DST-03", "download", "GBP", 2, 2, 103, 1273801, 160000, 203808),
            ("CON-0106", "DST-03", "streaming", "GBP", 4, 2816, 834, 10314078, 205000, 2114386),
            ("CON-0106", "DST-04", "download", "USD", 4, 33, 2293, 22930000, 160000, 3668800),
            ("CON-0106", "DST-05", "streaming", "JPY", 4, 2530, 1286, 8626488, 205000, 1768431),
        ],
        "accounts": [
            ("ACC-0098", 0, 0, 26797873, 0, 0),
        ],
        "examples": [(209175, 5160000, 1057800), (338309, 1437530, 294694)],
        "gross_micro": 26797873,
        "recouped_micro": 0,
        "net_payable_cents": 2680,
        "balance_after_micro": 0,
    },
    "cross": {
        "artist_id": "ART-0110",
        "period": "2025-10",
        "groups": [
            (
                "CON-0220",
                "DST-01",
                "streaming",
                "USD",
                37,
                198590,
                64343,
                643430000,
                227500,
                146380325,
            ),
            (
                "CON-0220",
                "DST-02",
                "streaming",
                "EUR",
                20,
                88517,
                29580,
                300325740,
                227500,
                68324106,
            ),
            ("CON-0220", "DST-03", "download", "GBP", 3, 109, 4944, 61300656, 192500, 11800377),
            ("CON-0220", "DST-03", "streaming", "GBP", 5, 25047, 7923, 98237277, 227500, 22348980),
            ("CON-0220", "DST-04", "download", "USD", 8, 275, 15865, 158650000, 192500, 30540125),
            ("CON-0220", "DST-05", "streaming", "JPY", 5, 27696, 14139, 92864952, 227500, 21126777),
            (
                "CON-0221",
                "DST-01",
                "streaming",
                "USD",
                37,
                247021,
                75447,
                754470000,
                202500,
                152780175,
            ),
            (
                "CON-0221",
                "DST-02",
                "streaming",
                "EUR",
                20,
                98145,
                34825,
                353578225,
                202500,
                71599591,
            ),
            ("CON-0221", "DST-03", "download", "GBP", 3, 103, 5673, 70339527, 172500, 12133569),
            ("CON-0221", "DST-03", "streaming", "GBP", 4, 27910, 8735, 108305265, 202500, 21931816),
            ("CON-0221", "DST-04", "download", "USD", 7, 396, 24326, 243260000, 172500, 41962350),
            ("CON-0221", "DST-05", "streaming", "JPY", 5, 29799, 8003, 52563704, 202500, 10644150),
        ],
        "accounts": [
            ("ACC-0209", 971145253, 0, 611572341, 611572341, 359572912),
        ],
        "examples": [(171229, 3900000, 887250), (318114, 23402665, 5324106)],
        "gross_micro": 611572341,
        "recouped_micro": 611572341,
        "net_payable_cents": 0,
        "balance_after_micro": 359572912,
    },
    "escalator": {
        "artist_id": "ART-0108",
        "period": "2025-12",
        "groups": [
            ("CON-0217", "DST-01", "streaming", "USD", 43, 9442, 2976, 29760000, 217500, 6472800),
            ("CON-0217", "DST-02", "streaming", "EUR", 22, 4079, 1544, 15307216, 217500, 3329319),
            ("CON-0217", "DST-03", "download", "GBP", 1, 1, 44, 544148, 167500, 91145),
            ("CON-0217", "DST-03", "streaming", "GBP", 9, 1278, 436, 5392012, 217500, 1172762),
            ("CON-0217", "DST-04", "download", "USD", 5, 5, 320, 3200000, 167500, 536000),
            ("CON-0217", "DST-04", "physical", "USD", 4, 4, 2714, 27140000, 147500, 4003150),
            ("CON-0217", "DST-05", "streaming", "JPY", 6, 1207, 624, 4185792, 217500, 910409),
        ],
        "accounts": [
            ("ACC-0206", 0, 0, 16515585, 0, 0),
        ],
        "examples": [(209048, 50000, 10875), (338494, 287506, 62533)],
        "gross_micro": 16515585,
        "recouped_micro": 0,
        "net_payable_cents": 1652,
        "balance_after_micro": 0,
    },
    "currency": {
        "artist_id": "ART-0022",
        "period": "2025-12",
        "groups": [
            (
                "CON-0045",
                "DST-01",
                "streaming",
                "USD",
                29,
                1680540,
                637332,
                6373320000,
                247500,
                1577396700,
            ),
            (
                "CON-0045",
                "DST-02",
                "streaming",
                "EUR",
                15,
                807075,
                261850,
                2595980900,
                247500,
                642505272,
            ),
            ("CON-0045", "DST-03", "download", "GBP", 1, 370, 17133, 211883811, 187500, 39728215),
            (
                "CON-0045",
                "DST-03",
                "streaming",
                "GBP",
                5,
                258705,
                93390,
                1154954130,
                247500,
                285851148,
            ),
            (
                "CON-0045",
                "DST-04",
                "download",
                "USD",
                5,
                2556,
                162582,
                1625820000,
                187500,
                304841250,
            ),
            ("CON-0045", "DST-05", "download", "JPY", 1, 327, 44864, 300947712, 187500, 56427696),
            (
                "CON-0045",
                "DST-05",
                "streaming",
                "JPY",
                3,
                203551,
                95411,
                640016988,
                247500,
                158404205,
            ),
        ],
        "accounts": [
            ("ACC-0041", 0, 0, 3065154486, 0, 0),
        ],
        "examples": [
            (338611, 339861834, 84115804),
            (465676, 237543696, 58792065),
            (465753, 300947712, 56427696),
            (466108, 271633752, 67229354),
        ],
        "gross_micro": 3065154486,
        "recouped_micro": 0,
        "net_payable_cents": 306515,
        "balance_after_micro": 0,
    },
    "partial": {
        "artist_id": "ART-0144",
        "period": "2025-10",
        "groups": [
            (
                "CON-0289",
                "DST-01",
                "streaming",
                "USD",
                45,
                134928,
                51176,
                511760000,
                215000,
                110028400,
            ),
            (
                "CON-0289",
                "DST-02",
                "streaming",
                "EUR",
                25,
                50378,
                14866,
                150934498,
                215000,
                32450916,
            ),
            ("CON-0289", "DST-03", "download", "GBP", 3, 30, 1449, 17966151, 162500, 2919499),
            ("CON-0289", "DST-03", "streaming", "GBP", 7, 21633, 7310, 90636690, 215000, 19486889),
            ("CON-0289", "DST-04", "download", "USD", 3, 130, 7413, 74130000, 162500, 12046125),
            ("CON-0289", "DST-04", "physical", "USD", 2, 2, 1375, 13750000, 127500, 1753125),
            ("CON-0289", "DST-05", "download", "JPY", 1, 7, 1028, 6751904, 162500, 1097184),
            ("CON-0289", "DST-05", "streaming", "JPY", 5, 13825, 6284, 41273312, 215000, 8873762),
        ],
        "accounts": [
            ("ACC-0273", 124274749, 0, 188655900, 124274749, 0),
        ],
        "examples": [(171121, 4740000, 1019100), (318662, 7492914, 1610977)],
        "gross_micro": 188655900,
        "recouped_micro": 124274749,
        "net_payable_cents": 6438,
        "balance_after_micro": 0,
    },
}


@pytest.fixture(scope="module")
def scalar_lines(
    label_world: GeneratedWorld, label_key: AnswerKey
) -> dict[str, list[dict[str, Any]]]:
    """Each case's clean lines, computed one by one with the engine's scalar face."""
    tables = label_world.tables
    flagged = set(label_key.tables["anomalies"].filter(pl.col("flaggable"))["line_id"])
    deals = engine.deals_in_force(tables["tracks"], tables["releases"], tables["contracts"])
    deal_of = {row["isrc"]: row for row in deals.iter_rows(named=True)}
    terms = engine.resolve_terms(tables["contracts"], tables["contract_rates"], PERIODS)
    fx = {
        (row["period"], row["currency"]): row["usd_per_unit_micro"]
        for row in tables["fx_rates"].iter_rows(named=True)
    }
    result: dict[str, list[dict[str, Any]]] = {}
    for name, case in CASES.items():
        artist_isrcs = [
            isrc for isrc, deal in deal_of.items() if deal["artist_id"] == case["artist_id"]
        ]
        rows = [
            row
            for row in tables["statement_lines"]
            .filter((pl.col("period") == case["period"]) & pl.col("isrc").is_in(artist_isrcs))
            .iter_rows(named=True)
            if row["line_id"] not in flagged
        ]
        units: dict[tuple[str, str], int] = defaultdict(int)
        for row in rows:
            units[(deal_of[row["isrc"]]["contract_id"], row["channel"])] += row["units"]
        computed = []
        for row in rows:
            contract = deal_of[row["isrc"]]["contract_id"]
            term = terms.filter(
                (pl.col("contract_id") == contract)
                & (pl.col("channel") == row["channel"])
                & (pl.col("period") == case["period"])
            ).row(0, named=True)
            line = engine.line_royalty_micro(
                row["amount_minor"],
                row["currency"],
                fx[(case["period"], row["currency"])],
                term["rate_ppm"],
                units_in_period=units[(contract, row["channel"])],
                escalator_units=term["escalator_units"],
                escalated_rate_ppm=term["escalated_rate_ppm"],
            )
            computed.append({**row, "contract_id": contract, "line": line})
        result[name] = computed
    return result


@pytest.mark.parametrize("name", list(CASES))
def test_grouped_lines_match_the_document(
    name: str, scalar_lines: dict[str, list[dict[str, Any]]]
) -> None:
    groups: dict[tuple[str, str, str, str], list[int]] = {}
    for row in scalar_lines[name]:
        key = (row["contract_id"], row["distributor_id"], row["channel"], row["currency"])
        acc = groups.setdefault(key, [0, 0, 0, 0, row["line"].rate_ppm, 0])
        acc[0] += 1
        acc[1] += row["units"]
        acc[2] += row["amount_minor"]
        acc[3] += row["line"].gross_usd_micro
        assert acc[4] == row["line"].rate_ppm
        acc[5] += row["line"].royalty_micro
    actual = sorted((*key, *values) for key, values in groups.items())
    assert actual == sorted(CASES[name]["groups"])


@pytest.mark.parametrize("name", list(CASES))
def test_worked_lines_match_the_document(
    name: str, scalar_lines: dict[str, list[dict[str, Any]]]
) -> None:
    by_id = {row["line_id"]: row["line"] for row in scalar_lines[name]}
    for line_id, gross, royalty in CASES[name]["examples"]:
        assert (by_id[line_id].gross_usd_micro, by_id[line_id].royalty_micro) == (gross, royalty)


@pytest.mark.parametrize("name", list(CASES))
def test_ledger_matches_the_document(
    name: str, label_key: AnswerKey, scalar_lines: dict[str, list[dict[str, Any]]]
) -> None:
    case = CASES[name]
    accounts = (
        label_key.tables["account_ledger"]
        .filter((pl.col("artist_id") == case["artist_id"]) & (pl.col("period") == case["period"]))
        .sort("account_id")
    )
    assert [
        (
            r["account_id"],
            r["balance_before_micro"],
            r["charges_micro"],
            r["earnings_micro"],
            r["recouped_micro"],
            r["balance_after_micro"],
        )
        for r in accounts.iter_rows(named=True)
    ] == case["accounts"]
    # The scalar path: earnings from the lines, recoupment from the documented balances.
    earned = sum(row["line"].royalty_micro for row in scalar_lines[name])
    assert earned == sum(a[3] for a in case["accounts"]) == case["gross_micro"]
    steps = [engine.recoup(a[1], a[3]) for a in case["accounts"]]
    assert sum(s.recouped_micro for s in steps) == case["recouped_micro"]
    assert engine.net_payable_cents(s.payable_micro for s in steps) == case["net_payable_cents"]
    artist = (
        label_key.tables["artist_ledger"]
        .filter((pl.col("artist_id") == case["artist_id"]) & (pl.col("period") == case["period"]))
        .row(0, named=True)
    )
    assert (
        artist["gross_micro"],
        artist["recouped_micro"],
        artist["net_payable_cents"],
        artist["balance_after_micro"],
    ) == (
        case["gross_micro"],
        case["recouped_micro"],
        case["net_payable_cents"],
        case["balance_after_micro"],
    )


def test_document_examples_of_the_scalar_face() -> None:
    line = engine.line_royalty_micro(145, "EUR", 991_400, 205_000)
    assert (line.gross_usd_micro, line.royalty_micro) == (1_437_530, 294_694)
    assert engine.recouped_payable_usd([(124_274_749, 188_655_900)])[1] == engine.cents_to_usd(
        6_438
    )


@pytest.mark.parametrize(
    ("account", "charged_period", "charged_micro", "recouped_before_micro"),
    [
        ("ACC-0209", "2025-01", 7_000_000_000, 6_028_854_747),
        ("ACC-0273", "2025-08", 900_000_000, 775_725_251),
    ],
)
def test_opening_balances_trace_to_charges(
    label_key: AnswerKey,
    account: str,
    charged_period: str,
    charged_micro: int,
    recouped_before_micro: int,
) -> None:
    ledger = label_key.tables["account_ledger"].filter(pl.col("account_id") == account)
    charges = ledger.filter(pl.col("charges_micro") != 0)
    assert charges.select("period", "charges_micro").rows() == [(charged_period, charged_micro)]
    before = ledger.filter(pl.col("period") < "2025-10")
    assert before["recouped_micro"].sum() == recouped_before_micro
    october = ledger.filter(pl.col("period") == "2025-10").row(0, named=True)
    assert october["balance_before_micro"] == charged_micro - recouped_before_micro
