"""Gate verdicts as JUnit XML, for CI test dashboards.

One ``<testcase>`` per ``case_id/impl`` key (classname ``solbench.<workload>``,
``time`` = current median in seconds, 0 when there is none):

    PASS          passed (no child element)
    FASTER        passed, with <system-out>FASTER: reason</system-out>
    REGRESSION    <failure type="REGRESSION" message=reason>
    BROKEN        <failure type="BROKEN" message="<impl> on <case>: ok in the baseline,
                  <STATUS> in the current run: <message>">, the full message and the
                  worker's last log lines as its text
    STILL-BROKEN  likewise, <failure type="STILL-BROKEN" ...>: failing in the baseline too
    INCONCLUSIVE  <skipped message="INCONCLUSIVE: reason">
    MISSING       <skipped message="MISSING: reason">; with ``gate --require-all``, a case the
                  baseline measured: <failure type="MISSING" message=reason>

Inconclusive is "skipped", not "failure" or "error": the gate could not decide,
and nothing crashed. The dashboard shows it as not-run while the process exit
code (3) still tells the CI job. A BROKEN case is a failure, not an "error": the
gate ran fine and found the implementation failing.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Collection

from solbench.analysis.gate import GateCaseVerdict, GateResult
from solbench.report.units import format_ci, format_p, format_percent, format_ratio
from solbench.results.model import shown_as_text

__all__ = ["gate_junit", "refused_junit"]

def _writable(root: ET.Element) -> None:
    """Every attribute and text under ``root`` with what XML cannot hold (C0 controls, lone surrogates,
    U+FFFE and U+FFFF) written as a visible escape (``\\x1b``, ``\\ud800``; ``shown_as_text``, as every
    implementation's own words already are): ElementTree writes such characters as they are, and the
    file no longer parses."""
    for element in root.iter():
        element.attrib.update((k, shown_as_text(v)) for k, v in element.attrib.items())
        if element.text:
            element.text = shown_as_text(element.text)


def _testcase(parent: ET.Element, v: GateCaseVerdict, required: bool = False) -> None:
    time = v.median_cur if v.median_cur is not None else 0.0
    tc = ET.SubElement(parent, "testcase", classname=f"solbench.{v.workload or 'unknown'}",
                       name=v.key, time=f"{time:.9g}")
    if v.verdict == "MISSING" and required:
        ET.SubElement(tc, "failure", type="MISSING", message=v.reason).text = "required (--require-all)"
    elif v.verdict == "REGRESSION":
        failure = ET.SubElement(tc, "failure", type="REGRESSION", message=v.reason)
        failure.text = (f"ratio {format_ratio(v.ratio, threshold=v.threshold)} "
                        f"CI {format_ci(v.ci_low, v.ci_high, threshold=v.threshold)} "
                        f"threshold +{format_percent(v.threshold)} p_adjusted {format_p(v.p_adjusted)}")
    elif v.verdict in ("BROKEN", "STILL-BROKEN"):
        failure = ET.SubElement(tc, "failure", type=v.verdict, message=f"{v.impl} on {v.case_id}: {v.reason}")
        failure.text = f"status {v.status_cur} (baseline: {v.status_base})" + (f"\n{v.detail}" if v.detail else "")
    elif v.verdict in ("INCONCLUSIVE", "MISSING"):
        ET.SubElement(tc, "skipped", message=f"{v.verdict}: {v.reason}")
    elif v.verdict == "FASTER":
        ET.SubElement(tc, "system-out").text = f"FASTER: {v.reason}"


def gate_junit(g: GateResult, suite_name: str = "solbench-gate", exit_code: int | None = None,
               required: Collection[str] = ()) -> str:
    """The gate result as a JUnit XML document (``<testsuites>`` with one ``<testsuite>``);
    ``exit_code``: the command's, where it is more severe than the gate's (``gate_json``);
    ``required``: MISSING keys that fail the command (``gate --require-all``), written as failures."""
    failing = {v.key for v in g.verdicts if v.verdict == "MISSING" and v.key in required}
    tests = str(len(g.verdicts))
    failures = str(g.count("REGRESSION") + g.count("BROKEN") + g.count("STILL-BROKEN") + len(failing))
    skipped = str(g.count("INCONCLUSIVE") + g.count("MISSING") - len(failing))
    root = ET.Element("testsuites", name=suite_name, tests=tests, failures=failures, errors="0",
                      skipped=skipped)
    suite = ET.SubElement(root, "testsuite", name=suite_name, tests=tests, failures=failures,
                          errors="0", skipped=skipped)
    props = ET.SubElement(suite, "properties")
    threshold = "per workload" if g.threshold is None else f"{g.threshold:g}"
    settings = {"overall": g.overall, "exit_code": str(g.exit_code if exit_code is None else exit_code),
                "gate_exit_code": str(g.exit_code), "threshold": threshold,
                "alpha": f"{g.alpha:g}", "confidence": f"{g.confidence:g}", "reruns": str(g.reruns),
                "looks": str(g.looks)}
    for i, diff in enumerate(g.fingerprint_diffs):
        settings[f"fingerprint_diff_{i}"] = diff
    if g.cards:
        settings["cards"] = g.cards
    if g.load:
        settings["load"] = g.load
    for name, value in settings.items():
        ET.SubElement(props, "property", name=name, value=value)
    for v in g.verdicts:
        _testcase(suite, v, v.key in failing)
    _writable(root)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def refused_junit(message: str, suite_name: str = "solbench-gate") -> str:
    """A JUnit document for a gate that could not decide anything (bad input, runs refused): one
    testcase in error, so that a CI report shows the refusal and never an earlier job's verdicts."""
    root = ET.Element("testsuites", name=suite_name, tests="1", failures="0", errors="1", skipped="0")
    suite = ET.SubElement(root, "testsuite", name=suite_name, tests="1", failures="0", errors="1", skipped="0")
    case = ET.SubElement(suite, "testcase", classname=suite_name, name="gate")
    ET.SubElement(case, "error", message=message, type="refused").text = message
    _writable(root)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
