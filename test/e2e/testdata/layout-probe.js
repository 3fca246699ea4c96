// Measures a report page's layout in the browser and writes the result as
// JSON into <pre id="layout-probe"> for the Go test to read from the
// dumped DOM (layout_browser_test.go). Everything is measured before that
// element is added.
(function () {
  "use strict";
  // rect maps an SVG element's getBBox to page coordinates.
  function rect(el) {
    const b = el.getBBox();
    const m = el.getScreenCTM();
    const ps = [[b.x, b.y], [b.x + b.width, b.y], [b.x, b.y + b.height], [b.x + b.width, b.y + b.height]]
      .map(function (p) { return new DOMPoint(p[0], p[1]).matrixTransform(m); });
    const xs = ps.map(function (p) { return p.x; });
    const ys = ps.map(function (p) { return p.y; });
    return { x0: Math.min.apply(null, xs), x1: Math.max.apply(null, xs), y0: Math.min.apply(null, ys), y1: Math.max.apply(null, ys) };
  }
  function inside(p, r) { return p.x > r.x0 && p.x < r.x1 && p.y > r.y0 && p.y < r.y1; }
  function cellInfo(td) {
    const cs = getComputedStyle(td);
    const r = td.getBoundingClientRect();
    return {
      text: td.textContent, title: td.getAttribute("title") || "",
      scrollWidth: td.scrollWidth, clientWidth: td.clientWidth, scrollHeight: td.scrollHeight, clientHeight: td.clientHeight,
      ellipsis: cs.textOverflow === "ellipsis", left: r.left, right: r.right
    };
  }
  const out = {
    innerWidth: window.innerWidth, innerHeight: window.innerHeight,
    scrollWidth: document.documentElement.scrollWidth, scrollHeight: document.documentElement.scrollHeight,
    reasons: [], names: [], cells: [], charts: []
  };
  document.querySelectorAll("td.reason").forEach(function (td) { out.reasons.push(cellInfo(td)); });
  document.querySelectorAll("tr.job, tr.queue").forEach(function (tr) { out.names.push(cellInfo(tr.cells[0])); });
  document.querySelectorAll("td").forEach(function (td) { out.cells.push(cellInfo(td)); });
  document.querySelectorAll("svg.chart").forEach(function (svg) {
    const fig = svg.closest("figure");
    const box = svg.getBoundingClientRect();
    const legend = svg.querySelector(".chart-legend");
    const title = svg.querySelector(".chart-title");
    const c = {
      figure: fig ? (fig.getAttribute("data-job") || fig.getAttribute("data-queue") || fig.className) : "",
      svg: { x0: box.left, x1: box.right, y0: box.top, y1: box.bottom },
      legend: legend ? rect(legend) : null,
      title: title ? rect(title) : null,
      titleTooltip: title && title.querySelector("title") ? title.querySelector("title").textContent : "",
      titleText: title ? Array.prototype.map.call(title.querySelectorAll("text"), function (t) { return t.textContent; }).join("") : "",
      series: []
    };
    svg.querySelectorAll(".chart-series").forEach(function (layer) {
      const s = { name: layer.getAttribute("data-series"), points: 0, inLegend: 0, bbox: rect(layer) };
      layer.querySelectorAll("path").forEach(function (path) {
        const m = path.getScreenCTM();
        const len = path.getTotalLength();
        const n = Math.max(2, Math.ceil(len / 2));
        for (let i = 0; i <= n; i++) {
          const p = path.getPointAtLength(len * i / n).matrixTransform(m);
          s.points++;
          if (c.legend && inside(p, c.legend)) { s.inLegend++; }
        }
      });
      c.series.push(s);
    });
    out.charts.push(c);
  });
  const pre = document.createElement("pre");
  pre.id = "layout-probe";
  pre.style.display = "none";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
