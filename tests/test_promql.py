"""The PromQL tree and its printer: matchers, vector matching, template queries, and matchers read from text."""

from __future__ import annotations

import ast

import pytest
from gpu_execution_pack.promql import (
    Binary,
    LabelRef,
    Matcher,
    Offset,
    Range,
    Selector,
    aggregate,
    aggregate_without,
    alertmanager_matchers,
    alongside,
    call,
    ignoring,
    join,
    match,
    on,
    parse_matchers,
    partitioned,
    pinned,
    render,
    render_matchers,
    selector,
    template_query,
)


def test_a_matcher_prints_its_value_quoted_and_escaped():
    assert match("job", "node") == Matcher("job", "=", "node")
    assert render(selector("up", match("job", "node"), match("hostname", "", "!="))) == 'up{job="node", hostname!=""}'
    assert render(selector("x", match("path", 'a\\b"c\nd', "=~"))) == 'x{path=~"a\\\\b\\"c\\nd"}'
    assert render(selector("", match("__name__", "execution_gpu:.+", "=~"))) == '{__name__=~"execution_gpu:.+"}'
    assert render(selector("x")) == "x"


@pytest.mark.parametrize("label, op", [("job", "=="), ("job", "~"), ("1job", "="), ("a-b", "=")])
def test_a_matcher_refuses_what_promql_would(label: str, op: str):
    with pytest.raises(ValueError):
        match(label, "v", op)


def test_a_selector_takes_matcher_nodes_not_text():
    with pytest.raises(TypeError, match="Matcher"):
        Selector("up", ('job="node"',))  # type: ignore[arg-type]
    assert selector("up").where(match("job", "a"), match("zone", "b")).matchers == (
        match("job", "a"),
        match("zone", "b"),
    )


def test_on_and_group_left_print():
    expr = join(selector("a"), "*", on(["UUID"], group_left=["hostname"]), selector("b"))
    assert render(expr) == "a\n* on (UUID) group_left (hostname)\nb"


def test_ignoring_prints():
    expr = selector("a").and_(selector("b"), ignoring(["job", "instance"]))
    assert render(expr) == "a and ignoring (job, instance) b"


def test_ignoring_with_group_left_prints():
    expr = join(selector("a"), "/", ignoring(["mode"], group_left=()), selector("b"))
    assert render(expr) == "a\n/ ignoring (mode) group_left ()\nb"


def test_a_template_query_fills_label_references_from_the_alerts_labels():
    own = selector("x:ratio", match("execution_id", LabelRef("execution_id")), match("UUID", LabelRef("UUID")))
    assert template_query(own) == 'printf "x:ratio{execution_id=%q, UUID=%q}" $labels.execution_id $labels.UUID'
    wrapped = aggregate("max", None, own)
    assert template_query(wrapped).startswith('printf "max(x:ratio{execution_id=%q, UUID=%q})" ')


def test_a_template_query_escapes_its_go_string_and_printf_format():
    expr = (selector("x", match("job", 'a"b\\c'), match("gpu", LabelRef("gpu"))) % 100).gt(50)
    expected = 'printf "x{job=\\"a\\\\\\"b\\\\\\\\c\\", gpu=%q} %% 100 > 50" $labels.gpu'
    assert template_query(expr) == expected


def test_a_template_query_laid_out_on_several_lines_stays_one_go_string():
    # Too long for one line, the printer breaks it; a Go template's string literal cannot hold a raw line break.
    refs = [match(f"label_{i:02d}", LabelRef(f"label_{i:02d}")) for i in range(8)]
    printed = template_query(aggregate("group", ("execution_id",), selector("some:long_series_name", *refs)))
    assert "\n" not in printed and "\\n" in printed
    assert printed.startswith('printf "group by (execution_id) (\\n  some:long_series_name{label_00=%q')


def test_a_label_reference_only_prints_in_a_template_query():
    with pytest.raises(ValueError, match="template_query"):
        render(selector("x", match("gpu", LabelRef("gpu"))))
    # A NUL in a string prints escaped, so it is never taken for the printer's mark of a label reference.
    printed = template_query(call("label_replace", selector("x", match("gpu", LabelRef("gpu"))), "a", "\x00", "b", ""))
    assert '\\"\\\\u0000\\"' in printed and printed.endswith("$labels.gpu")


@pytest.mark.parametrize(
    "text, matchers",
    [
        ("", ()),
        ("  ", ()),
        ('job="dcgm"', (Matcher("job", "=", "dcgm"),)),
        (' job = "dcgm" ,zone=~"eu-.*"', (Matcher("job", "=", "dcgm"), Matcher("zone", "=~", "eu-.*"))),
        ('a!="", b!~"x|y"', (Matcher("a", "!=", ""), Matcher("b", "!~", "x|y"))),
        (r'path=~"C:\\\\tmp\\.x"', (Matcher("path", "=~", r"C:\\tmp\.x"),)),
        (r'q="say \"hi\"\n\t\u00e9\x41\101"', (Matcher("q", "=", 'say "hi"\n\téAA'),)),
    ],
)
def test_matchers_are_read_from_text(text: str, matchers: tuple[Matcher, ...]):
    assert parse_matchers(text) == matchers


def test_read_matchers_print_as_written_in_canonical_spacing():
    text = 'job="dcgm-exporter", cluster=~"eu-.*", path!~"a\\\\.b\\"c"'
    assert render_matchers(parse_matchers(text)) == text


def alertmanager_classic_value(quoted: str) -> str:
    """A double-quoted matcher value as Alertmanager's classic parser reads it (its docs: OpenMetrics escaping,
    ``\\"``, ``\\n`` and ``\\\\``; any other backslash stands for itself)."""
    assert quoted.startswith('"') and quoted.endswith('"')
    out, chars = [], iter(quoted[1:-1])
    for char in chars:
        if char != "\\":
            out.append(char)
            continue
        following = next(chars)
        out.append({"n": "\n", '"': '"', "\\": "\\"}.get(following, "\\" + following))
    return "".join(out)


def test_matchers_print_for_alertmanager_as_both_its_parsers_read_them():
    # Read with PromQL's escapes; printed with only those Alertmanager's classic parser knows, so its
    # classic and its UTF-8 parser (Go's strconv.Unquote, as Python's literal reads these) agree on each value.
    text = r'path="C:\\new", quote="say \"hi\"", city=~"Z\u00fcrich|Gen\x66", lines!="a\nb\tc"'
    values = ["C:\\new", 'say "hi"', "Zürich|Genf", "a\nb\tc"]
    printed = alertmanager_matchers(parse_matchers(text))
    assert [m.split("=", 1)[0].rstrip("!") for m in printed] == ["path", "quote", "city", "lines"]
    quoted = [m[m.index('"') :] for m in printed]
    assert [alertmanager_classic_value(q) for q in quoted] == values
    assert [ast.literal_eval(q) for q in quoted] == values
    assert printed[2] == 'city=~"Zürich|Genf"'  # not escaped: both parsers read UTF-8


@pytest.mark.parametrize(
    "text, problem",
    [
        ("job=dcgm", "expected a value in double quotes at 'dcgm'"),
        ("job='dcgm'", "expected a value in double quotes"),
        ('job="a" zone="b"', "expected a comma before the next matcher"),
        ('job="a",', "expected a label name ([a-zA-Z_][a-zA-Z0-9_]*) at the end"),
        ('1job="a"', "expected a label name"),
        ('job=="a"', "expected a value in double quotes"),
        ('job~"a"', "expected =, !=, =~ or !~ after job"),
        ('job="a', "has no closing quote"),
        (r'job=~"dcgm\d+"', r"unknown escape '\\d'"),  # Prometheus refuses it when it loads the rules
        ('job="a\nb"', "a line break in the value"),
        (r'job="\xff"', "a byte above ASCII"),
        (r'job="\ud800"', "is not a character"),
    ],
)
def test_bad_matcher_text_is_refused_with_the_reason(text: str, problem: str):
    with pytest.raises(ValueError) as err:
        parse_matchers(text)
    assert problem in str(err.value)


def test_partitioning_adds_the_label_to_every_by_and_on_clause():
    x, y = selector("x"), selector("y")
    expr = join(
        aggregate("sum", ["a"], x),
        "/",
        on(["a"], group_left=["b"]),
        aggregate("count", None, aggregate("topk", ["cluster", "a"], y, param=1)),
    )
    assert render(partitioned(expr, "cluster")) == (
        "sum by (cluster, a) (x)\n/ on (cluster, a) group_left (b)\ncount by (cluster) (topk by (cluster, a) (1, y))"
    )


def test_partitioning_keeps_ignoring_all_label_matches_and_shared_nodes():
    x, y = selector("x"), selector("y")
    ignored = Binary("/", x, y, ignoring(["b"]))
    shared = join(x, "*", on(["m"], group_left=(), shared=True), aggregate("group", ["m"], y, shared=True))
    for expr in (ignored, x.unless(y), shared):
        assert partitioned(expr, "cluster") == expr
    assert partitioned(aggregate("sum", ["a"], x), "") == aggregate("sum", ["a"], x)


def test_alongside_keeps_the_label_after_the_anchor_only_where_the_anchor_is_grouped_or_matched_on():
    x, y = selector("x"), selector("y")
    expr = join(
        aggregate("sum", ["execution_id", "modelName"], x),
        "*",
        on(["execution_id"], group_left=()),
        aggregate("count", ["execution_id"], aggregate("group", ["execution_id", "hostname"], y)),
    )
    assert render(alongside(expr, "execution_id", "namespace")) == (
        "sum by (execution_id, namespace, modelName) (x)\n* on (execution_id, namespace) group_left ()\n"
        "count by (execution_id, namespace) (group by (execution_id, namespace, hostname) (y))"
    )
    # Not where the anchor is absent, nor a second time, nor in a bare aggregation, an ignoring match or a without.
    others = (
        aggregate("max", ["hostname"], x),
        aggregate("sum", ["execution_id", "namespace"], x),
        aggregate("count", None, x),
        Binary("/", x, y, ignoring(["execution_id"])),
        aggregate_without("sum", ["execution_id"], x),
    )
    for other in others:
        assert alongside(other, "execution_id", "namespace") == other


def test_a_pinned_expression_evaluates_each_selector_and_range_at_its_time():
    util = selector("u", match("execution_id", "a"))
    expr = aggregate("sum", ("execution_id",), call("avg_over_time", util.range("5m"))).and_(
        selector("p"), on(("execution_id",))
    )
    assert render(pinned(expr, 1700000000.25)) == (
        'sum by (execution_id) (avg_over_time(u{execution_id="a"}[5m] @ 1700000000.25)) '
        "and on (execution_id) p @ 1700000000.25"
    )
    # A subquery is pinned whole: its inner selector is evaluated on the subquery's own steps.
    sub = Range(call("rate", util.range("1m")), "1h", "1m")
    assert render(pinned(sub, 1700000000)) == 'rate(u{execution_id="a"}[1m])[1h:1m] @ 1700000000'


def test_an_offset_reads_a_selector_or_range_before_the_querys_time():
    share = selector("s", match("execution_id", "a"))
    gap = call("time") - call("timestamp", share.offset("1s"))
    assert render(gap.and_(share)) == 'time() - timestamp(s{execution_id="a"} offset 1s) and s{execution_id="a"}'
    assert (
        render(call("sum_over_time", share.range("5m").offset("1m")))
        == 'sum_over_time(s{execution_id="a"}[5m] offset 1m)'
    )
    # Pinned whole: the offset is counted back from the pinned time.
    assert render(pinned(gap, 1700000000)) == 'time() - timestamp(s{execution_id="a"} offset 1s @ 1700000000)'
    # A subquery may step over an offset selector; a plain range of one is no PromQL.
    assert render(Range(share.offset("1s"), "5m", "1m")) == '(s{execution_id="a"} offset 1s)[5m:1m]'
    with pytest.raises(ValueError, match="put the range inside"):
        render(Range(share.offset("1s"), "5m"))


@pytest.mark.parametrize("by", ["", "1", "0s", "-1s", "1 s"])
def test_an_offset_takes_a_duration_above_zero(by: str):
    with pytest.raises(ValueError, match=r"offset: .* not a Prometheus duration"):
        Offset(selector("s"), by)


def test_an_offset_applies_to_selectors_and_ranges_only():
    with pytest.raises(TypeError, match="offset applies to a selector or a range"):
        call("time").offset("1s")
