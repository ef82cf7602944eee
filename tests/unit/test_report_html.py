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
        self.images: list[dict[str, str]] = []
        self.headings: list[str] = []
        self.urls: list[str] = []
        self.tags: set[str] = set()
        self._cell: list[str] | None = None
        self._heading: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        self.tags.add(tag)
        self.urls += [v for k, v in a.items() if k in ("src", "href", "action", "srcset", "data")]
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "img":
            self.images.append(a)
        elif tag in ("h1", "h2", "h3"):
            self._heading = []

    def handle_endtag(self, tag):
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
    # environment, protocol, then one results table per workload
    assert len(page.tables) == 4
    env, protocol, o_proj, norm = page.tables
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
