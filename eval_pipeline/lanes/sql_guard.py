"""The `run_sql` guard: one SELECT over the world tables, decided on sqlglot's parse tree.

What passes: exactly one statement, a SELECT (CTEs, subqueries, set operations, window
functions, DuckDB's FROM-first form), whose every table reference is a world table
(``artists`` or ``world.artists``, any case or quoting, as DuckDB itself compares names)
or a CTE that DuckDB would resolve it to. Everything else is refused with a reason the
agent can act on: other statements, other schemas or catalogs, table functions, file
scans, functions that reach outside the tables (settings, environment, catalog
introspection, serialized SQL), and row generators or value builders past a size
(`sql_size`).

It is an allowlist on names: a reference passes only if it names a table the agent
database actually has, so an unknown spelling is refused rather than guessed at. The
guard is the first wall, not the only one: the query runs on a read-only, world-only
database with external access off (see `sql_tool`).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import Token, TokenType, exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, TokenError

from eval_pipeline.lanes.errors import SqlRefusedError
from eval_pipeline.lanes.sql_size import size_refusal
from eval_pipeline.records import FrozenRecord

WORLD_SCHEMA = "world"
MAX_QUERY_CHARS = 20_000
_ONLY = "only one SELECT over the world tables is allowed"
_STATEMENT_STARTS = {TokenType.SELECT, TokenType.WITH, TokenType.FROM}

# Nodes that make a statement something other than a read of tables, wherever they sit.
_FORBIDDEN_NODES: tuple[type[exp.Expr], ...] = (
    exp.DDL,
    exp.DML,
    exp.Command,
    exp.Pragma,
    exp.Set,
    exp.SetItem,
    exp.Use,
    exp.Describe,
    exp.Show,
    exp.Summarize,
    exp.Copy,
    exp.Attach,
    exp.Detach,
    exp.Install,
    exp.Into,
    exp.Analyze,
    exp.Transaction,
    exp.Commit,
    exp.Rollback,
    exp.Drop,
    exp.Alter,
    exp.TruncateTable,
    exp.LoadData,
    exp.Cache,
    exp.Uncache,
    exp.Refresh,
    exp.Export,
    exp.Grant,
    exp.Revoke,
    exp.Kill,
    exp.Comment,
    exp.Declare,
    exp.UserDefinedFunction,
)


_FORBIDDEN_BY_TYPE: dict[type[exp.Expr], bool] = {}


def _is_forbidden(node_type: type[exp.Expr]) -> bool:
    """Memoized per node class: the walk asks once per node, the answer is per class."""
    forbidden = _FORBIDDEN_BY_TYPE.get(node_type)
    if forbidden is None:
        forbidden = _FORBIDDEN_BY_TYPE[node_type] = issubclass(node_type, _FORBIDDEN_NODES)
    return forbidden


# Scalar functions that read settings, the environment, the catalog or logs, run
# serialized SQL, or touch sequences: none is needed to query the world tables.
DENIED_FUNCTIONS: frozenset[str] = frozenset(
    {
        "getenv",
        "current_setting",
        "current_database",
        "current_catalog",
        "current_schema",
        "current_schemas",
        "in_search_path",
        "set_config",
        "glob",
        "query",
        "query_table",
        "checkpoint",
        "force_checkpoint",
        "json_serialize_sql",
        "json_deserialize_sql",
        "json_serialize_plan",
        "json_execute_serialized_sql",
        "write_log",
        "parse_duckdb_log_message",
        "truncate_duckdb_logs",
        "enable_logging",
        "disable_logging",
        "enable_profiling",
        "disable_profiling",
        "nextval",
        "currval",
        "load_extension",
        "install_extension",
        "which_secret",
        "sniff_csv",
        "col_description",
        "obj_description",
        "shobj_description",
        "format_type",
        "format_pg_type",
        "map_to_pg_oid",
    }
)
DENIED_FUNCTION_PREFIXES: tuple[str, ...] = (
    "read_",
    "duckdb_",
    "pragma_",
    "pg_",
    "has_",
    "inet_",
    "parquet_",
    "sqlite_",
    "postgres_",
    "mysql_",
    "iceberg_",
    "delta_",
    "http",
    "st_read",
)
_FILE_HINTS = (".", "/", "\\", ":", "*", "?", "~")

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def fold(name: str) -> str:
    """An identifier as DuckDB compares it: case-insensitive on ASCII letters only."""
    return name.translate(_ASCII_LOWER)


class CheckedQuery(FrozenRecord):
    """A query the guard let through, and the world tables it reads (folded, sorted)."""

    sql: str
    tables: tuple[str, ...]


def _refuse(reason: str) -> SqlRefusedError:
    return SqlRefusedError(reason)


def _visible(char: str) -> str:
    # not printable: control, format (Cf: zero-width, bidi marks...), separator but the
    # space, private-use, unassigned
    if char.isprintable():
        return char
    return f"\\u{ord(char):04x}"


def _shown(text: str, limit: int = 60) -> str:
    """User text quoted back in a reason: one line, bounded, invisible characters spelled
    out (so an agent can see why `tr\\u200buth` is not a name it may use)."""
    flat = "".join(_visible(char) for char in " ".join(text.split()))
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _word(token: Token) -> str:
    if token.token_type == TokenType.STRING:
        return f"the string {_shown(token.text, 30)!r}"
    return _shown(token.text.upper(), 30)


def _split_statements(tokens: list[Token]) -> list[list[Token]]:
    statements: list[list[Token]] = [[]]
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            statements.append([])
        else:
            statements[-1].append(token)
    return [statement for statement in statements if statement]


def _first_word(statement: list[Token]) -> Token:
    for token in statement:
        if token.token_type != TokenType.L_PAREN:
            return token
    return statement[0]


def _parse_failure(error: ParseError) -> str:
    """sqlglot's first complaint, without its internal class and token reprs."""
    detail = error.errors[0] if error.errors else {}
    where = ""
    if detail.get("line") is not None:
        where = f" at line {detail['line']}, column {detail['col']}"
    near = detail.get("highlight")
    reason = f"the query could not be parsed{where}"
    if near:
        reason += f" near {_shown(str(near), 40)!r}"
    description = str(detail.get("description") or "")
    if description and "<" not in description:
        reason += f": {_shown(description, 100)}"
    return reason


def _kind(node: exp.Expr) -> str:
    if isinstance(node, exp.Command):
        return _shown(str(node.this).upper(), 20)
    if isinstance(node, exp.Into):
        return "SELECT INTO"
    return node.key.upper()


def _with_of(node: exp.Expr) -> exp.With | None:
    for value in node.args.values():
        if isinstance(value, exp.With):
            return value
    return None


def _cte_names(ctes: Iterable[exp.Expr]) -> set[str]:
    return {fold(cte.alias) for cte in ctes if isinstance(cte, exp.CTE)}


def _within(node: exp.Expr, ancestor: exp.Expr) -> bool:
    current: exp.Expr | None = node
    while current is not None:
        if current is ancestor:
            return True
        current = current.parent
    return False


def _in_recursive_term(node: exp.Expr, cte: exp.CTE) -> bool:
    """DuckDB binds a CTE's own name to itself only in the right-hand term of a UNION
    in a WITH RECURSIVE; elsewhere (the anchor, a body without UNION) it means the
    catalog object of that name."""
    body = cte.this
    while isinstance(body, exp.Subquery):
        body = body.this
    if not isinstance(body, exp.Union):
        return False
    recursive_term = body.expression
    return isinstance(recursive_term, exp.Expr) and _within(node, recursive_term)


def _visible_ctes(node: exp.Expr) -> set[str]:
    """The CTE names an unqualified table reference at `node` would bind to in DuckDB.

    Kept minimal on purpose: a name wrongly left out here is checked against the world
    tables (and refused if it is not one), never the other way round."""
    visible: set[str] = set()
    child: exp.Expr = node
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.With) and isinstance(child, exp.CTE):
            ctes = list(parent.expressions)
            position = next(i for i, cte in enumerate(ctes) if cte is child)
            visible |= _cte_names(ctes[:position])
            if parent.args.get("recursive") and _in_recursive_term(node, child):
                visible.add(fold(child.alias))
        else:
            with_ = _with_of(parent)
            if with_ is not None and with_ is not child:
                visible |= _cte_names(with_.expressions)
        child, parent = parent, parent.parent
    return visible


def _function_names(node: exp.Func) -> set[str]:
    if isinstance(node, exp.Anonymous):
        return {fold(node.name)}
    return {fold(name) for name in type(node).sql_names()}


def _function_shown(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return _shown(node.name, 40)
    return type(node).sql_names()[0].lower()


class SqlGuard:
    """Decides whether a query may run; `check` returns it or raises SqlRefusedError.

    `world_tables` are the names queries may read (from the agent database's catalog, so a
    new world table is allowed without code changes); `denied_functions` adds names to
    the built-in deny list (the agent database adds its table-only, pragma and pg_catalog
    functions). Stateless after construction and safe to share between threads.
    """

    def __init__(self, world_tables: Iterable[str], denied_functions: Iterable[str] = ()) -> None:
        self._world = frozenset(fold(name) for name in world_tables)
        if not self._world:
            raise ValueError("a SqlGuard needs at least one world table")
        self._denied = DENIED_FUNCTIONS | frozenset(fold(name) for name in denied_functions)
        self._dialect = Dialect.get_or_raise("duckdb")
        self._listing = ", ".join(sorted(self._world))

    @property
    def world_tables(self) -> tuple[str, ...]:
        return tuple(sorted(self._world))

    def check(self, query: str) -> CheckedQuery:
        """Parse `query` and return it with the world tables it reads, or refuse it."""
        root = self._parse(query)
        tables: set[str] = set()
        for node in root.walk(bfs=False):
            if _is_forbidden(type(node)):
                raise _refuse(f"{_ONLY}: found {_kind(node)}")
            if isinstance(node, exp.Table):
                table = self._check_table(node)
                if table is not None:
                    tables.add(table)
            elif isinstance(node, exp.Func):
                self._check_function(node)
            elif isinstance(node, exp.Lateral) and not isinstance(node.this, exp.Subquery):
                raise _refuse(
                    f"table functions are not allowed (LATERAL {_shown(node.this.sql())}); "
                    f"select from the world tables: {self._listing}"
                )
        return CheckedQuery(sql=query, tables=tuple(sorted(tables)))

    def _parse(self, query: str) -> exp.Expr:
        if not isinstance(query, str):
            raise _refuse(f"the query must be text, got {type(query).__name__}")
        if len(query) > MAX_QUERY_CHARS:
            raise _refuse(
                f"the query is {len(query):,} characters long; at most {MAX_QUERY_CHARS:,} "
                "are allowed"
            )
        try:
            tokens = self._dialect.tokenize(query)
        except TokenError as error:
            context = str(error).removeprefix("Error tokenizing ")
            raise _refuse(
                "the query could not be read (check its quotes and comments) near "
                f"{_shown(context)}"
            ) from error
        statements = _split_statements(tokens)
        if not statements:
            raise _refuse(f"the query is empty; {_ONLY}")
        if len(statements) > 1:
            kinds = ", ".join(_word(_first_word(statement)) for statement in statements[:5])
            raise _refuse(f"only one statement is allowed: found {len(statements)} ({kinds})")
        first = _first_word(statements[0])
        if first.token_type not in _STATEMENT_STARTS:
            raise _refuse(f"{_ONLY}: found {_word(first)}")
        try:
            parsed = self._dialect.parser().parse(tokens, query)
        except ParseError as error:
            raise _refuse(_parse_failure(error)) from error
        # a semicolon that carries a comment (`SELECT 1; -- done`) parses to a Semicolon of
        # its own: no statement, as DuckDB reads it
        expressions = [
            expression
            for expression in parsed
            if expression is not None and not isinstance(expression, exp.Semicolon)
        ]
        if len(expressions) != 1:
            raise _refuse(f"only one statement is allowed: found {len(expressions)}")
        root = expressions[0]
        unwrapped = root
        while isinstance(unwrapped, exp.Subquery):
            unwrapped = unwrapped.this
        if not isinstance(unwrapped, exp.Select | exp.SetOperation):
            raise _refuse(f"{_ONLY}: found {_kind(unwrapped)}")
        return root

    def _not_world(self, written: str) -> SqlRefusedError:
        hint = "" if written.isascii() else " (the name has non-ASCII characters)"
        return _refuse(
            f"table {_shown(written)} is not a world table{hint}; world tables are: {self._listing}"
        )

    def _check_table(self, table: exp.Table) -> str | None:
        """The folded world table `table` reads, None for a CTE, or a refusal."""
        name_node = table.this
        if table.args.get("catalog") is not None:
            written = ".".join(part.sql(dialect="duckdb") for part in table.parts)
            raise _refuse(
                f"catalog-qualified name {_shown(written)} is not allowed; write <table> or "
                f"world.<table>; world tables are: {self._listing}"
            )
        if not isinstance(name_node, exp.Identifier):
            if isinstance(name_node, exp.Func):
                raise _refuse(
                    f"table functions are not allowed ({_function_shown(name_node)}); "
                    f"select from the world tables: {self._listing}"
                )
            raise _refuse(
                f"table reference {_shown(table.sql(dialect='duckdb'))} is not a plain table "
                f"name; select from the world tables: {self._listing}"
            )
        name = name_node.name
        schema = table.args.get("db")
        if schema is not None:
            if fold(schema.name) != WORLD_SCHEMA:
                raise self._not_world(f"{schema.name}.{name}")
        elif fold(name) in _visible_ctes(table):
            return None
        if fold(name) in self._world:
            return fold(name)
        if schema is None and name_node.quoted and any(hint in name for hint in _FILE_HINTS):
            raise _refuse(
                f"file scans are not allowed ({_shown(name)!r}); select from the world "
                f"tables: {self._listing}"
            )
        raise self._not_world(name if schema is None else f"{schema.name}.{name}")

    def _check_function(self, node: exp.Func) -> None:
        # Only the relation a FROM/JOIN/LATERAL reads is a table function; a JOIN's ON
        # condition (an AND, a comparison) hangs under the same parent.
        if (
            isinstance(node.parent, exp.From | exp.Join | exp.Table | exp.Lateral)
            and node.arg_key == "this"
        ):
            raise _refuse(
                f"table functions are not allowed ({_function_shown(node)}); select from the "
                f"world tables: {self._listing}"
            )
        names = _function_names(node)
        if names & self._denied or any(
            name.startswith(prefix) for name in names for prefix in DENIED_FUNCTION_PREFIXES
        ):
            raise _refuse(
                f"function {_function_shown(node)}() is not allowed: run_sql reads the world "
                "tables only (no settings, files, catalog or environment)"
            )
        oversized = size_refusal(node)
        if oversized is not None:
            raise _refuse(oversized)
