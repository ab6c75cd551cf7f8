// The attention playground of docs/playground.md, in plain JavaScript.
//
// Each element of class "playground" carries in data-initial the inputs and outputs that
// attn_ref computed when the site was built. This script draws the view named by its
// data-view, recomputes attention in the browser on every change, and writes the current
// inputs and outputs back as JSON in data-state, where tests and curious readers can read them.
(() => {
  "use strict";

  const SVG_NS = "http://www.w3.org/2000/svg";

  // ---- Attention, computed as attn_ref.scaled_dot_product_attention computes it ----

  const dot = (a, b) => a.reduce((sum, x, i) => sum + x * b[i], 0);

  // Softmax over the allowed entries of one row of scores. The largest allowed score is
  // subtracted first, so that no exponent is positive and exp never overflows. A row with no
  // allowed key gets weights of zero, as in attn_ref (a plain softmax gives 0/0).
  // Keys, tokens and features are numbered from 0, as in the code and the notation table.
  function maskedSoftmax(scores, allowed) {
    const max = Math.max(...scores.filter((_, j) => allowed[j])); // -Infinity when none is allowed
    if (max === -Infinity) return scores.map(() => 0);
    const exps = scores.map((s, j) => (allowed[j] ? Math.exp(s - max) : 0));
    const total = exps.reduce((a, b) => a + b, 0);
    return exps.map((e) => e / total);
  }

  // softmax(Q K^T * scale + M) V for L queries and S keys; mask[i][j] is true where query i may see key j.
  function attention({ queries, keys, values, scale, mask }) {
    const scores = queries.map((q) => keys.map((k) => dot(q, k) * scale)); // (L, S)
    const weights = scores.map((row, i) => maskedSoftmax(row, mask[i])); // (L, S)
    const columns = values[0].map((_, c) => values.map((v) => v[c])); // (d_v, S)
    const output = weights.map((w) => columns.map((column) => dot(w, column))); // (L, d_v)
    return { scores, weights, output };
  }

  // ---- Small helpers ----

  function el(tag, attributes = {}, parent = null, namespace = null) {
    const node = namespace ? document.createElementNS(namespace, tag) : document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
      if (name === "text") node.textContent = value;
      else node.setAttribute(name, value);
    }
    if (parent) parent.append(node);
    return node;
  }
  const svg = (tag, attributes, parent) => el(tag, attributes, parent, SVG_NS);

  // A number for reading: fixed digits, a true minus sign, and no "-0.00".
  function fmt(x, digits = 2) {
    const text = x.toFixed(digits);
    return (/^-0\.?0*$/.test(text) ? text.slice(1) : text).replace("-", "\u2212");
  }

  const copy = (data) => JSON.parse(JSON.stringify(data));
  const SUBSCRIPTS = "\u2080\u2081\u2082\u2083\u2084\u2085\u2086\u2087\u2088\u2089";
  const subscript = (n) => String(n).replace(/\d/g, (d) => SUBSCRIPTS[d]);
  let counter = 0; // unique ids when a page holds several views

  function publish(root, state) {
    root.dataset.state = JSON.stringify(state);
  }

  // ---- View 1: attention as a soft lookup, in the plane ----

  const EXTENT = 3.5; // both planes show -3.5..3.5 on each axis
  const UNIT = 40; // SVG units per unit of the plane
  const SIZE = 2 * EXTENT * UNIT + 20; // with a margin of 10 on each side
  const sx = (x) => SIZE / 2 + x * UNIT;
  const sy = (y) => SIZE / 2 - y * UNIT;
  const round2 = (x) => Math.round(x * 100) / 100;
  const clamp = (x) => Math.min(EXTENT, Math.max(-EXTENT, x));
  // The slider holds 4 log2(tau): tau = 2^(i/4), so i = 2 is tau = sqrt(2) = sqrt(d_k) for d_k = 2.
  const TAU_STEPS = { min: -8, max: 16, perOctave: 4 };

  function plane(parent, attributes) {
    const figure = el("figure", { class: "pg-figure" }, parent);
    const root = svg("svg", { viewBox: `0 0 ${SIZE} ${SIZE}`, class: "pg-plane", ...attributes }, figure);
    const grid = svg("g", { class: "pg-grid", "aria-hidden": "true" }, root);
    for (let t = -3; t <= 3; t += 1) {
      const axis = t === 0 ? " pg-axis" : "";
      svg("line", { x1: sx(t), y1: sy(-EXTENT), x2: sx(t), y2: sy(EXTENT), class: `pg-gridline${axis}` }, grid);
      svg("line", { x1: sx(-EXTENT), y1: sy(t), x2: sx(EXTENT), y2: sy(t), class: `pg-gridline${axis}` }, grid);
    }
    return { figure, root };
  }

  // An arrow from the origin to (x, y), as one path: the shaft, then the two sides of the head.
  function arrowPath(x, y) {
    const dx = x * UNIT;
    const dy = -y * UNIT;
    const length = Math.hypot(dx, dy);
    if (length < 1e-9) return "";
    const [ux, uy] = [dx / length, dy / length];
    const head = Math.min(10, length / 2);
    const [tipX, tipY] = [sx(x), sy(y)];
    const side = (s) => `${tipX - head * ux + s * 0.5 * head * uy} ${tipY - head * uy - s * 0.5 * head * ux}`;
    return `M${sx(0)} ${sy(0)}L${tipX} ${tipY}M${side(1)}L${tipX} ${tipY}L${side(-1)}`;
  }

  // The corners of the convex hull of points, in order (Andrew's monotone chain).
  function convexHull(points) {
    const sorted = [...points].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    const cross = (o, a, b) => (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]);
    const half = (list) => {
      const chain = [];
      for (const p of list) {
        while (chain.length >= 2 && cross(chain[chain.length - 2], chain[chain.length - 1], p) <= 0) chain.pop();
        chain.push(p);
      }
      return chain.slice(0, -1);
    };
    return sorted.length < 3 ? sorted : [...half(sorted), ...half([...sorted].reverse())];
  }

  function lookupView(root, initial) {
    const id = `pg${counter++}`;
    const S = initial.keys.length;
    const inputs = copy({ queries: initial.queries, mask: initial.mask, scale: initial.scale });
    const { keys, values } = initial;
    const colour = (j) => `--pg-c: var(--pg-key-${j + 1})`;

    // The query plane: keys as arrows, the query as a draggable, focusable handle.
    const planes = el("div", { class: "pg-planes" }, root);
    const queryPlane = plane(planes, { role: "group", "aria-label": "Query and keys" });
    const queryHint = "Drag the query q, or focus it and use the arrow keys (Shift for bigger steps).";
    el("figcaption", { text: `Keys k\u2080 to k${subscript(S - 1)} and the query q. ${queryHint}` }, queryPlane.figure);
    const keyArrows = keys.map((k, j) => {
      const group = svg("g", { class: "pg-key", style: colour(j), "aria-hidden": "true" }, queryPlane.root);
      svg("path", { d: arrowPath(...k), class: "pg-arrow" }, group);
      const [lx, ly] = [sx(k[0] * 1.15) + (k[0] >= 0 ? 4 : -4), sy(k[1] * 1.15) + 4];
      svg("text", { x: lx, y: ly, "text-anchor": k[0] >= 0 ? "start" : "end", text: `k${subscript(j)}` }, group);
      return group;
    });
    const queryGroup = svg("g", { class: "pg-query" }, queryPlane.root);
    const queryArrow = svg("path", { class: "pg-arrow", "aria-hidden": "true" }, queryGroup);
    const queryLabel = svg("text", { "aria-hidden": "true", text: "q" }, queryGroup);
    const handle = svg(
      "circle",
      {
        r: 9,
        class: "pg-handle",
        tabindex: 0,
        role: "slider",
        "aria-roledescription": "two-dimensional slider",
        "aria-label": "Query q",
        "aria-valuemin": -EXTENT,
        "aria-valuemax": EXTENT,
      },
      queryGroup,
    );

    // The value plane: values as points, the region they span, and the output inside it.
    const valuePlane = plane(planes, {
      role: "img",
      "aria-label": "Values and the output, their weighted average, inside the shaded region the values span.",
    });
    const valueCaption =
      `Values v\u2080 to v${subscript(S - 1)}. The output \u25c6 is their average weighted by the weights ` +
      "below: it never leaves the shaded region.";
    el("figcaption", { text: valueCaption }, valuePlane.figure);
    const hull = svg("polygon", { class: "pg-hull" }, valuePlane.root);
    const pulls = values.map((_, j) => svg("line", { class: "pg-pull", style: colour(j) }, valuePlane.root));
    const valueDots = values.map((v, j) => {
      const group = svg("g", { class: "pg-value", style: colour(j) }, valuePlane.root);
      svg("circle", { cx: sx(v[0]), cy: sy(v[1]), r: 6 }, group);
      const [lx, ly] = [sx(v[0]) + (v[0] >= 0 ? 9 : -9), sy(v[1]) + (v[1] >= 0 ? -7 : 16)];
      svg("text", { x: lx, y: ly, "text-anchor": v[0] >= 0 ? "start" : "end", text: `v${subscript(j)}` }, group);
      return group;
    });
    const outputMark = svg("path", { class: "pg-output" }, valuePlane.root);

    // The temperature slider, with sqrt(d_k) marked.
    const d_k = keys[0].length;
    const controls = el("div", { class: "pg-slider" }, root);
    el("label", { for: `${id}-tau`, text: "Temperature \u03c4: the scores are divided by \u03c4" }, controls);
    const slider = el(
      "input",
      {
        type: "range",
        id: `${id}-tau`,
        min: TAU_STEPS.min,
        max: TAU_STEPS.max,
        step: 1,
        value: Math.round(-TAU_STEPS.perOctave * Math.log2(inputs.scale)),
        list: `${id}-ticks`,
      },
      controls,
    );
    const sqrtStep = Math.round(TAU_STEPS.perOctave * Math.log2(Math.sqrt(d_k)));
    el("option", { value: sqrtStep, label: "\u221ad_k" }, el("datalist", { id: `${id}-ticks` }, controls));
    const ends = el("div", { class: "pg-ends", "aria-hidden": "true" }, controls);
    el("span", { text: "sharp" }, ends);
    const fraction = (sqrtStep - TAU_STEPS.min) / (TAU_STEPS.max - TAU_STEPS.min);
    el("span", { class: "pg-tick", style: `--pg-at: ${fraction}`, text: `\u221ad\u2096 = \u221a${d_k}` }, ends);
    el("span", { text: "flat" }, ends);
    const tauReadout = el("output", { for: `${id}-tau` }, controls);

    // The table of scores and weights, with one mask toggle per key.
    const table = el("table", { class: "pg-table" }, root);
    el("caption", { text: "Scores and weights. Untick a key to mask it." }, table);
    const head = el("tr", {}, el("thead", {}, table));
    for (const title of ["key", "q\u00b7k", "\u00f7 \u03c4", "weight"]) el("th", { scope: "col", text: title }, head);
    const body = el("tbody", {}, table);
    const rows = keys.map((_, j) => {
      const row = el("tr", { style: colour(j) }, body);
      const label = el("label", { class: "pg-toggle" }, el("th", { scope: "row" }, row));
      const toggle = el("input", { type: "checkbox" }, label);
      el("span", { class: "pg-swatch", "aria-hidden": "true" }, label);
      label.append(`key ${j}`);
      toggle.checked = inputs.mask[0][j];
      toggle.addEventListener("change", () => {
        inputs.mask[0][j] = toggle.checked;
        update();
      });
      const [dotCell, scoreCell, weightCell] = [0, 1, 2].map(() => el("td", {}, row));
      const bar = el("span", { class: "pg-bar", "aria-hidden": "true" }, weightCell);
      const fill = el("span", {}, bar);
      const number = el("span", { class: "pg-number" }, weightCell);
      return { row, toggle, dotCell, scoreCell, fill, number };
    });

    const status = el("p", { class: "pg-status", "aria-live": "polite" }, root);
    const reset = el("button", { type: "button", class: "md-button", text: "Reset the soft lookup" }, root);
    reset.addEventListener("click", () => {
      Object.assign(inputs, copy({ queries: initial.queries, mask: initial.mask, scale: initial.scale }));
      slider.value = Math.round(-TAU_STEPS.perOctave * Math.log2(inputs.scale));
      rows.forEach((r, j) => (r.toggle.checked = inputs.mask[0][j]));
      update();
    });

    function update() {
      const state = { ...copy(inputs), keys, values };
      const { scores, weights, output } = attention(state);
      const [q] = state.queries;
      const [w] = weights;
      const [out] = output;
      const allowed = inputs.mask[0];
      const none = !allowed.some(Boolean);
      const tau = 1 / inputs.scale;

      queryArrow.setAttribute("d", arrowPath(...q));
      handle.setAttribute("cx", sx(q[0]));
      handle.setAttribute("cy", sy(q[1]));
      queryLabel.setAttribute("x", sx(q[0]) + 12);
      queryLabel.setAttribute("y", sy(q[1]) - 10);
      handle.setAttribute("aria-valuenow", q[0]);
      handle.setAttribute("aria-valuetext", `x ${fmt(q[0])}, y ${fmt(q[1])}`);

      const active = values.filter((_, j) => allowed[j]);
      hull.setAttribute("points", convexHull(active).map(([x, y]) => `${sx(x)},${sy(y)}`).join(" "));
      const [ox, oy] = [sx(out[0]), sy(out[1])];
      outputMark.setAttribute("d", `M${ox} ${oy - 9}L${ox + 9} ${oy}L${ox} ${oy + 9}L${ox - 9} ${oy}Z`);
      outputMark.classList.toggle("pg-empty", none);
      values.forEach((v, j) => {
        const pull = pulls[j];
        pull.setAttribute("x1", ox);
        pull.setAttribute("y1", oy);
        pull.setAttribute("x2", sx(v[0]));
        pull.setAttribute("y2", sy(v[1]));
        pull.style.strokeWidth = 0.5 + 6 * w[j];
        pull.style.opacity = allowed[j] ? 0.25 + 0.75 * w[j] : 0;
        valueDots[j].classList.toggle("pg-off", !allowed[j]);
        keyArrows[j].classList.toggle("pg-off", !allowed[j]);
        const r = rows[j];
        r.row.classList.toggle("pg-off", !allowed[j]);
        r.dotCell.textContent = fmt(dot(q, keys[j]));
        r.scoreCell.textContent = allowed[j] ? fmt(scores[0][j]) : "\u2212\u221e";
        r.fill.style.width = `${100 * w[j]}%`;
        r.number.textContent = fmt(w[j]);
      });

      const atSqrt = Number(slider.value) === sqrtStep ? ` = \u221ad\u2096` : "";
      tauReadout.textContent =
        `\u03c4 = ${fmt(tau)}${atSqrt}, so each score is multiplied by 1/\u03c4 = ${fmt(inputs.scale, 3)}`;
      slider.setAttribute("aria-valuetext", `\u03c4 = ${fmt(tau)}${atSqrt ? ", the square root of d k" : ""}`);
      status.classList.toggle("pg-warning", none);
      status.textContent = none
        ? "Every key is masked, so there is nothing to average: a plain softmax would divide 0 by 0 and " +
          "give NaN. attn_ref returns weights of zero and an output of zero, drawn hollow at the origin " +
          "(recent versions of PyTorch's scaled_dot_product_attention return the same output)."
        : `Weights: ${w.map((x, j) => `key ${j} ${fmt(x)}`).join(", ")}. Output (${fmt(out[0])}, ${fmt(out[1])}).`;
      publish(root, { ...state, scores, weights, output });
    }

    function moveQuery(x, y) {
      inputs.queries[0] = [round2(clamp(x)), round2(clamp(y))];
      update();
    }

    handle.addEventListener("keydown", (event) => {
      const step = event.shiftKey ? 0.5 : 0.1;
      const moves = { ArrowLeft: [-step, 0], ArrowRight: [step, 0], ArrowUp: [0, step], ArrowDown: [0, -step] };
      if (!(event.key in moves)) return;
      event.preventDefault(); // the arrows move the query, not the page
      const [q] = inputs.queries;
      moveQuery(q[0] + moves[event.key][0], q[1] + moves[event.key][1]);
    });

    // Press anywhere in the query plane to move the query there, and drag to move it further.
    const toPlane = (event) => {
      const toSvg = queryPlane.root.getScreenCTM().inverse();
      const point = new DOMPoint(event.clientX, event.clientY).matrixTransform(toSvg);
      return [(point.x - SIZE / 2) / UNIT, (SIZE / 2 - point.y) / UNIT];
    };
    queryPlane.root.addEventListener("pointerdown", (event) => {
      if (event.button !== 0) return;
      event.preventDefault();
      queryPlane.root.setPointerCapture(event.pointerId);
      handle.focus({ preventScroll: true });
      moveQuery(...toPlane(event));
    });
    queryPlane.root.addEventListener("pointermove", (event) => {
      if (queryPlane.root.hasPointerCapture(event.pointerId)) moveQuery(...toPlane(event));
    });

    slider.addEventListener("input", () => {
      inputs.scale = 2 ** (-Number(slider.value) / TAU_STEPS.perOctave);
      update();
    });
    update();
  }

  // ---- View 2: self-attention on the tokens of the first tutorial ----

  function selfAttentionView(root, initial) {
    const tokens = copy(initial.tokens);
    const [T, C] = [tokens.length, tokens[0].length];
    const mask = tokens.map(() => tokens.map(() => true));
    const { scale } = initial;

    const fieldset = el("fieldset", { class: "pg-tokens" }, root);
    el("legend", { text: "Tokens X, one row per token. Q = K = V = X." }, fieldset);
    const inputTable = el("table", { class: "pg-matrix" }, fieldset);
    const inputHead = el("tr", {}, el("thead", {}, inputTable));
    el("td", {}, inputHead);
    for (let c = 0; c < C; c++) el("th", { scope: "col", text: `feature ${c}` }, inputHead);
    const inputBody = el("tbody", {}, inputTable);
    const fields = tokens.map((token, t) => {
      const row = el("tr", {}, inputBody);
      el("th", { scope: "row", text: `token ${t}` }, row);
      return token.map((_, c) => {
        const field = el(
          "input",
          { type: "number", step: "any", inputmode: "decimal", "aria-label": `token ${t}, feature ${c}` },
          el("td", {}, row),
        );
        const read = () => {
          const value = field.value.trim() === "" ? NaN : Number(field.value);
          field.setAttribute("aria-invalid", String(!Number.isFinite(value)));
          if (!Number.isFinite(value)) return; // keep the last valid number until this one is
          tokens[t][c] = value;
          update();
        };
        field.addEventListener("input", read);
        field.addEventListener("change", read);
        return field;
      });
    });

    const results = el("div", { class: "pg-matrices" }, root);
    const matrix = (caption, columns, cellClass) => {
      const figure = el("figure", { class: "pg-figure" }, results);
      const table = el("table", { class: "pg-matrix" }, figure);
      el("caption", { text: caption }, table);
      const head = el("tr", {}, el("thead", {}, table));
      el("td", {}, head);
      columns.forEach((title) => el("th", { scope: "col", text: title }, head));
      const body = el("tbody", {}, table);
      return tokens.map((_, t) => {
        const row = el("tr", {}, body);
        el("th", { scope: "row", text: `token ${t}` }, row);
        return columns.map(() => el("td", { class: cellClass }, row));
      });
    };
    const keyTitles = tokens.map((_, t) => `key ${t}`);
    const heat = matrix(`Weights softmax(X X\u1d40 / \u221a${C}): row = query, column = key`, keyTitles, "pg-heat");
    const outputCells = matrix("Output = weights \u00b7 X", tokens[0].map((_, c) => `feature ${c}`), "");
    const status = el("p", { class: "pg-status", "aria-live": "polite" }, root);
    const reset = el("button", { type: "button", class: "md-button", text: "Reset the three tokens" }, root);
    reset.addEventListener("click", () => {
      initial.tokens.forEach((token, t) => token.forEach((x, c) => (tokens[t][c] = x)));
      fill();
      update();
    });

    function fill() {
      fields.forEach((row, t) => row.forEach((field, c) => {
        field.value = tokens[t][c];
        field.setAttribute("aria-invalid", "false");
      }));
    }

    function update() {
      // Identity projections, as in the tutorial: the queries, the keys and the values are the tokens.
      const [queries, keys, values] = [copy(tokens), copy(tokens), copy(tokens)];
      const state = { tokens: copy(tokens), queries, keys, values, scale, mask };
      const { scores, weights, output } = attention(state);
      weights.forEach((row, i) => row.forEach((w, j) => {
        const cell = heat[i][j];
        cell.textContent = fmt(w);
        cell.style.setProperty("--pg-weight", `${(100 * w).toFixed(1)}%`);
        cell.classList.toggle("pg-hot", w > 0.8);
      }));
      output.forEach((row, i) => row.forEach((x, c) => (outputCells[i][c].textContent = fmt(x))));
      status.textContent = weights
        .map((row, i) => `Token ${i} attends with weights ${row.map((w) => fmt(w)).join(", ")}.`)
        .join(" ");
      publish(root, { ...state, scores, weights, output });
    }

    fill();
    update();
  }

  // ---- Start every playground on the page, once ----

  const VIEWS = { lookup: lookupView, "self-attention": selfAttentionView };

  function start() {
    for (const root of document.querySelectorAll(".playground[data-initial]:not([data-state])")) {
      VIEWS[root.dataset.view](root, JSON.parse(root.dataset.initial));
    }
  }

  start();
  // With Material's instant loading, pages arrive without a reload and document$ announces each.
  if (window.document$) window.document$.subscribe(start);
})();
