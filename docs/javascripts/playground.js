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
  const matmul = (A, B) => A.map((row) => B[0].map((_, c) => dot(row, B.map((r) => r[c])))); // (n, m) @ (m, p)

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
  // dots are the raw q_i . k_j, scores the scaled ones (before the mask, as attn_ref computes them).
  function attention({ queries, keys, values, scale, mask }) {
    const dots = queries.map((q) => keys.map((k) => dot(q, k))); // (L, S)
    const scores = dots.map((row) => row.map((d) => d * scale)); // (L, S)
    const weights = scores.map((row, i) => maskedSoftmax(row, mask[i])); // (L, S)
    const output = matmul(weights, values); // (L, S) @ (S, d_v) -> (L, d_v)
    return { dots, scores, weights, output };
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
  const pair = ([x, y]) => `(${fmt(x)}, ${fmt(y)})`;

  const copy = (data) => JSON.parse(JSON.stringify(data));

  // A weight's colour in the colour map of the site's plots: viridis, dark purple for 0 and yellow
  // for 1. ``table`` is matplotlib's 256 colours as one string of hex triples, and a weight picks
  // colour floor(256 w) (the last for w = 1), as matplotlib's own colour maps do. The text on it
  // is black or white, whichever stands out more (WCAG's contrast, 4.5:1 or more on every colour).
  function colourMap(table) {
    const colours = Array.from({ length: table.length / 6 }, (_, i) => table.slice(6 * i, 6 * i + 6));
    const linear = (c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4);
    const luminance = (hex) => {
      const [r, g, b] = [0, 2, 4].map((i) => linear(parseInt(hex.slice(i, i + 2), 16) / 255));
      return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    return (w) => {
      const hex = colours[Math.min(colours.length - 1, Math.max(0, Math.floor(w * colours.length)))];
      const L = luminance(hex);
      return { background: `#${hex}`, ink: (L + 0.05) / 0.05 >= 1.05 / (L + 0.05) ? "#000" : "#fff" };
    };
  }
  const SUBSCRIPTS = "\u2080\u2081\u2082\u2083\u2084\u2085\u2086\u2087\u2088\u2089";
  const subscript = (n) => String(n).replace(/\d/g, (d) => SUBSCRIPTS[d]);
  let counter = 0; // unique ids when a page holds several views

  function publish(root, state) {
    root.dataset.state = JSON.stringify(state);
  }

  // The sentence under a view's table, written in the same frame as the table, and a polite live
  // region that speaks it once a value has settled, not on every step of a drag: say(text) writes
  // the sentence at once and the live region SETTLE_MS after the last call.
  const SETTLE_MS = 250;
  function announcer(parent) {
    const sentence = el("p", { class: "pg-status" }, parent);
    const region = el("p", { class: "pg-live", "aria-live": "polite" }, parent);
    let [started, timer] = [false, 0];
    const say = (text, warning = false) => {
      sentence.classList.toggle("pg-warning", warning);
      sentence.textContent = text;
      const speak = () => (region.textContent = text);
      clearTimeout(timer);
      if (started) timer = setTimeout(speak, SETTLE_MS);
      else speak(); // the first text at once, as the view is drawn: nothing has changed yet
      started = true;
    };
    return { sentence, region, say };
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

  // A plane: an SVG drawing, and over it, on a stage of the same size, the handles a reader moves.
  function plane(parent, label) {
    const figure = el("figure", { class: "pg-figure" }, parent);
    const stage = el("div", { class: "pg-stage", role: "group", "aria-label": label }, figure);
    const root = svg("svg", { viewBox: `0 0 ${SIZE} ${SIZE}`, class: "pg-plane", "aria-hidden": "true" }, stage);
    const grid = svg("g", { class: "pg-grid", "aria-hidden": "true" }, root);
    for (let t = -3; t <= 3; t += 1) {
      const axis = t === 0 ? " pg-axis" : "";
      svg("line", { x1: sx(t), y1: sy(-EXTENT), x2: sx(t), y2: sy(EXTENT), class: `pg-gridline${axis}` }, grid);
      svg("line", { x1: sx(-EXTENT), y1: sy(t), x2: sx(EXTENT), y2: sy(t), class: `pg-gridline${axis}` }, grid);
    }
    return { figure, stage, root };
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

  // Where a point's label goes: beyond the point, away from the origin, on the side it leans to,
  // and on the other side when the plane's edge is too close.
  function placeLabel(text, [x, y], gap) {
    const length = Math.hypot(x, y) || 1;
    const dx = (gap * Math.abs(x)) / length + 3;
    const width = text.getComputedTextLength() || 20;
    const right = x >= 0 ? sx(x) + dx + width <= SIZE : sx(x) - dx - width < 0;
    text.setAttribute("x", right ? sx(x) + dx : sx(x) - dx);
    text.setAttribute("y", Math.min(SIZE - 4, Math.max(24, sy(y) - (gap * y) / length + 5)));
    text.setAttribute("text-anchor", right ? "start" : "end");
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

  // A point a reader moves: a focusable two-dimensional slider, an HTML element over the drawing,
  // wider than the dot it shows so that a finger finds it. Only the handles keep a finger from
  // scrolling the page (touch-action in the stylesheet; Chromium ignores it on SVG's inner elements).
  function handle(stage, label, className, style = "") {
    return el(
      "div",
      {
        class: `pg-handle ${className}`,
        style,
        tabindex: 0,
        role: "slider",
        "aria-roledescription": "two-dimensional slider",
        "aria-label": label,
        "aria-valuemin": -EXTENT,
        "aria-valuemax": EXTENT,
      },
      stage,
    );
  }

  function lookupView(root, initial) {
    const id = `pg${counter++}`;
    const S = initial.keys.length;
    const { queries, keys, values, mask, scale } = initial;
    const first = () => copy({ queries, keys, values, mask, scale });
    const inputs = first();
    const colour = (j) => `--pg-c: var(--pg-key-${j + 1})`;
    const last = subscript(S - 1);

    // The two planes, side by side where there is room and stacked on a phone, so that the output
    // moves in sight of the hand; a picture, for the page's measures (data-picture).
    const planes = el("div", { class: "pg-planes", "data-picture": "" }, root);
    const queryPlane = plane(planes, "Query and keys");
    el("figcaption", { text: `The query q and the keys k\u2080 to k${last}.` }, queryPlane.figure);
    const valuePlane = plane(planes, "Values and the output");
    el("figcaption", { text: `The values v\u2080 to v${last} and the output \u25c6.` }, valuePlane.figure);
    // The weights, in a strip under the planes that stays on the screen while a point is dragged
    // (on a phone, where the planes fill the screen, it holds to the screen's bottom edge): what
    // the hand changes, in sight of the hand. The table below says the same to a screen reader.
    const strip = el("div", { class: "pg-strip", "aria-hidden": "true", style: `--pg-keys: ${S}` }, root);
    const stripKeys = inputs.keys.map((_, j) => {
      const item = el("div", { class: "pg-strip-key", style: colour(j) }, strip);
      el("span", { class: "pg-strip-name", text: `k${subscript(j)}` }, item);
      const number = el("span", { class: "pg-strip-number" }, item);
      const fill = el("span", {}, el("span", { class: "pg-strip-bar" }, item));
      return { item, number, fill };
    });
    const help = el("p", { class: "pg-help", id: `${id}-help` }, root);
    help.textContent =
      "Drag the query, a key's tip or a value, or focus one (Tab) and move it with the arrow keys, " +
      "Shift for bigger steps. The output \u25c6 is the values' average, weighted by the weights below: " +
      "it never leaves the shaded region the values span.";

    const keyArrows = inputs.keys.map((_, j) => {
      const group = svg("g", { class: "pg-key", style: colour(j), "aria-hidden": "true" }, queryPlane.root);
      const arrow = svg("path", { class: "pg-arrow" }, group);
      const label = svg("text", { text: `k${subscript(j)}` }, group);
      return { group, arrow, label };
    });
    const queryGroup = svg("g", { class: "pg-query" }, queryPlane.root);
    const queryArrow = svg("path", { class: "pg-arrow", "aria-hidden": "true" }, queryGroup);
    const queryLabel = svg("text", { "aria-hidden": "true", text: "q" }, queryGroup);

    const hull = svg("polygon", { class: "pg-hull" }, valuePlane.root);
    const pulls = inputs.values.map((_, j) => svg("line", { class: "pg-pull", style: colour(j) }, valuePlane.root));
    const valueLabels = inputs.values.map((_, j) =>
      svg("text", { class: "pg-value-label", style: colour(j), text: `v${subscript(j)}` }, valuePlane.root),
    );
    const outputMark = svg("path", { class: "pg-output", "aria-hidden": "true" }, valuePlane.root);

    // Handles last, so that they are drawn on top and come first to a pointer.
    // Keyboard order: the query, each key, each value.
    const queryHandle = { list: "queries", j: 0, el: handle(queryPlane.stage, "Query q", "pg-q") };
    const handles = [
      ...keys.map((_, j) => ({ list: "keys", j, el: handle(queryPlane.stage, `Key ${j}`, "pg-k", colour(j)) })),
      queryHandle,
      ...values.map((_, j) => ({ list: "values", j, el: handle(valuePlane.stage, `Value ${j}`, "pg-v", colour(j)) })),
    ];
    queryHandle.el.classList.add("pg-first"); // where the skip link lands
    for (const part of [queryPlane.stage, valuePlane.stage, ...handles.map((h) => h.el)]) {
      part.setAttribute("aria-describedby", help.id); // the planes' text alternative, with the live text
    }

    // The temperature slider, with sqrt(d_k) marked.
    const d_k = inputs.keys[0].length;
    const controls = el("div", { class: "pg-slider" }, root);
    el("label", { for: `${id}-tau`, text: "Temperature \u03c4: the scores are divided by \u03c4" }, controls);
    const stepOf = (scale) => Math.round(-TAU_STEPS.perOctave * Math.log2(scale));
    const slider = el(
      "input",
      {
        type: "range",
        id: `${id}-tau`,
        min: TAU_STEPS.min,
        max: TAU_STEPS.max,
        step: 1,
        value: stepOf(inputs.scale),
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

    // The scores before the softmax, and the weights after it, with one mask toggle per key.
    const table = el("table", { class: "pg-table" }, root);
    const caption = "The scores before the softmax (q\u00b7k\u2c7c, then divided by \u03c4) and the weights after it.";
    el("caption", { text: `${caption} Untick a key to mask it.` }, table);
    const head = el("tr", {}, el("thead", {}, table));
    for (const title of ["key", "q\u00b7k\u2c7c", "\u00f7 \u03c4", "weight"]) {
      el("th", { scope: "col", text: title }, head);
    }
    const body = el("tbody", {}, table);
    const rows = inputs.keys.map((_, j) => {
      const row = el("tr", { style: colour(j) }, body);
      const label = el("label", { class: "pg-toggle" }, el("th", { scope: "row" }, row));
      const toggle = el("input", { type: "checkbox" }, label);
      el("span", { class: "pg-swatch", "aria-hidden": "true" }, label);
      label.append(`key ${j}`);
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

    const { say } = announcer(root);
    const reset = el("button", { type: "button", class: "md-button", text: "Reset the soft lookup" }, root);
    reset.addEventListener("click", () => {
      Object.assign(inputs, first());
      update();
    });

    function update() {
      const state = copy(inputs);
      const { dots, scores, weights, output } = attention(state);
      const { keys, values } = state;
      const [q] = state.queries;
      const [w] = weights;
      const [out] = output;
      const allowed = state.mask[0];
      const none = !allowed.some(Boolean);
      const tau = 1 / state.scale;

      for (const h of handles) {
        const [x, y] = state[h.list][h.j];
        h.el.style.left = `${(100 * sx(x)) / SIZE}%`;
        h.el.style.top = `${(100 * sy(y)) / SIZE}%`;
        h.el.setAttribute("aria-valuenow", x);
        h.el.setAttribute("aria-valuetext", `x ${fmt(x)}, y ${fmt(y)}`);
      }
      queryArrow.setAttribute("d", arrowPath(...q));
      placeLabel(queryLabel, q, 18);
      keys.forEach((k, j) => {
        keyArrows[j].arrow.setAttribute("d", arrowPath(...k));
        placeLabel(keyArrows[j].label, k, 16);
      });

      const active = values.filter((_, j) => allowed[j]);
      hull.setAttribute("points", convexHull(active).map(([x, y]) => `${sx(x)},${sy(y)}`).join(" "));
      const [ox, oy] = [sx(out[0]), sy(out[1])];
      const r = Math.max(9, (7 * SIZE) / (valuePlane.root.getBoundingClientRect().width || SIZE)); // 7 px at least
      outputMark.setAttribute("d", `M${ox} ${oy - r}L${ox + r} ${oy}L${ox} ${oy + r}L${ox - r} ${oy}Z`);
      outputMark.classList.toggle("pg-empty", none);
      values.forEach((v, j) => {
        const pull = pulls[j];
        pull.setAttribute("x1", ox);
        pull.setAttribute("y1", oy);
        pull.setAttribute("x2", sx(v[0]));
        pull.setAttribute("y2", sy(v[1]));
        pull.style.strokeWidth = 0.5 + 6 * w[j];
        pull.style.opacity = allowed[j] ? 0.25 + 0.75 * w[j] : 0;
        placeLabel(valueLabels[j], v, 16);
        for (const part of [keyArrows[j].group, handles[j].el, handles[S + 1 + j].el, valueLabels[j]]) {
          part.classList.toggle("pg-off", !allowed[j]);
        }
        const s = stripKeys[j];
        s.item.classList.toggle("pg-off", !allowed[j]);
        s.number.textContent = allowed[j] ? fmt(w[j]) : "masked";
        s.fill.style.width = `${100 * w[j]}%`;
        const r = rows[j];
        r.toggle.checked = allowed[j];
        r.row.classList.toggle("pg-off", !allowed[j]);
        r.dotCell.textContent = fmt(dots[0][j]);
        r.scoreCell.textContent = allowed[j] ? fmt(scores[0][j]) : "\u2212\u221e";
        r.fill.style.width = `${100 * w[j]}%`;
        r.number.textContent = fmt(w[j]);
      });

      slider.value = stepOf(state.scale);
      const atSqrt = Number(slider.value) === sqrtStep ? ` = \u221ad\u2096` : "";
      const multiplier = `1/\u03c4 = ${fmt(state.scale, 3)}`;
      tauReadout.textContent = `\u03c4 = ${fmt(tau)}${atSqrt}, so each score is multiplied by ${multiplier}`;
      slider.setAttribute("aria-valuetext", `\u03c4 = ${fmt(tau)}${atSqrt ? ", the square root of d k" : ""}`);
      say(
        none
          ? "Every key is masked, so there is nothing to average: a plain softmax would divide 0 by 0 and " +
              "give NaN. attn_ref returns weights of zero and an output of zero, drawn hollow at the origin " +
              "(recent versions of PyTorch's scaled_dot_product_attention return the same output)."
          : `Weights: ${w.map((x, j) => `key ${j} ${fmt(x)}`).join(", ")}. Output ${pair(out)}.`,
        none,
      );
      publish(root, { ...state, dots, scores, weights, output });
    }

    function move(h, [x, y]) {
      inputs[h.list][h.j] = [round2(clamp(x)), round2(clamp(y))];
      update();
    }

    for (const h of handles) {
      h.el.addEventListener("keydown", (event) => {
        const step = event.shiftKey ? 0.5 : 0.1;
        const moves = { ArrowLeft: [-step, 0], ArrowRight: [step, 0], ArrowUp: [0, step], ArrowDown: [0, -step] };
        if (!(event.key in moves)) return;
        event.preventDefault(); // the arrows move the point, not the page
        const [x, y] = inputs[h.list][h.j];
        move(h, [x + moves[event.key][0], y + moves[event.key][1]]);
      });
    }

    // A pointer on a handle drags it (the nearest, where handles overlap), from where it was
    // grabbed. The mouse may also press anywhere else in the query plane to bring the query there;
    // a finger elsewhere scrolls the page.
    for (const { stage: area, root: drawing } of [queryPlane, valuePlane]) {
      let drag = null; // the handle being dragged, and the offset from the pointer to its centre
      const toPlane = (event) => {
        const point = new DOMPoint(event.clientX, event.clientY).matrixTransform(drawing.getScreenCTM().inverse());
        return [(point.x - SIZE / 2) / UNIT, (SIZE / 2 - point.y) / UNIT];
      };
      const near = handles.filter((h) => area.contains(h.el));
      area.addEventListener("pointerdown", (event) => {
        const [px, py] = toPlane(event);
        const distance = (h) => Math.hypot(inputs[h.list][h.j][0] - px, inputs[h.list][h.j][1] - py);
        const nearest = () => near.reduce((a, b) => (distance(b) < distance(a) ? b : a));
        const grabbed = event.target.closest(".pg-handle") && nearest();
        const h = grabbed || (area === queryPlane.stage && event.pointerType === "mouse" ? queryHandle : null);
        if (!h || event.button !== 0) return;
        event.preventDefault();
        area.setPointerCapture(event.pointerId);
        h.el.focus({ preventScroll: true });
        const [x, y] = grabbed ? inputs[h.list][h.j] : [px, py];
        drag = { h, offset: [x - px, y - py], pointer: event.pointerId };
        if (!grabbed) move(h, [px, py]);
      });
      area.addEventListener("pointermove", (event) => {
        if (!drag || drag.pointer !== event.pointerId) return;
        const [px, py] = toPlane(event);
        move(drag.h, [px + drag.offset[0], py + drag.offset[1]]);
      });
      const drop = () => (drag = null);
      area.addEventListener("pointerup", drop);
      area.addEventListener("pointercancel", drop);
    }

    slider.addEventListener("input", () => {
      inputs.scale = 2 ** (-Number(slider.value) / TAU_STEPS.perOctave);
      update();
    });
    update();
  }

  // ---- View 2: self-attention on three tokens, with projections and a causal mask ----

  const LIMIT = 100; // typed numbers stay within -LIMIT..LIMIT: scores stay finite, exp stays exact enough

  // What a typed number means, or why it means nothing: { value } or { error }.
  function parse(text) {
    const cleaned = text.trim().replace(/\u2212/g, "-").replace(",", ".");
    const value = cleaned === "" ? NaN : Number(cleaned);
    if (cleaned === "") return { error: " is empty" };
    if (!Number.isFinite(value)) return { error: `: \u201c${text.trim()}\u201d is not a number` };
    if (Math.abs(value) > LIMIT) return { error: `: ${text.trim()} is beyond \u00b1${LIMIT}, the view's limit` };
    return { value };
  }

  const fmtInput = (x) => String(x).replace("-", "\u2212");

  function selfAttentionView(root, initial) {
    const id = `pg${counter++}`;
    const first = () => copy({ tokens: initial.tokens, W_Q: initial.W_Q, W_K: initial.W_K, causal: initial.causal });
    const colourOf = colourMap(initial.colours);
    const colourOf3 = (t) => `--pg-c: var(--pg-key-${t + 1})`; // a token's colour in the drawing
    const inputs = first();
    const [T, C] = [inputs.tokens.length, inputs.tokens[0].length];
    const d_k = inputs.W_Q[0].length;
    const scale = 1 / Math.sqrt(d_k);
    const tokenNames = inputs.tokens.map((_, t) => `token ${t}`);
    const featureNames = (n) => Array.from({ length: n }, (_, c) => `feature ${c}`);
    const invalid = new Map(); // field -> message, for every field whose text is not a usable number

    // A table of numbers: a caption, column titles (none: null), row titles, and a cell per entry.
    function table(parent, caption, rowTitles, columnTitles, make, columnCount = columnTitles.length) {
      const node = el("table", { class: "pg-matrix" }, parent);
      if (caption) el("caption", { text: caption }, node);
      if (columnTitles) {
        const head = el("tr", {}, el("thead", {}, node));
        el("td", {}, head);
        columnTitles.forEach((title) => el("th", { scope: "col", text: title }, head));
      }
      const body = el("tbody", {}, node);
      return rowTitles.map((title, r) => {
        const row = el("tr", {}, body);
        if (title) el("th", { scope: "row", text: title }, row);
        return Array.from({ length: columnCount }, (_, c) => make(el("td", {}, row), r, c));
      });
    }

    // Editable matrices: text fields (so that a wrong entry can be explained, not silently refused).
    const editors = el("div", { class: "pg-editors" }, root);
    const errors = el("p", { class: "pg-error", id: `${id}-errors`, "aria-live": "polite", hidden: "" }, root);
    const fields = [];
    function editor(name, caption, rowTitles, columnTitles, describe) {
      const box = el("fieldset", { class: "pg-inputs" }, editors);
      el("legend", {}, box).innerHTML = caption; // the script's own markup, for the subscripts
      table(box, "", rowTitles, columnTitles, (cell, r, c) => {
        const label = describe(r, c);
        const attributes = { type: "text", inputmode: "decimal", autocomplete: "off", spellcheck: "false" };
        const field = el("input", { ...attributes, "aria-label": label }, cell);
        field.addEventListener("input", () => {
          const { value, error } = parse(field.value);
          if (error) invalid.set(field, `${label}${error}; the view keeps ${fmtInput(inputs[name][r][c])} meanwhile.`);
          else {
            invalid.delete(field);
            inputs[name][r][c] = value;
          }
          update();
        });
        fields.push({ field, name, r, c });
      }, inputs[name][0].length);
    }
    const tokenField = (t, c) => `token ${t}, feature ${c}`;
    editor("tokens", "Tokens <var>X</var>: one row per token", tokenNames, featureNames(C), tokenField);
    const rowTitles = featureNames(C).map(() => ""); // a matrix, read as one: its fields name their places
    editor("W_Q", "<var>W</var><sub>Q</sub>", rowTitles, null, (r, c) => `W_Q, row ${r}, column ${c}`);
    editor("W_K", "<var>W</var><sub>K</sub>", rowTitles, null, (r, c) => `W_K, row ${r}, column ${c}`);
    fields[0].field.classList.add("pg-first"); // where the skip link lands

    const options = el("p", { class: "pg-options" }, root);
    const causalLabel = el("label", { class: "pg-toggle" }, options);
    const causal = el("input", { type: "checkbox" }, causalLabel);
    causalLabel.append("Causal: token i sees tokens 0 to i only");
    causal.addEventListener("change", () => {
      inputs.causal = causal.checked;
      update();
    });

    // The weights drawn: each token's query (top) joined to every key it may see (bottom) by a line
    // as wide as its weight, in the query's colour; a masked key gets no line. The tables under it
    // hold the numbers, and the live region says them.
    const LINKS = { width: 300, height: 150, top: 34, bottom: 116, left: 110, step: 70, widest: 12 };
    const tokenX = (t) => LINKS.left + t * LINKS.step;
    const links = el("figure", { class: "pg-figure pg-links", "data-picture": "" }, root);
    const drawing = svg("svg", { viewBox: `0 0 ${LINKS.width} ${LINKS.height}`, "aria-hidden": "true" }, links);
    const lines = inputs.tokens.map((_, i) =>
      inputs.tokens.map((_, j) => {
        const d = `M${tokenX(i)} ${LINKS.top}L${tokenX(j)} ${LINKS.bottom}`;
        return svg("path", { d, class: "pg-link", style: colourOf3(i), "data-query": i, "data-key": j }, drawing);
      }),
    );
    for (const [y, name] of [[LINKS.top, "query"], [LINKS.bottom, "key"]]) {
      svg("text", { x: 8, y, class: "pg-link-row", "dominant-baseline": "central", text: name }, drawing);
      inputs.tokens.forEach((_, t) => {
        const node = svg("g", { class: "pg-node", style: colourOf3(t) }, drawing);
        svg("circle", { cx: tokenX(t), cy: y, r: 13 }, node);
        svg("text", { x: tokenX(t), y, "text-anchor": "middle", "dominant-baseline": "central", text: t }, node);
      });
    }
    el("figcaption", { text: "Each token\u2019s query (top) joined to every key it sees (bottom): the wider the line, the larger the weight." }, links);

    const results = el("div", { class: "pg-matrices" }, root);
    const cells = (caption, columnTitles, className = "") => {
      const rows = table(el("figure", { class: "pg-figure" }, results), "-", tokenNames, columnTitles, (cell) => {
        if (className) cell.className = className;
        return cell;
      });
      results.lastChild.querySelector("caption").innerHTML = caption; // the script's own markup
      return rows;
    };
    const keyTitles = inputs.tokens.map((_, t) => `key ${t}`);
    const outputs = {
      queries: cells("Queries <var>Q</var> = <var>X W</var><sub>Q</sub>", featureNames(d_k)),
      keys: cells("Keys <var>K</var> = <var>X W</var><sub>K</sub>", featureNames(d_k)),
      dots: cells("Dot products <var>Q K</var><sup>T</sup>: row = query, column = key", keyTitles),
      scores: cells(
        `Scores <var>Q K</var><sup>T</sup> \u00f7 \u221a${d_k}, before the softmax (\u2212\u221e: masked)`,
        keyTitles,
      ),
      weights: cells("Weights: the softmax of each row of scores", keyTitles, "pg-heat"),
      output: cells("Output = weights \u00b7 <var>V</var>, with <var>V</var> = <var>X</var>", featureNames(C)),
    };

    const { say } = announcer(root);
    const reset = el("button", { type: "button", class: "md-button", text: "Reset the three tokens" }, root);
    reset.addEventListener("click", () => {
      Object.assign(inputs, first());
      invalid.clear();
      fill();
      update();
    });

    function fill() {
      for (const { field, name, r, c } of fields) field.value = inputs[name][r][c];
      causal.checked = inputs.causal;
    }

    function update() {
      const queries = matmul(inputs.tokens, inputs.W_Q); // (T, C) @ (C, d_k) -> (T, d_k)
      const keys = matmul(inputs.tokens, inputs.W_K); // (T, C) @ (C, d_k) -> (T, d_k)
      const values = copy(inputs.tokens); // W_V is the identity: V = X
      const mask = inputs.tokens.map((_, i) => inputs.tokens.map((_, j) => !inputs.causal || j <= i));
      const state = { ...copy(inputs), queries, keys, values, mask, scale };
      const { dots, scores, weights, output } = attention(state);
      const shown = { queries, keys, dots, output };
      for (const [name, matrix] of Object.entries(shown)) {
        matrix.forEach((row, i) => row.forEach((x, c) => (outputs[name][i][c].textContent = fmt(x))));
      }
      weights.forEach((row, i) => row.forEach((w, j) => {
        lines[i][j].setAttribute("stroke-width", mask[i][j] ? 0.75 + LINKS.widest * w : 0);
        lines[i][j].classList.toggle("pg-off", !mask[i][j]);
        const [cell, scoreCell] = [outputs.weights[i][j], outputs.scores[i][j]];
        cell.textContent = mask[i][j] ? fmt(w) : "masked";
        cell.classList.toggle("pg-masked", !mask[i][j]);
        const { background, ink } = colourOf(w); // the same colour in both schemes
        cell.style.backgroundColor = mask[i][j] ? background : "";
        cell.style.color = mask[i][j] ? ink : "";
        scoreCell.textContent = mask[i][j] ? fmt(scores[i][j]) : "\u2212\u221e";
        scoreCell.classList.toggle("pg-masked", !mask[i][j]);
      }));

      for (const { field } of fields) {
        const message = invalid.get(field);
        field.setAttribute("aria-invalid", String(Boolean(message)));
        if (message) field.setAttribute("aria-describedby", errors.id);
        else field.removeAttribute("aria-describedby");
      }
      errors.hidden = invalid.size === 0;
      errors.textContent = [...invalid.values()].join(" ");

      const rows = weights.map((row, i) => `Token ${i} attends with weights ${row.map((w) => fmt(w)).join(", ")}`);
      say(rows.map((row, i) => `${row}; its output is ${pair(output[i])}.`).join(" "));
      publish(root, { ...state, dots, scores, weights, output });
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

  // A skip link to a playground lands on its first control, not on the text before it.
  document.addEventListener("click", (event) => {
    const link = event.target.closest && event.target.closest('a[href^="#"]');
    const target = link && document.getElementById(decodeURIComponent(link.hash.slice(1)));
    const control = target && target.classList.contains("playground") && target.querySelector(".pg-first");
    if (!control) return;
    event.preventDefault();
    history.replaceState(null, "", link.hash);
    control.scrollIntoView({ block: "center" });
    control.focus({ preventScroll: true });
  });

  start();
  // With Material's instant loading, pages arrive without a reload and document$ announces each.
  if (window.document$) window.document$.subscribe(start);
})();
