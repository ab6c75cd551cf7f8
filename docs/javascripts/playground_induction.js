// The induction playground of docs/playground_induction.md, in plain JavaScript.
//
// The element of class "pgi" names in data-model the JSON file that the induction tutorial
// wrote at build (attn_ref.training.playground_json). This script reads it, runs the trained
// model's two attention layers on the tokens the reader types, draws every head's weights,
// and writes the tokens and weights back as JSON in data-state, where the tests read them.
(() => {
  "use strict";

  const SVG_NS = "http://www.w3.org/2000/svg";
  const SETTLE_MS = 250; // the live region speaks this long after the last change
  const ROLE = 0.3; // a layer-1 head scoring above this is an induction head (as in the tutorial)

  // ---- The model, read as attn_ref.training.model_from_playground_json reads it ----

  // Signed bytes times the tensor's scale, in row-major order: rows of [rows][cols].
  function tensor(stored) {
    const bytes = Uint8Array.from(atob(stored.int8), (c) => c.charCodeAt(0));
    const levels = new Int8Array(bytes.buffer);
    const [rows, cols = 1] = stored.shape;
    const out = [];
    for (let r = 0; r < rows; r++) {
      out.push(Array.from(levels.subarray(r * cols, (r + 1) * cols), (n) => n * stored.scale));
    }
    return stored.shape.length === 1 ? out.map((row) => row[0]) : out;
  }

  function readModel(document_) {
    const t = (name) => tensor(document_.tensors[name]);
    const layer = (l, names) =>
      Object.fromEntries(names.map((p) => [p, { W: t(`layers.${l}.${p}.weight`), b: t(`layers.${l}.${p}.bias`) }]));
    return {
      vocab: document_.vocab_size,
      context: document_.context_length,
      heads: document_.num_heads,
      dk: document_.embed_dim / document_.num_heads,
      E: t("token_embedding.weight"),
      P: t("position_embedding.weight"),
      layers: [layer(0, ["q_proj", "k_proj", "v_proj", "out_proj"]), layer(1, ["q_proj", "k_proj"])],
    };
  }

  // ---- The forward pass, as AttentionOnlyDecoder.forward computes it ----

  // nn.Linear: y = x W^T + b, for each row x.
  const linear = (X, { W, b }) => X.map((x) => W.map((w, o) => w.reduce((s, wc, c) => s + wc * x[c], 0) + b[o]));

  // Causal softmax(q k^T / sqrt(d_k)) for each head: weights[h][i][j], zero for j > i.
  function headWeights(Q, K, model) {
    const scale = 1 / Math.sqrt(model.dk);
    const T = Q.length;
    return Array.from({ length: model.heads }, (_, h) => {
      const lo = h * model.dk; // head h reads features lo .. lo + d_k - 1
      return Q.map((q, i) => {
        const scores = [];
        for (let j = 0; j <= i; j++) {
          let d = 0;
          for (let c = lo; c < lo + model.dk; c++) d += q[c] * K[j][c];
          scores.push(d * scale);
        }
        const max = Math.max(...scores); // subtracted so that exp never overflows
        const exps = scores.map((s) => Math.exp(s - max));
        const total = exps.reduce((a, b) => a + b, 0);
        return Array.from({ length: T }, (_, j) => (j <= i ? exps[j] / total : 0));
      });
    });
  }

  function forward(tokens, model) {
    let x = tokens.map((t, i) => model.E[t].map((e, c) => e + model.P[i][c])); // (T, C)
    const weights = [];
    for (const [l, layer] of model.layers.entries()) {
      const w = headWeights(linear(x, layer.q_proj), linear(x, layer.k_proj), model);
      weights.push(w);
      if (l === 0) {
        const V = linear(x, layer.v_proj);
        const heads = x.map((_, i) =>
          V[0].map((_, c) => {
            const h = Math.floor(c / model.dk);
            return w[h][i].reduce((s, a, j) => s + a * V[j][c], 0);
          }),
        ); // (T, C): the heads side by side
        const out = linear(heads, layer.out_proj);
        x = x.map((row, i) => row.map((v, c) => v + out[i][c])); // the residual stream layer 1 reads
      }
    }
    return weights; // [layer][head][query][key]
  }

  // For each query, the keys j <= i whose previous token is the query's token: where an
  // induction head should look. Queries with such keys make the repeated part.
  function inductionTargets(tokens) {
    return tokens.map((t, i) => tokens.map((_, j) => j >= 1 && j <= i && tokens[j - 1] === t));
  }

  // Olsson et al.'s prefix matching, per head: mean weight on those keys over the repeated part.
  function prefixScores(weights, targets) {
    const queries = targets.map((row, i) => (row.some(Boolean) ? i : -1)).filter((i) => i >= 0);
    if (queries.length === 0) return null;
    return weights.map((layer) =>
      layer.map(
        (w) => queries.reduce((s, i) => s + w[i].reduce((t, a, j) => t + (targets[i][j] ? a : 0), 0), 0) / queries.length,
      ),
    );
  }

  // ---- Reading what the reader typed ----

  function parse(text, model) {
    const words = text.trim().split(/[\s,]+/).filter(Boolean);
    const last = model.vocab - 1;
    if (words.length === 0) return { error: `Type at least one token: whole numbers from 0 to ${last}, separated by spaces.` };
    const unknown = words.find((w) => !/^\d+$/.test(w) || Number(w) > last);
    if (unknown !== undefined) return { error: `"${unknown}" is not a token. Tokens are whole numbers from 0 to ${last}.` };
    if (words.length > model.context) {
      return {
        error: `That is ${words.length} tokens. The model reads at most ${model.context}: remove ${words.length - model.context}.`,
      };
    }
    return { tokens: words.map(Number) };
  }

  // ---- Drawing ----

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
  const fmt = (x) => x.toFixed(2);

  // Viridis, as the tutorial's maps: dark for 0, yellow for 1.
  const VIRIDIS = [
    [68, 1, 84],
    [59, 82, 139],
    [33, 145, 140],
    [94, 201, 98],
    [253, 231, 37],
  ];
  function colour(a) {
    const x = Math.min(Math.max(a, 0), 1) * (VIRIDIS.length - 1);
    const i = Math.min(Math.floor(x), VIRIDIS.length - 2);
    const f = x - i;
    const [r, g, b] = VIRIDIS[i].map((c, k) => Math.round(c + f * (VIRIDIS[i + 1][k] - c)));
    return `rgb(${r},${g},${b})`;
  }

  function drawHead(figure, w, tokens, targets, query, isInduction, label) {
    const T = tokens.length;
    figure.classList.toggle("pgi-induction", isInduction);
    const map = figure.querySelector("svg");
    map.replaceChildren();
    map.setAttribute("viewBox", `0 0 ${T} ${T}`);
    for (let i = 0; i < T; i++) {
      for (let j = 0; j <= i; j++) {
        svg("rect", { x: j, y: i, width: 1.02, height: 1.02, fill: colour(w[i][j]) }, map);
      }
    }
    if (isInduction) {
      for (let i = 0; i < T; i++) {
        for (let j = 0; j <= i; j++) {
          if (targets[i][j]) svg("rect", { x: j + 0.15, y: i + 0.15, width: 0.7, height: 0.7, class: "pgi-target" }, map);
        }
      }
    }
    svg("rect", { x: 0, y: query, width: query + 1, height: 1, class: "pgi-row" }, map);
    const top = w[query].indexOf(Math.max(...w[query]));
    map.setAttribute("aria-label", `${label}: weights of ${T} queries over ${T} keys.`);
    figure.querySelector(".pgi-caption").textContent =
      `${label}${isInduction ? ", induction head" : ""}`;
    figure.querySelector(".pgi-readout").textContent =
      `Query ${query} (token ${tokens[query]}): ${fmt(w[query][top])} on key ${top} (token ${tokens[top]}).`;
  }

  function announcer(region) {
    let timer = null;
    return (text) => {
      clearTimeout(timer);
      timer = setTimeout(() => (region.textContent = text), SETTLE_MS);
    };
  }

  function build(root, model) {
    root.replaceChildren();
    const last = model.vocab - 1;
    const form = el("div", { class: "pgi-controls" }, root);
    el("label", { for: "pgi-tokens", text: `Tokens (whole numbers from 0 to ${last}, at most ${model.context})` }, form);
    const input = el("input", {
      id: "pgi-tokens",
      type: "text",
      autocomplete: "off",
      spellcheck: "false",
      "aria-describedby": "pgi-error",
    }, form);
    input.value = root.dataset.tokens;
    el("label", { for: "pgi-query", text: "Query shown in the readouts" }, form);
    const query = el("input", { id: "pgi-query", type: "range", min: 0, max: 0, step: 1, value: 0 }, form);
    const queryText = el("output", { for: "pgi-query", class: "pgi-query-value" }, form);
    const error = el("p", { id: "pgi-error", class: "pgi-error", role: "alert", hidden: "" }, root);
    const maps = el("div", { class: "pgi-maps" }, root);
    const figures = [];
    for (let l = 0; l < model.layers.length; l++) {
      for (let h = 0; h < model.heads; h++) {
        const figure = el("figure", { class: "pgi-head" }, maps);
        svg("svg", { role: "img", preserveAspectRatio: "none" }, figure);
        el("figcaption", { class: "pgi-caption" }, figure);
        el("p", { class: "pgi-readout" }, figure);
        figures.push({ figure, l, h });
      }
    }
    const legend = el("p", { class: "pgi-legend" }, root);
    el("span", { class: "pgi-scale", "aria-hidden": "true" }, legend);
    legend.append(" weight 0 to 1; rows are queries, columns keys. Outlined: the keys an induction head should pick.");
    const status = el("p", { class: "pgi-status", "aria-live": "polite" }, root);
    const say = announcer(status);

    let current = null; // the last valid tokens and their weights

    function draw() {
      const { tokens, weights, targets, scores, induction } = current;
      const i = Number(query.value);
      queryText.textContent = `query ${i}, token ${tokens[i]}`;
      for (const { figure, l, h } of figures) {
        const isInduction = induction !== null && l === 1 && h === induction;
        drawHead(figure, weights[l][h], tokens, targets, i, isInduction, `Layer ${l}, head ${h}`);
      }
      return scores;
    }

    function update() {
      const parsed = parse(input.value, model);
      if (parsed.error) {
        error.textContent = parsed.error;
        error.hidden = false;
        input.setAttribute("aria-invalid", "true");
        maps.hidden = true;
        legend.hidden = true;
        query.disabled = true;
        current = null;
        root.dataset.state = JSON.stringify({ input: input.value, error: parsed.error, tokens: null, weights: null });
        say("");
        return;
      }
      error.hidden = true;
      input.removeAttribute("aria-invalid");
      maps.hidden = false;
      legend.hidden = false;
      query.disabled = false;
      const { tokens } = parsed;
      const weights = forward(tokens, model);
      const targets = inductionTargets(tokens);
      const scores = prefixScores(weights, targets);
      let induction = null;
      if (scores) {
        const best = Math.max(...scores[1]);
        if (best > ROLE) induction = scores[1].indexOf(best);
      }
      const previousQuery = Number(query.value);
      const atEnd = previousQuery === Number(query.max); // then follow the last token as the reader types
      query.max = tokens.length - 1;
      query.value = atEnd ? tokens.length - 1 : Math.min(previousQuery, tokens.length - 1);
      current = { tokens, weights, targets, scores, induction };
      draw();
      root.dataset.state = JSON.stringify({ input: input.value, error: null, tokens, weights, prefix: scores, induction });
      const repeated = targets.filter((row) => row.some(Boolean)).length;
      if (!scores) say(`${tokens.length} tokens, none repeats: no head has anything to match.`);
      else if (induction === null) say(`${tokens.length} tokens, ${repeated} in the repeated part; no layer 1 head picks the next token there.`);
      else
        say(
          `${tokens.length} tokens, ${repeated} in the repeated part. Layer 1 head ${induction} is the induction head: ` +
            `on average ${fmt(scores[1][induction])} of its weight goes to the token after the earlier occurrence.`,
        );
    }

    input.addEventListener("input", update);
    query.addEventListener("input", () => current && draw());
    update();
  }

  async function start(root) {
    try {
      const response = await fetch(root.dataset.model);
      if (!response.ok) throw new Error(response.statusText);
      build(root, readModel(await response.json()));
    } catch (problem) {
      root.replaceChildren();
      el("p", { class: "pgi-error", role: "alert", text: `The trained model could not be loaded (${problem.message}).` }, root);
    }
  }

  document.querySelectorAll(".pgi[data-model]").forEach(start);
})();
