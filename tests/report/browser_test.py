#!/usr/bin/env python3
"""Browser test of the HTML report: Debian's chromium, headless, opens report.html from disk.

Usage: browser_test.py BUCKETSIM_BINARY SOURCE_DIR

1. Writes fresh reports: `bucketsim compare traces/tiny-ws2.json --json` and a `bucketsim sweep`
   of the same trace with a budget, then `bucketsim report` of both (one page, two sections).
2. The page is self-contained: no <script>, <link>, <img>, @import or url() that could fetch
   anything, and no http(s) URL outside the SVG namespace declaration.
3. chromium --dump-dom loads it with every host name unresolvable and a dead proxy, logging the
   page's console to stderr: no console message at all, and the rendered DOM holds every chart
   of the file (svg.bucketsim-chart) and the policy table. A copy of the page with a probe script
   in front records every error event (script errors, failed loads) and every resource the page
   fetched (the Performance API): there must be none.
4. chromium --screenshot renders it: the PNG (decoded here with zlib) is not blank.
5. A control page with a failing image fetch and a script error must be caught by step 3, so a
   check that cannot fail cannot pass.
6. Layout, at window widths of 1024 and 1600 px, on the fresh page, on the shipped examples
   (reports/examples/: compare, frameworks, sweep, two-trace sweep) and on pages of many runs
   written here: a compare of seven policies of four frameworks, a cap search (`--bucket-cap-mb
   1,5,25,auto`) of four policies of three frameworks (36 runs) and a cap search of two traces
   with a budget: no table wider than the page (the Policies table's 14 columns included), no
   table cell whose text is cut, every chart's text inside its chart, no two labels of a chart
   on top of each other and no label over a dot or ring. A control page with each fault must be
   caught.
   What a reader sees before opening anything (every <details> closed), on every page: each
   report with more than one run opens with its recommendation (section.advice, before its first
   table); no chart draws more than six runs' lines; the cap searches show one row per policy in
   their "Across frameworks" table and one "Bucket lifetimes" chart per bucketing policy, with
   every run in the folded table and chart. A control page that breaks each of these must be
   caught.
7. One unit per page (src/report/byte_unit.h): every memory figure of a page, in its tables,
   charts, tooltips and sentences, is in one binary unit, the one its largest peak calls for
   (MiB for the tiny trace and the sweep example, GiB for the gpt-24l examples); only the bucket
   cap (a setting in MiB) and out-of-memory descriptions are exempt. A control page mixing
   units must be caught.

Exit 77 (ctest SKIP_RETURN_CODE) when chromium is not installed; tools/setup.sh installs it.
"""
import json
import os
from html import unescape
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

CHART = re.compile(r'<svg\b[^>]*\bclass="bucketsim-chart"')


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium_run(chromium, args, profile, width=1100):
    command = [
        chromium, "--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
        "--disable-extensions", "--disable-background-networking", "--disable-sync",
        "--disable-component-update", "--mute-audio", f"--user-data-dir={profile}",
        # Any network request fails: no host resolves and the proxy is a closed port.
        "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=http://127.0.0.1:9",
        # --v=1 logs the page's console messages ("INFO:CONSOLE..."); the virtual time budget
        # lets the load event's handlers run before the DOM is dumped.
        "--enable-logging=stderr", "--v=1", "--virtual-time-budget=3000",
        f"--window-size={width},1400",
    ]
    if os.geteuid() == 0:
        command.append("--no-sandbox")  # chromium refuses to run as root with its sandbox
    result = subprocess.run(command + args, capture_output=True, text=True, timeout=120)
    return result


# Records what went wrong on the page, and what it fetched, into an attribute of <html>.
PROBE = """<script>
window.__problems = [];
window.addEventListener("error", function (e) {
  var t = e.target || {};
  window.__problems.push("error: " + (e.message || t.src || t.href || "unknown"));
}, true);
window.addEventListener("load", function () {
  performance.getEntriesByType("resource").forEach(function (r) {
    window.__problems.push("fetched: " + r.name);
  });
  document.documentElement.setAttribute("data-probe", JSON.stringify(window.__problems));
});
</script>"""


def load(chromium, html_path, profile, width=1100):
    """The rendered DOM and the console lines the page logged."""
    result = chromium_run(chromium, ["--dump-dom", "file://" + html_path], profile, width)
    if result.returncode != 0:
        fail(f"chromium --dump-dom exited {result.returncode}: {result.stderr[-2000:]}")
    console = [line.strip() for line in result.stderr.splitlines() if ":CONSOLE" in line]
    return result.stdout, console


def probe(chromium, html_path, profile):
    """Errors and fetches of the page, from a probed copy beside it (same base URL)."""
    html = open(html_path, encoding="utf-8").read()
    copy = html_path + ".probe.html"
    with open(copy, "w", encoding="utf-8") as f:
        f.write(re.sub(r"<head>", "<head>" + PROBE, html, count=1) if "<head>" in html
                else PROBE + html)
    dom, console = load(chromium, copy, profile)
    found = re.search(r'data-probe="([^"]*)"', dom)
    if not found:
        fail(f"the probe did not run on {copy}")
    problems = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    return problems + console


# Measures the rendered page: tables wider than their box, cells whose text is cut, chart texts
# outside their <svg>, chart texts overlapping another (more than 2 px each way). First, with
# every <details> closed, what a reader sees up front: the recommendation of each report, the
# runs each chart draws, the rows of "Across frameworks" and the bucket lifetime charts.
LAYOUT_PROBE = """<script>
window.addEventListener("load", function () {
  var faults = [];
  function folded(el) {
    for (var p = el.parentElement; p; p = p.parentElement) {
      if (p.tagName === "DETAILS" && !p.open) return true;
    }
    return false;
  }
  // A memory chart's line per run: "<run>: allocated".
  function series(svg) {
    return Array.prototype.filter.call(svg.querySelectorAll("polyline > title"), function (t) {
      return / allocated$/.test(t.textContent);
    }).length;
  }
  var seen = {reports: [], charts: [], frameworks: [], lifetimes: 0};
  var scopes = document.querySelectorAll("section.report");
  if (!scopes.length) scopes = [document.querySelector("main") || document.body];
  Array.prototype.forEach.call(scopes, function (scope) {
    var advice = scope.querySelector("section.advice");
    var table = scope.querySelector("table");
    seen.reports.push({
      runs: scope.querySelectorAll("h2 > code, h3 > code").length,
      advice: advice && !folded(advice) ? advice.textContent.trim().replace(/\\s+/g, " ") : "",
      before_tables: !!advice && (!table ||
          !!(advice.compareDocumentPosition(table) & Node.DOCUMENT_POSITION_FOLLOWING))
    });
  });
  document.querySelectorAll("svg.bucketsim-chart").forEach(function (svg) {
    seen.charts.push({label: svg.getAttribute("aria-label"), series: series(svg),
                      folded: folded(svg)});
  });
  document.querySelectorAll("h2, h3").forEach(function (h) {
    var text = h.textContent.trim();
    if (/^Bucket lifetimes/.test(text) && !folded(h)) seen.lifetimes += 1;
    if (text !== "Across frameworks") return;
    var shown = null, all = 0;
    for (var el = h.nextElementSibling; el && !/^H[23]$/.test(el.tagName);
         el = el.nextElementSibling) {
      el.querySelectorAll("table").forEach(function (t) {
        var rows = t.querySelectorAll("tbody tr");
        all = Math.max(all, rows.length);
        if (shown === null && !folded(t)) {
          shown = Array.prototype.map.call(rows, function (r) {
            return r.cells[0].textContent.trim();
          });
        }
      });
    }
    seen.frameworks.push({shown: shown || [], all: all});
  });
  document.documentElement.setAttribute("data-seen", JSON.stringify(seen));
  // Collapsed sections are measured open: what a reader sees after a click counts too.
  document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  function short(t) { return (t || "").trim().slice(0, 40); }
  document.querySelectorAll(".table-wrap").forEach(function (w) {
    if (w.scrollWidth > w.clientWidth + 1) {
      var th = w.querySelector("th");
      faults.push("table wider than the page by " + (w.scrollWidth - w.clientWidth) +
                  " px: " + short(th ? th.textContent : ""));
    }
  });
  document.querySelectorAll("th, td").forEach(function (c) {
    if (c.scrollWidth > c.clientWidth + 1) faults.push("cut cell: " + short(c.textContent));
  });
  document.querySelectorAll("svg.bucketsim-chart").forEach(function (svg) {
    var box = svg.getBoundingClientRect();
    var texts = Array.prototype.slice.call(svg.querySelectorAll("text"));
    var rects = texts.map(function (t) { return t.getBoundingClientRect(); });
    var dots = Array.prototype.map.call(svg.querySelectorAll("circle"), function (c) {
      return c.getBoundingClientRect();
    });
    texts.forEach(function (t, i) {
      var r = rects[i];
      dots.forEach(function (q) {
        var w = Math.min(r.right, q.right) - Math.max(r.left, q.left);
        var h = Math.min(r.bottom, q.bottom) - Math.max(r.top, q.top);
        if (w > 2 && h > 2) faults.push("label over a dot: " + short(t.textContent));
      });
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 ||
          r.bottom > box.bottom + 1) {
        faults.push("label outside its chart (" + svg.getAttribute("aria-label").slice(0, 30) +
                    "): " + short(t.textContent));
      }
      for (var j = 0; j < i; ++j) {
        var q = rects[j];
        var w = Math.min(r.right, q.right) - Math.max(r.left, q.left);
        var h = Math.min(r.bottom, q.bottom) - Math.max(r.top, q.top);
        if (w > 2 && h > 2) {
          faults.push("labels overlap: " + short(t.textContent) + " / " +
                      short(texts[j].textContent));
        }
      }
    });
  });
  document.documentElement.setAttribute("data-layout", JSON.stringify(faults));
});
</script>"""


def probed_attribute(dom, name, copy):
    found = re.search(name + r'="([^"]*)"', dom)
    if not found:
        fail(f"the layout probe did not run on {copy}")
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&")
                      .replace("&lt;", "<").replace("&gt;", ">"))


def layout_probe(chromium, html_path, profile, work_dir, width):
    """(layout faults, what is seen up front) the layout probe found on a copy of the page (in
    `work_dir`, same resources) in a window `width` px wide."""
    html = open(html_path, encoding="utf-8").read()
    name = os.path.basename(html_path)[:-len(".html")] + "-" + os.path.basename(
        os.path.dirname(html_path))
    copy = os.path.join(work_dir, f"{name}.{width}.layout.html")
    with open(copy, "w", encoding="utf-8") as f:
        f.write(html.replace("<head>", "<head>" + LAYOUT_PROBE, 1) if "<head>" in html
                else LAYOUT_PROBE + html)
    dom, _ = load(chromium, copy, profile, width)
    return probed_attribute(dom, "data-layout", copy), probed_attribute(dom, "data-seen", copy)


# At most this many runs' lines on a chart a reader sees up front (report/run_selection.h).
MAX_SERIES = 6


def reading_faults(seen, many_runs):
    """What a reader of a page of many runs would miss or wade through up front. `many_runs`:
    (runs, policies, bucketing policies) of a cap search, whose rows and charts must fold."""
    faults = []
    for i, report in enumerate(seen["reports"]):
        if report["runs"] > 1 and not report["advice"].startswith("Recommendation"):
            faults.append(f"report {i + 1}: no recommendation up front")
        elif report["runs"] > 1 and not report["before_tables"]:
            faults.append(f"report {i + 1}: the recommendation comes after a table")
    for chart in seen["charts"]:
        if not chart["folded"] and chart["series"] > MAX_SERIES:
            faults.append(f"{chart['series']} runs' lines on a chart: {chart['label']}")
    if many_runs:
        runs, policies, bucketing = many_runs
        if not any(c["folded"] and c["series"] == runs for c in seen["charts"]):
            faults.append(f"no folded chart of all {runs} runs")
        for table in seen["frameworks"]:
            if len(table["shown"]) != policies or len(set(table["shown"])) != policies:
                faults.append(f"Across frameworks rows up front: {table['shown']}")
            if table["all"] != runs:
                faults.append(f"Across frameworks: {table['all']} rows folded, not {runs}")
        if seen["lifetimes"] != bucketing:
            faults.append(f"{seen['lifetimes']} bucket lifetime charts up front, not {bucketing}")
    return faults


# What a page may state in MiB whatever its unit: the bucket cap, a setting (fairscale's
# bucket_cap_mb: "cap (MiB)", "p @ 25 MiB", "at cap 25 MiB", "Caps 1, 5 and 25 MiB",
# "bucket_cap_mb from 1 to 100 MiB", "the least cap that buckets any request is 3.01 MiB").
CAP_PHRASES = re.compile(
    r"\bcap \(MiB\)|@ [\d.]+ MiB|\b[Cc]aps? [\d.]+(?:(?:, | and )[\d.]+)* MiB"
    r"|bucket_cap_mb from [\d.]+ to [\d.]+ MiB|least cap that buckets any request is [\d.]+ MiB")
UNIT = re.compile(r"\b(KiB|MiB|GiB|TiB)\b|(?<![\w.])\d[\d.]* (B)\b|\((B)\)")


def page_units(html):
    """The byte units a page states its figures in (byte_unit.h's exemptions left out)."""
    html = re.sub(r"<style>.*?</style>", " ", html, flags=re.S)
    # Out-of-memory descriptions quote the failed allocation as PyTorch does; the context block
    # quotes the command line.
    html = re.sub(r'<p class="oom">.*?</p>|<td[^>]*>OOM at event.*?</td>'
                  r'|<dl class="context">.*?</dl>|<footer>.*?</footer>', " ", html, flags=re.S)
    text = CAP_PHRASES.sub(" ", unescape(re.sub(r"<[^>]+>", " ", html)))
    return {next(g for g in match.groups() if g) for match in UNIT.finditer(text)}


def png_pixels(path):
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB or RGBA PNG, stdlib only."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path} is not a PNG")
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            if depth != 8 or color not in (2, 6):
                fail(f"unexpected PNG format: depth {depth}, colour type {color}")
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if kind == 1:
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 0xFF
        elif kind == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, previous))
        elif kind == 3:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                a = line[i - channels] if i >= channels else 0
                b = previous[i]
                c = previous[i - channels] if i >= channels else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, channels, rows


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    binary, source_dir = sys.argv[1], sys.argv[2]
    chromium = find_chromium()
    if chromium is None:
        print("SKIP: chromium is not installed (tools/setup.sh installs Debian's chromium)")
        return 77

    with tempfile.TemporaryDirectory(prefix="bucketsim-browser-") as tmp:
        report_json = os.path.join(tmp, "compare.json")
        sweep_json = os.path.join(tmp, "sweep.json")
        out_dir = os.path.join(tmp, "page")
        profile_json = "traces/profiles/h100-8gpu-nvlink.json"
        many = {name: os.path.join(tmp, name, "report.html")
                for name in ("frameworks", "auto", "two-traces")}
        for page in many.values():
            os.makedirs(os.path.dirname(page))
        for args in (["compare", "traces/tiny-ws2.json", "--json", report_json],
                     ["sweep", "traces/tiny-ws2.json", "--bucket-cap-mb", "0.0625,1", "--policy",
                      "backward-only", "--policy", "unbucketed", "--profile",
                      "traces/profiles/h100-8gpu-nvlink.json", "--budget", "8MiB", "--json",
                      sweep_json],
                     ["report", report_json, sweep_json, "-o", out_dir],
                     ["compare", "traces/gpt-24l-h1024-ws8.json", "--policy", "backward-only",
                      "--policy", "ddp", "--policy", "zero12", "--policy", "megatron", "--policy",
                      "fsdp2", "--policy", "hold-until-end", "--policy", "unbucketed",
                      "--profile", profile_json, "--html", many["frameworks"]],
                     ["sweep", "traces/gpt-24l-h1024-ws8.json", "--bucket-cap-mb", "1,5,25,auto",
                      "--policy", "backward-only", "--policy", "ddp", "--policy", "fsdp2",
                      "--policy", "unbucketed", "--profile", profile_json, "--html",
                      many["auto"]],
                     ["sweep", "traces/gpt-4l-h256-ws4.json", "traces/convnet-ws2.json",
                      "--bucket-cap-mb", "1,5,25,auto", "--profile", profile_json, "--budget",
                      "256MiB", "--html", many["two-traces"]]):
            run = subprocess.run([binary] + args, cwd=source_dir, capture_output=True, text=True)
            if run.returncode != 0:
                fail(f"bucketsim {' '.join(args)} exited {run.returncode}: {run.stderr}")
        html_path = os.path.join(out_dir, "report.html")
        html = open(html_path, encoding="utf-8").read()

        # 2. Nothing in the file can fetch anything.
        for pattern in (r"<script", r"<link", r"<img", r"<iframe", r"@import", r"url\("):
            if re.search(pattern, html, re.IGNORECASE):
                fail(f"report.html contains {pattern!r}: it must be self-contained")
        urls = set(re.findall(r"https?://[^\s\"'<>)]+", html)) - {"http://www.w3.org/2000/svg"}
        if urls:
            fail(f"report.html names URLs: {sorted(urls)[:5]}")
        expected_charts = len(CHART.findall(html))
        # The compare of tiny-ws2, caching model, four policies: memory over time, peak
        # composition, fragmentation, and bucket lifetimes for the three bucketing policies (6);
        # the sweep (backward-only at two caps, unbucketed): the Pareto chart, memory over time,
        # peak composition and fragmentation of one run per policy and, folded, of every run,
        # and bucket lifetimes for backward-only at 1 MB (at 0.0625 MB every gradient is larger
        # than the bucket and bypasses it) (8).
        if expected_charts != 14:
            fail(f"report.html has {expected_charts} charts, expected 14")

        profile = os.path.join(tmp, "profile")
        # 3. Loaded from disk: no network or console errors, every chart in the rendered DOM.
        dom, console = load(chromium, html_path, profile)
        problems = console + probe(chromium, html_path, profile)
        if problems:
            fail("problems loading report.html:\n  " + "\n  ".join(problems))
        rendered_charts = len(CHART.findall(dom))
        if rendered_charts != expected_charts:
            fail(f"the rendered DOM has {rendered_charts} charts, the file {expected_charts}")
        for needle in ("Memory over time", "Composition of the peak", "backward-only",
                       "peak alloc (MiB)", "<polyline", "Memory versus step time (sweep)",
                       "Pareto front", "backward-only @ 1 MiB"):
            if needle not in dom:
                fail(f"the rendered DOM lacks {needle!r}")

        # 4. The screenshot is not blank.
        shot = os.path.join(tmp, "shot.png")
        result = chromium_run(chromium, [f"--screenshot={shot}", "file://" + html_path], profile)
        if result.returncode != 0 or not os.path.exists(shot):
            fail(f"chromium --screenshot failed ({result.returncode}): {result.stderr[-2000:]}")
        width, height, channels, rows = png_pixels(shot)
        colours, non_white, total = set(), 0, 0
        for row in rows[::4]:
            for x in range(0, width * channels, channels * 2):
                pixel = row[x:x + 3]
                colours.add(pixel)
                total += 1
                non_white += pixel != b"\xff\xff\xff"
        ratio = non_white / total
        print(f"screenshot {width}x{height}: {len(colours)} colours, {ratio:.1%} not white")
        if len(colours) < 16 or ratio < 0.02:
            fail("the screenshot looks blank")

        # 5. The checks of step 3 catch a page that fetches and throws.
        control = os.path.join(tmp, "control.html")
        with open(control, "w", encoding="utf-8") as f:
            f.write('<!DOCTYPE html><html><body><img src="http://example.invalid/x.png">'
                    '<script>undefined_function();</script></body></html>')
        control_problems = probe(chromium, control, profile)
        if not control_problems:
            fail("the control page's failed fetch and script error went unnoticed")
        print(f"control page: {len(control_problems)} problem(s) caught as expected")

        # 6. Layout of the fresh pages and of the shipped examples, at two widths, and what a
        # reader sees up front. The cap search of four policies makes 36 runs (17 caps for each
        # of backward-only and ddp; fsdp2 and unbucketed fix their own); at the caps shown, two
        # make bucket buffers (ddp and fsdp2: backward-only is shown at its knee, cap 1 MiB,
        # where every request bypasses the bucket).
        examples = os.path.join(source_dir, "reports", "examples")
        pages = [(html_path, None), (many["frameworks"], None), (many["auto"], (36, 4, 2)),
                 (many["two-traces"], None)] + [
                     (os.path.join(examples, name, "report.html"), None)
                     for name in ("gpt-24l-h1024-ws8", "frameworks-gpt-24l-h1024-ws8",
                                  "sweep-gpt-4l-h256-ws4", "sweeps-gpt-4l-and-convnet")]
        for page, many_runs in pages:
            for width in (1024, 1600):
                faults, seen = layout_probe(chromium, page, profile, tmp, width)
                faults += reading_faults(seen, many_runs)
                if faults:
                    fail(f"layout of {page} at {width} px:\n  " + "\n  ".join(faults[:20]))
            shown = max((c["series"] for c in seen["charts"] if not c["folded"]), default=0)
            print(f"layout of {page} at 1024 and 1600 px: ok ({len(seen['reports'])} "
                  f"report(s), each with its recommendation; at most {shown} lines a chart)")
        # A page with no recommendation, a chart of seven runs' lines, the same policy twice in
        # its Across frameworks table and every bucket lifetime chart up front.
        unread = os.path.join(tmp, "unread", "report.html")
        os.makedirs(os.path.dirname(unread))
        lines = "".join(f"<polyline points='0,0 1,1'><title>p{i}: allocated</title></polyline>"
                        for i in range(7))
        with open(unread, "w", encoding="utf-8") as f:
            f.write('<!DOCTYPE html><html><head></head><body><main>'
                    '<h2>Policies</h2><table><tr><td>p</td></tr></table>'
                    '<section class="advice"><h2>Recommendation</h2><p>late</p></section>'
                    '<h2>Across frameworks</h2><div class="table-wrap"><table><tbody>'
                    '<tr><td>ddp</td></tr><tr><td>ddp</td></tr></tbody></table></div>'
                    '<svg class="bucketsim-chart" aria-label="memory" viewBox="0 0 100 100">' +
                    lines + '</svg><h2>Bucket lifetimes: ddp @ 1 MiB</h2>'
                    '<h2>Bucket lifetimes: ddp @ 5 MiB</h2>'
                    '<h2>ddp (<code>a</code>)</h2><h2>ddp (<code>b</code>)</h2></main></body></html>')
        _, seen = layout_probe(chromium, unread, profile, tmp, 1024)
        caught = reading_faults(seen, (2, 1, 1))
        for kind in ("report 1: the recommendation comes after a table", "7 runs' lines",
                     "no folded chart", "Across frameworks rows up front",
                     "2 bucket lifetime charts up front"):
            if not any(fault.startswith(kind) for fault in caught):
                fail(f"the reading control's '{kind}' went unnoticed: {caught}")
        seen["reports"][0]["advice"] = ""
        if "report 1: no recommendation up front" not in reading_faults(seen, None):
            fail(f"the reading control's missing recommendation went unnoticed: {seen}")
        print(f"reading control page: {len(caught)} fault(s) caught as expected")
        bad_layout = os.path.join(tmp, "bad-layout", "report.html")
        os.makedirs(os.path.dirname(bad_layout))
        with open(bad_layout, "w", encoding="utf-8") as f:
            f.write('<!DOCTYPE html><html><head></head><body style="width:600px">'
                    '<div class="table-wrap" style="overflow-x:auto"><table><tr>' +
                    "".join(f"<th style='white-space:nowrap'>column number {i}</th>"
                            for i in range(14)) +
                    '</tr></table></div><table><tr><td style="max-width:30px;overflow:hidden;'
                    'white-space:nowrap">er-group-dedup-and-more</td></tr></table>'
                    '<svg class="bucketsim-chart" aria-label="control" viewBox="0 0 200 100" '
                    'width="200" height="100"><text x="-30" y="50">clipped label</text>'
                    '<text x="100" y="80">after bwd</text><text x="104" y="80">after step</text>'
                    '<circle cx="40" cy="20" r="5"/><text x="30" y="24">fsdp2</text>'
                    '</svg></body></html>')
        faults, _ = layout_probe(chromium, bad_layout, profile, tmp, 1024)
        for kind in ("table wider than the page", "cut cell", "label outside its chart",
                     "labels overlap", "label over a dot"):
            if not any(fault.startswith(kind) for fault in faults):
                fail(f"the layout control's '{kind}' went unnoticed: {faults}")
        print(f"layout control page: {len(faults)} fault(s) caught as expected")

        # 7. One unit per page, the one its data calls for.
        for page, unit in ((html_path, "MiB"),
                           (os.path.join(examples, "sweep-gpt-4l-h256-ws4", "report.html"), "MiB"),
                           (os.path.join(examples, "gpt-24l-h1024-ws8", "report.html"), "GiB"),
                           (os.path.join(examples, "frameworks-gpt-24l-h1024-ws8", "report.html"),
                            "GiB"),
                           (os.path.join(examples, "gpt-default-vs-expandable", "report.html"),
                            "GiB")):
            units = page_units(open(page, encoding="utf-8").read())
            if units != {unit}:
                fail(f"{page} states its figures in {sorted(units)}, expected {unit} only")
            print(f"units of {os.path.basename(os.path.dirname(page))}: {unit} only")
        mixed = page_units("<table><tr><th>cap (MiB)</th><th>peak (GiB)</th></tr></table>"
                           "<svg><text>memory (MiB)</text><title>p @ 25 MiB: 1.00 GiB</title>"
                           "</svg>")
        if mixed != {"GiB", "MiB"}:
            fail(f"the unit control page's MiB and GiB went unnoticed: {mixed}")
        print("unit control page: two units caught as expected")

    print(f"PASS: {rendered_charts} charts rendered, no network or console errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
