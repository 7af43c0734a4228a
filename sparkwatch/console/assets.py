"""The console's one stylesheet and one script, served by us from the same origin (the CSP
allows ``'self'`` only, so no inline style or script is ever needed)."""

from __future__ import annotations

from sparkwatch.console.svg import PALETTE

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fff}
header{background:#20232a;padding:8px 16px}header a{color:#fff;font-weight:600;text-decoration:none}
main{padding:8px 16px}h1{font-size:20px}h2{font-size:16px;margin:18px 0 6px}
table{border-collapse:collapse}th,td{padding:3px 8px;border-bottom:1px solid #eee;text-align:left;
vertical-align:middle}th a{color:#222}
.id{color:#777;font-size:12px}.age{color:#777;font-size:12px}.note{color:#8a5a00}
.status{padding:1px 6px;border-radius:8px;background:#e6f4ea;font-size:12px}
.status-failed .status,.status.status-failed{background:#fce8e6;color:#a50e0e;font-weight:600}
.status-terminated .status,.status.status-terminated,.status-silent .status,.status-lost .status,
.status.status-lost{background:#eee;color:#555}
.status-silent .status,.status-lost .status{font-style:italic}
tr.status-silent,tr.status-lost{color:#777}
.status-idle .status,.status.status-idle{background:#fef7e0}
tr.status-failed{background:#fff5f5}tr.status-terminated{color:#777}
.charts{display:flex;flex-wrap:wrap;gap:12px}figure.chart{margin:0}
figcaption a{color:#222;text-decoration:none;font-weight:600}
.legend{font-size:12px}.key{margin-right:10px}.swatch{display:inline-block;width:10px;height:10px;
margin-right:4px}
.ranges a{margin:0 4px}.ranges a.on{font-weight:700;text-decoration:none;color:#222}
#findings li.sev-error a,#findings li.sev-warning a{color:#a50e0e}
:target{outline:2px solid #f9ab00}
""" + "".join(f".c{i}{{background:{colour}}}" for i, colour in enumerate(PALETTE))

JS = """// sparkwatch console: reload the page every data-refresh seconds (0: never).
(function () {
  var seconds = parseInt(document.body.getAttribute("data-refresh") || "0", 10);
  if (seconds > 0) { window.setTimeout(function () { window.location.reload(); }, seconds * 1000); }
})();
"""
