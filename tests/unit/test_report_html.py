"""The self-contained HTML report, checked by parsing it: tables, inline images, no external references."""

import base64
import dataclasses
from html import escape
from html.parser import HTMLParser

from solbench.analysis.compare import compare_runs
from solbench.analysis.gate import gate
from solbench.report.html import ReportImages, report_html
from tests.unit.factories import make_run
from tests.unit.test_report_roofline import two_workload_run

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 8


class Page(HTMLParser):
    """Collects tables (as rows of cell text), images, headings and every URL-bearing attribute."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self.orders: list[str | None] = []  # each table's data-order (None: a table shown in one order)
        self.radios: list[dict[str, str]] = []
        self.labels: dict[str, str] = {}  # label text by the id it is for
        self.views: list[dict[str, str]] = []  # the class and data-order of each view
        self.images: list[dict[str, str]] = []
        self.headings: list[str] = []
        self.urls: list[str] = []
        self.tags: set[str] = set()
        self._cell: list[str] | None = None
        self._heading: list[str] | None = None
        self._label: list[str] | None = None
        self._label_for = ""
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        self.tags.add(tag)
        self.urls += [v for k, v in a.items() if k in ("src", "href", "action", "srcset", "data")]
        if tag == "table":
            self.tables.append([])
            self.orders.append(a.get("data-order"))
        elif tag == "input" and a.get("type") == "radio":
            self.radios.append(a)
        elif tag == "label":
            self._label, self._label_for = [], a.get("for", "")
        elif tag == "div" and "view" in a.get("class", "").split():
            self.views.append(a)
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "img":
            self.images.append(a)
        elif tag in ("h1", "h2", "h3"):
            self._heading = []

    def handle_endtag(self, tag):
        if tag == "label" and self._label is not None:
            self.labels[self._label_for] = "".join(self._label).strip()
            self._label = None
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag in ("h1", "h2", "h3") and self._heading is not None:
            self.headings.append("".join(self._heading).strip())
            self._heading = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._heading is not None:
            self._heading.append(data)
        if self._label is not None:
            self._label.append(data)


def assert_self_contained(page: Page, text: str) -> None:
    """No network: every URL is an inline data: image, no stylesheet links, scripts or frames."""
    assert all(u.startswith("data:image/png;base64,") for u in page.urls), page.urls
    assert not page.tags & {"link", "script", "iframe", "object", "embed"}
    assert "http://" not in text and "https://" not in text and "url(" not in text
    for img in page.images:
        payload = base64.b64decode(img["src"].split(",", 1)[1], validate=True)
        assert payload.startswith(b"\x89PNG")
        assert img.get("alt")


def test_report_has_every_table_and_image_and_nothing_external():
    run = two_workload_run()
    images = ReportImages(PNG, {(0, "o_proj"): PNG, (0, "norm"): PNG})
    text = report_html([run], images, labels=["attn.yaml"])
    page = Page(text)
    assert_self_contained(page, text)
    assert len(page.images) == 3  # roofline + one histogram per workload
    # environment, protocol, then one results table per workload, in the order as given ...
    shown = [t for t, order in zip(page.tables, page.orders, strict=True) if order in (None, "given")]
    assert len(shown) == 4
    # ... and each results table again by time, by SOL and by speedup
    assert page.orders == [None, None, *["given", "time", "sol", "speedup"] * 2]
    env, protocol, o_proj, norm = shown
    assert ["device_name", "NVIDIA H100 80GB HBM3"] in env
    assert ["timer", "cold"] in protocol and ["peaks", "h100-sxm (datasheet)"] in protocol
    assert o_proj[0][:4] == ["case", "impl", "status", "median"]
    assert [row[1] for row in o_proj[1:]] == ["baseline", "fused", "extra"]
    assert o_proj[2][2] == "OK" and o_proj[2][3] == "10.0 µs"
    assert [row[2] for row in norm[1:]] == ["OK", "ERROR"]
    assert "Roofline" in page.headings and "Run 1: attn.yaml" in page.headings
    assert "Notes" in page.headings and "synthetic failure" in text  # why fused was not scored


def test_gate_and_comparison_tables_appear_when_given():
    base = make_run({"c1": {"baseline": [1e-3] * 30}, "c2": {"baseline": [1e-3] * 30}})
    cur = make_run({"c1": {"baseline": [1.5e-3] * 30}, "c2": {"baseline": [1e-3] * 30}})
    text = report_html([cur], gate=gate(base, cur), comparison=compare_runs(base, cur, label_a="base", label_b="head"))
    page = Page(text)
    assert_self_contained(page, text)
    assert "Gate: REGRESSION" in page.headings and "Comparison: head vs base" in page.headings
    gate_table = next(t for t in page.tables if t[0][:3] == ["case", "impl", "verdict"] and "threshold" in t[0])
    assert {f"{row[0]}/{row[1]}": row[2] for row in gate_table[1:]} == {"c1/baseline": "REGRESSION",
                                                                       "c2/baseline": "PASS"}
    assert page.images == []  # no images given: none referenced
    # the comparison says what the console and Markdown say under it: its counts, band, and what a ratio is of
    assert "(0 faster, 1 slower, 1 same, 0 inconclusive); SAME within ±5%, alpha 0.01 (BH)" in text
    assert "One round a side: the ratio of the medians, a percentile-bootstrap interval." in text


def test_text_from_results_is_escaped():
    run = two_workload_run()
    evil = dataclasses.replace(run.cases[0], workload="<script>alert(1)</script>")
    text = report_html([dataclasses.replace(run, cases=(evil,))], title="a <b> title")
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "<title>a &lt;b&gt; title</title>" in text


def test_roofline_points_are_numbered_and_the_numbers_listed():
    from solbench.report.roofline import point_labels

    run = two_workload_run()
    labels = point_labels([run])
    assert sorted(labels.values()) == list(range(1, len(labels) + 1))
    assert set(labels) == {c.case_id for c in run.cases
                           if any(r.status == "ok" and r.score is not None for r in c.impls) and c.intensity > 0}
    text = report_html([run], ReportImages(PNG, {}))
    listed = text.split('<ol class="note">', 1)[1].split("</ol>", 1)[0]
    assert listed.count("<li>") == len(labels)
    for case, n in labels.items():
        assert listed.split("<li>")[n].startswith(escape(case))


def sortable_run():
    """Two cases (T_SOL 10 µs and 100 µs) whose orders by time, SOL and speedup all differ from the given one:
    SOL = T_SOL / median and speedup = baseline median / median, as the scorer computes them."""
    run = make_run({"small": {"baseline": [40e-6] * 20, "fused": [20e-6] * 20, "extra": [30e-6] * 20},
                    "large": {"baseline": [400e-6] * 20, "fused": [125e-6] * 20, "broken": []}},
                   statuses={"large/broken": "error"})
    cases = []
    for n, (c, t_sol) in enumerate(zip(run.cases, (10e-6, 100e-6), strict=True), start=1):
        base = c.impls[0].timing.median
        impls = tuple(dataclasses.replace(r, score=dataclasses.replace(
            r.score, sol=t_sol / r.timing.median, speedup=base / r.timing.median)) if r.score else r for r in c.impls)
        cases.append(dataclasses.replace(c, params={"n": n}, t_sol=t_sol, impls=impls, baseline="baseline"))
    return dataclasses.replace(run, cases=tuple(cases))


def _view(page: Page, order: str) -> list[list[str]]:
    """The rows (case, impl, ...) of the one results table shown in ``order``."""
    (table,) = [t for t, o in zip(page.tables, page.orders, strict=True) if o == order]
    assert table[0][:2] == ["case", "impl"]
    return table[1:]


def test_results_tables_hold_every_order_and_each_is_sorted():
    text = report_html([sortable_run()])
    page = Page(text)
    assert_self_contained(page, text)  # still no script: the views switch through CSS alone
    assert "<script" not in text.lower()
    given = [(row[0], row[1]) for row in _view(page, "given")]
    assert given == [("n=1 bf16", "baseline"), ("", "fused"), ("", "extra"),
                     ("n=2 bf16", "baseline"), ("", "fused"), ("", "broken")]  # today's order, grouped by case

    def keys(order):
        return [(row[0], row[1]) for row in _view(page, order)]

    assert keys("time") == [("n=1 bf16", "fused"), ("n=1 bf16", "extra"), ("n=1 bf16", "baseline"),
                            ("n=2 bf16", "fused"), ("n=2 bf16", "baseline"), ("n=2 bf16", "broken")]
    by_sol = _view(page, "sol")
    sols = [float(row[7]) for row in by_sol if row[7]]
    assert sols == sorted(sols, reverse=True) and len(sols) == 5
    assert [(row[0], row[1]) for row in by_sol] == [
        ("n=2 bf16", "fused"), ("n=1 bf16", "fused"), ("n=1 bf16", "extra"), ("n=1 bf16", "baseline"),
        ("n=2 bf16", "baseline"), ("n=2 bf16", "broken")]  # a tie keeps the given order; unscored last
    speedups = [float(row[11].rstrip("×")) for row in _view(page, "speedup") if row[11]]
    assert speedups == [3.2, 2.0, 1.33, 1.0, 1.0]
    assert keys("speedup")[:2] == [("n=2 bf16", "fused"), ("n=1 bf16", "fused")]
    # every view holds the same rows (all but the case cell, which the given order shows once per case)
    for order in ("time", "sol", "speedup"):
        assert sorted(row[1:] for row in _view(page, order)) == sorted(row[1:] for row in _view(page, "given"))


def test_the_order_shown_is_named_and_picked_by_radio_buttons():
    text = report_html([sortable_run()])
    page = Page(text)
    assert [r["class"] for r in page.radios] == ["o0", "o1", "o2", "o3"]
    assert [("checked" in r) for r in page.radios] == [True, False, False, False]  # as given by default
    assert len({r["name"] for r in page.radios}) == 1
    assert [page.labels[r["id"]] for r in page.radios] == ["as given", "by time", "by SOL", "by speedup"]
    assert [(v["class"], v["data-order"]) for v in page.views] == [
        ("view v0", "given"), ("view v1", "time"), ("view v2", "sol"), ("view v3", "speedup")]
    for i in range(4):  # the CSS shows view i when radio i is checked, and only then
        assert f".views>input.o{i}:checked~.v{i}" in text
    assert ".views>.view{display:none}" in text
    assert "<caption>order: by SOL, highest first</caption>" in text  # each view says its order


def test_a_one_row_table_has_no_switch_and_groups_are_unique():
    one = make_run({"only": {"baseline": [1e-3] * 30}})
    page = Page(report_html([one]))
    assert page.radios == [] and page.orders[-1] == "given"
    page = Page(report_html([two_workload_run(), sortable_run()]))
    names = [r["name"] for r in page.radios]
    assert len(set(names)) == 3 and len(names) == 12  # one radio set per multi-row table, never shared
    assert len({r["id"] for r in page.radios}) == 12


def test_gate_and_comparison_tables_are_also_shown_by_ratio_largest_slowdown_first():
    base = make_run({c: {"baseline": [1e-3] * 30} for c in ("c1", "c2", "c3")})
    cur = make_run({"c1": {"baseline": [1.5e-3] * 30}, "c2": {"baseline": [0.8e-3] * 30},
                    "c3": {"baseline": [2e-3] * 30}})
    text = report_html([cur], gate=gate(base, cur), comparison=compare_runs(base, cur, label_a="base", label_b="head"))
    page = Page(text)
    assert_self_contained(page, text)
    verdict_tables = [(t, o) for t, o in zip(page.tables, page.orders, strict=True) if t[0][2:3] == ["verdict"]]
    assert [o for _, o in verdict_tables] == ["given", "ratio", "given", "ratio"]  # gate, then comparison
    for table, order in verdict_tables:
        ratio_col = table[0].index("ratio" if "ratio" in table[0] else "head/base")
        cases = [row[0] for row in table[1:]]
        assert cases == (["c1", "c2", "c3"] if order == "given" else ["c3", "c1", "c2"])
        ratios = [float(row[ratio_col].rstrip("×")) for row in table[1:]]
        assert ratios == [1.5, 0.8, 2.0] if order == "given" else ratios == [2.0, 1.5, 0.8]
    assert {r["name"] for r in page.radios} >= {"gate", "compare"}
    assert "<caption>order: by ratio, the largest slowdown of head against base first</caption>" in text


def test_the_floor_fraction_the_console_and_markdown_show_is_in_the_html_too():
    from solbench.report.markdown import run_markdown

    run = make_run({"c1": {"baseline": [1e-3] * 10, "fused": [8e-4] * 10}})
    case = run.cases[0]
    impls = tuple(dataclasses.replace(r, score=dataclasses.replace(r.score, floor_fraction=f))
                  for r, f in zip(case.impls, (0.61, 0.76), strict=True))
    run = dataclasses.replace(run, cases=(dataclasses.replace(case, impls=impls),))
    assert "| of floor |" in run_markdown(run) and "| 0.76 |" in run_markdown(run)
    page = report_html([run])
    assert "<th>of floor</th>" in page and "<td>0.61</td>" in page and "<td>0.76</td>" in page


def test_a_part_and_a_byte_floor_say_so_where_sol_would_be_as_in_the_console_and_markdown():
    """The HTML showed a part (timed, never scored) as an OK row with an empty SOL cell: nothing told
    it from a scored implementation whose score was missing."""
    from solbench.report.markdown import run_markdown

    run = make_run({"c1": {"baseline": [1e-3] * 10, "compute": [4e-4] * 10, "comm": [5e-4] * 10,
                           "floor": [2e-4] * 10}})
    case = run.cases[0]
    parts = {"compute": "compute", "comm": "comm", "floor": "floor"}
    impls = tuple(dataclasses.replace(r, score=None, protocol={**r.protocol, "part": parts[r.name]})
                  if r.name in parts else r for r in case.impls)
    run = dataclasses.replace(run, cases=(dataclasses.replace(case, impls=impls),))
    md = {row[1].strip(): row[5].strip() for row in (line.split("|")[1:-1] for line in run_markdown(run).splitlines()
                                                     if line.startswith("| n="))}
    table = next(t for t in Page(report_html([run])).tables if "impl" in t[0])
    col = table[0].index("SOL")
    sol = {row[1]: row[col] for row in table[1:]}
    assert sol["compute"] == sol["comm"] == "part" and sol["floor"] == "floor" and sol["baseline"] not in ("", "part")
    assert {k: md[k] for k in parts} == {k: sol[k] for k in parts}


def test_the_comparison_lists_keys_measured_on_one_side_as_the_console_does():
    """A key one side lacks (an implementation dropped, or failing there) has no ratio; the console and
    Markdown list it, and the HTML comparison left it out: the table read as if nothing was missing."""
    base = make_run({"c1": {"baseline": [1e-3] * 30, "fused": [8e-4] * 30}, "c2": {"baseline": [1e-3] * 30}})
    cur = make_run({"c1": {"baseline": [1e-3] * 30}, "c2": {"baseline": [1e-3] * 30, "fused": [7e-4] * 30}},
                   statuses={"c2/fused": "incorrect"})
    c = compare_runs(base, cur, label_a="base", label_b="head")
    assert c.only_in_a == ("c1/fused",)
    page = Page(report_html([cur], comparison=c))
    (table,) = [t for t, o in zip(page.tables, page.orders, strict=True) if o == "given" and "head/base" in t[0]]
    verdicts = {(row[0], row[1]): row[2] for row in table[1:]}
    assert verdicts[("c1", "fused")] == "only in base (head: absent)"
    assert verdicts[("c1", "baseline")] in ("SAME", "INCONCLUSIVE")


def test_the_gate_section_says_what_the_console_and_markdown_gate_say():
    """The HTML gate showed "—" for both sides of a BROKEN case (the console and Markdown: its status, e.g.
    INCORRECT) and said nothing of a gate allowed across hardware (--allow-cross-hardware)."""
    from tests.unit.factories import make_env

    base = make_run({"c1": {"baseline": [1e-3] * 30}, "c2": {"baseline": [1e-3] * 30}})
    cur = make_run({"c1": {"baseline": [1e-3] * 30}, "c2": {"baseline": [1e-3] * 30}},
                   environment=make_env(device_name="NVIDIA A100-SXM4-80GB", driver="535.1"),
                   statuses={"c2/baseline": "incorrect"})
    g = gate(base, cur, allow_cross_hardware=True)
    text = report_html([cur], gate=g)
    page = Page(text)
    (table,) = [t for t, o in zip(page.tables, page.orders, strict=True) if o == "given" and "threshold" in t[0]]
    header, *rows = table
    broken = dict(zip(header, next(row for row in rows if row[2] == "BROKEN"), strict=True))
    assert (broken["baseline"], broken["current"]) == ("1.00 ms", "INCORRECT")
    assert len(g.fingerprint_diffs) == 2
    for diff in g.fingerprint_diffs:
        assert escape(diff) in text


def test_the_rounds_and_clock_columns_the_console_and_markdown_show_are_in_the_html_too():
    """A run in rounds, on a GPU with clocks read: the console and Markdown tables show each point's rounds
    (count and spread) and SM clock range with throttled samples (⚠n); the HTML table had neither."""
    from solbench.report.markdown import run_markdown

    run = make_run({"c1": {"baseline": [1.0e-3, 1.1e-3, 1.2e-3] * 4, "fused": [8e-4, 9e-4] * 6}}, rounds=3)
    case = run.cases[0]
    impls = tuple(dataclasses.replace(r, timing=dataclasses.replace(
        r.timing, sm_clock_mhz=(1755,) + (1980,) * (r.timing.n - 1), throttle_reasons=(4,) + (0,) * (r.timing.n - 1)))
        for r in case.impls)
    run = dataclasses.replace(run, cases=(dataclasses.replace(case, impls=impls),))
    md = run_markdown(run)
    (table,) = [t for t, o in zip(Page(report_html([run])).tables, Page(report_html([run])).orders, strict=True)
                if o == "given" and "impl" in t[0]]
    header, *rows = table
    assert "rounds" in header and "SM MHz" in header
    for row in rows:
        cells = dict(zip(header, row, strict=True))
        assert cells["rounds"].startswith("3 · ") and f"| {cells['rounds']} |" in md
        assert cells["SM MHz"] == "1755–1980 ⚠1" and "| 1755–1980 ⚠1 |" in md
